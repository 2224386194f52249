/* gpuheap: the frame providers of the CUDA library: the CUDA virtual-memory
 * API by default, the host-memory simulation on request. */
#include "frames.h"
#include "internal.h"

const gh_frames_ops_t* _gh_frames_select(gh_backend_t backend) {
  switch (backend) {
    case GH_BACKEND_DEFAULT:
    case GH_BACKEND_CUDA_VMM: return &_gh_frames_vmm;
    case GH_BACKEND_SIM: return &_gh_frames_sim;
  }
  _gh_error(GH_ERR_INVAL, "backend %d", (int)backend);
  return NULL;
}
