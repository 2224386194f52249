/* An existing CUDA program written for CUDA's in-kernel malloc/free: each
 * thread builds a linked list, later sums and frees it. It is compiled
 * unchanged, once with `-include gpuheap/malloc.cuh`, which runs its device
 * malloc/free on gpuheap (the host malloc below stays the C library's). */
#include <cstdio>
#include <cstdlib>

struct Node {
  long long value;
  Node* next;
};

__global__ void build(Node** heads, int n, int len) {
  const int t = blockIdx.x * blockDim.x + threadIdx.x;
  if (t >= n) return;
  Node* head = NULL;
  for (int i = 0; i < len; i++) {
    Node* node = (Node*)malloc(sizeof(Node));
    if (node == NULL) break;
    node->value = (long long)t * len + i;
    node->next = head;
    head = node;
  }
  heads[t] = head;
}

__global__ void sum_and_free(Node** heads, int n, long long* sums) {
  const int t = blockIdx.x * blockDim.x + threadIdx.x;
  if (t >= n) return;
  long long s = 0;
  for (Node* node = heads[t]; node != NULL;) {
    Node* next = node->next;
    s += node->value;
    free(node);
    node = next;
  }
  sums[t] = s;
}

static Node** d_heads;
static int g_n, g_len;

extern "C" int legacy_build(int n, int len) {
  g_n = n;
  g_len = len;
  if (cudaMalloc(&d_heads, n * sizeof(Node*)) != cudaSuccess) return 1;
  build<<<(n + 127) / 128, 128>>>(d_heads, n, len);
  return cudaDeviceSynchronize() != cudaSuccess;
}

/* Returns the number of lists whose sum is wrong, or -1 on a CUDA error. */
extern "C" long long legacy_check_and_free(void) {
  long long* d_sums = NULL;
  long long* sums = (long long*)malloc(g_n * sizeof(long long)); /* host malloc */
  if (sums == NULL || cudaMalloc(&d_sums, g_n * sizeof(long long)) != cudaSuccess) return -1;
  sum_and_free<<<(g_n + 127) / 128, 128>>>(d_heads, g_n, d_sums);
  if (cudaMemcpy(sums, d_sums, g_n * sizeof(long long), cudaMemcpyDeviceToHost) != cudaSuccess) return -1;
  long long wrong = 0;
  for (int t = 0; t < g_n; t++) {
    const long long first = (long long)t * g_len, last = first + g_len - 1;
    if (sums[t] != (first + last) * g_len / 2) wrong++;
  }
  free(sums); /* host free */
  cudaFree(d_sums);
  cudaFree(d_heads);
  return wrong;
}
