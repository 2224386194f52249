/* The drop-in malloc: tests/gpu/legacy/legacy.cu, an unchanged program using
 * in-kernel malloc/free, built with -include gpuheap/malloc.cuh; one host
 * call attaches the heap. Its nodes must come from gpuheap. */
#include "gpu_util.cuh"

extern "C" int legacy_build(int n, int len);
extern "C" long long legacy_check_and_free(void);

int main() {
  skip_without_gpu("test_gpu_dropin");
  gh_heap_t* heap = make_heap((size_t)1 << 30, 65536);
  GH_OK_OR_DIE(gh_device_attach(heap));
  const int n = 1 << 16, len = 64;
  CHECK(legacy_build(n, len) == 0);
  gh_heap_stats_t st;
  GH_OK_OR_DIE(gh_heap_stats(heap, &st));
  CHECK_EQ_U64(st.bytes_in_use, (unsigned long long)n * len * 16); /* every node is a 16-byte chunk of the heap */
  CHECK_EQ_U64(legacy_check_and_free(), 0);
  GH_OK_OR_DIE(gh_heap_stats(heap, &st));
  CHECK_EQ_U64(st.bytes_in_use, 0);
  CHECK_EQ_U64(st.double_frees + st.foreign_frees, 0);
  GH_OK_OR_DIE(gh_device_attach(nullptr));
  GH_OK_OR_DIE(gh_heap_destroy(heap));
  return gh_test_done("test_gpu_dropin");
}
