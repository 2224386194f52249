/* gpuheap: PyTorch's allocation entry point, failing the way PyTorch expects.
 *
 * PyTorch's CUDAPluggableAllocator makes a tensor of whatever pointer its
 * allocation function returns and does not look at it: a NULL for a
 * non-empty tensor is a tensor at address 0, and the first kernel that
 * touches it faults (an illegal-address error that ends the process's
 * CUDA context). What it does handle is a C++ exception thrown by that
 * function: it reaches Python as a RuntimeError carrying the exception's
 * message, and the program may catch it and go on. So PyTorch is given
 * gh_torch_alloc_or_throw, which is gh_torch_alloc that throws where that
 * one returns NULL for a non-empty request.
 *
 * The exception derives from std::bad_alloc (an allocation that failed);
 * its message starts with "gpuheap: out of memory" for a request neither
 * tier could hold and with "gpuheap:" followed by the error's name
 * otherwise, then gh_last_error_detail().
 */
#include <cstddef>
#include <new>
#include <string>

#include "internal.h"

namespace {

class gh_alloc_error final : public std::bad_alloc {
 public:
  explicit gh_alloc_error(std::string what) : what_(std::move(what)) {}
  const char* what() const noexcept override { return what_.c_str(); }

 private:
  std::string what_;
};

}  // namespace

extern "C" void* gh_torch_alloc_or_throw(ptrdiff_t size, int device, gh_stream_t stream) {
  void* p = nullptr;
  const int err = _gh_torch_alloc(size, device, stream, &p);
  if (err == GH_OK) return p;
  std::string what = err == GH_ERR_BUDGET ? "gpuheap: out of memory" : std::string("gpuheap: ") + gh_err_name(err);
  what += " (" + std::to_string(static_cast<long long>(size)) + " bytes on device " + std::to_string(device) + ")";
  const char* detail = gh_last_error_detail();
  if (detail != nullptr && detail[0] != '\0') what += std::string(": ") + detail;
  throw gh_alloc_error(std::move(what));
}
