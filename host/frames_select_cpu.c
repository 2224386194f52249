/* gpuheap: what the CPU library has of the host side: the host-memory
 * simulation of frames, and no device heap. */
#include "frames.h"
#include "internal.h"

const gh_frames_ops_t* _gh_frames_select(gh_backend_t backend) {
  switch (backend) {
    case GH_BACKEND_DEFAULT:
    case GH_BACKEND_SIM: return &_gh_frames_sim;
    case GH_BACKEND_CUDA_VMM:
      _gh_error(GH_ERR_UNSUPPORTED, "the CPU library has no CUDA virtual-memory backend");
      return NULL;
  }
  _gh_error(GH_ERR_INVAL, "backend %d", (int)backend);
  return NULL;
}

/* The CPU library has no device heap for a tensor manager to own. */
int _gh_heap_create_managed(gh_heap_t** out, gh_tmgr_t* tm, uint8_t* base, size_t max_bytes, size_t online_bytes,
                            const gh_heap_options_t* opts) {
  (void)tm, (void)base, (void)max_bytes, (void)online_bytes, (void)opts;
  if (out) *out = NULL;
  return _gh_error(GH_ERR_UNSUPPORTED, "the CPU library has no device heap (heap_bytes must be 0)");
}
int _gh_heap_destroy_managed(gh_heap_t* heap) {
  return heap ? _gh_error(GH_ERR_UNSUPPORTED, "no device heap in the CPU library") : GH_OK;
}
int _gh_heap_usage(gh_heap_t* heap, size_t* used_bytes, size_t* online_bytes) {
  (void)heap, (void)used_bytes, (void)online_bytes;
  return _gh_error(GH_ERR_UNSUPPORTED, "no device heap in the CPU library");
}
int _gh_heap_online(gh_heap_t* heap, size_t online_bytes) {
  (void)heap, (void)online_bytes;
  return _gh_error(GH_ERR_UNSUPPORTED, "no device heap in the CPU library");
}
int _gh_heap_offline_tail(gh_heap_t* heap, size_t keep_bytes, size_t* online_bytes) {
  (void)heap, (void)keep_bytes, (void)online_bytes;
  return _gh_error(GH_ERR_UNSUPPORTED, "no device heap in the CPU library");
}
gh_tmgr_t* _gh_heap_manager(const gh_heap_t* heap) {
  (void)heap;
  return NULL;
}
