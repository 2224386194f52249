/* Uses the installed package: a kernel allocating with gh_malloc. Exits 77
 * (skipped) without a GPU. */
#include <cstdio>

#include <gpuheap_device.cuh>

__global__ void k(int* ok) {
  int* p = (int*)gh_malloc(sizeof(int) * 4);
  if (p) {
    p[3] = threadIdx.x;
    atomicAdd(ok, p[3] == (int)threadIdx.x);
    gh_free(p);
  }
}

int main() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess || n == 0) {
    printf("consumer_gpu: no CUDA device, skipped\n");
    return 77;
  }
  gh_heap_t* heap = nullptr;
  if (gh_heap_create(&heap, 64u << 20, nullptr) != GH_OK || gh_device_attach(heap) != GH_OK) return 1;
  int* d_ok;
  int ok = 0;
  if (cudaMalloc(&d_ok, sizeof(int)) != cudaSuccess || cudaMemset(d_ok, 0, sizeof(int)) != cudaSuccess) return 1;
  k<<<4, 256>>>(d_ok);
  if (cudaMemcpy(&ok, d_ok, sizeof ok, cudaMemcpyDeviceToHost) != cudaSuccess) return 1;
  cudaFree(d_ok);
  gh_heap_destroy(heap);
  printf("consumer_gpu: %d of 1024 threads ok\n", ok);
  return ok == 1024 ? 0 : 1;
}
