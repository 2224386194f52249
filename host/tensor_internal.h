/* gpuheap: what the tensor manager ("tensor.c") shows its tests and the
 * framework adapters ("adapters.c"); not part of the public API. */
#ifndef GPUHEAP_HOST_TENSOR_INTERNAL_H
#define GPUHEAP_HOST_TENSOR_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "gpuheap.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Tensors of fewer bytes than this (after rounding to GH_TM_ALIGN) share
 * frames with tensors of the same kind; larger ones take runs of whole
 * frames. Half a 2 MiB frame: a packed tensor then wastes at most half a
 * frame, and a run tensor at most half of its last frame. */
#define GH_TM_SMALL_MAX ((size_t)1 << 20)
/* Alignment and rounding of every tensor. */
#define GH_TM_ALIGN ((size_t)256)

/* Tests only, on a manager whose provider is the simulation: set its
 * event lag and tier capacities (_gh_frames_sim_configure, taken under the
 * provider lock); GH_ERR_UNSUPPORTED for another provider. */
int _gh_tmgr_sim_configure(gh_tmgr_t* tm, uint32_t lag, size_t device_frames, size_t host_frames);
/* Tests only: physical frames the provider holds for this manager in
 * `tier` (simulation: its live count; other providers: GH_ERR_UNSUPPORTED). */
int _gh_tmgr_sim_live(gh_tmgr_t* tm, gh_tier_t tier, size_t* frames);
/* Check the manager's invariants (frame counts against the per-frame
 * records, budgets, tensor counts); GH_ERR_CORRUPT with the detail recorded
 * when one fails. O(frames + tensors). */
int _gh_tmgr_check(gh_tmgr_t* tm);

#ifdef __cplusplus
}
#endif

#endif /* GPUHEAP_HOST_TENSOR_INTERNAL_H */
