// reduce_sum's grid-stride walk with 16-byte loads, introduced by v06_grid_stride_vectorized and run
// unchanged by v07 and v08: one thread's share of the input.
#ifndef HG_REDUCE_SUM_GRID_STRIDE_SUM_H
#define HG_REDUCE_SUM_GRID_STRIDE_SUM_H

// Loads in flight per thread per loop step: four independent 16-byte loads are issued before any of
// them is added, so a thread waits for one DRAM latency per 64 bytes rather than per 16.
constexpr int UNROLL = 4;

// This thread's share of values[0, n): a grid-stride walk over the float4s, plus the few scalars
// before the first 16-byte boundary (head) and after the last whole float4 (tail).
__device__ __forceinline__ float thread_sum(const float* values, int64_t n) {
  const int64_t thread = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const int64_t threads = static_cast<int64_t>(gridDim.x) * blockDim.x;

  // float4 loads need a 16-byte aligned address. A tensor from PyTorch starts aligned, a view
  // (x[1:]) may not: the first `head` (0 to 3) elements are read one by one.
  const unsigned long long address = reinterpret_cast<unsigned long long>(values);
  int64_t head = static_cast<int64_t>(((16 - (address & 15)) & 15) / 4);
  if (head > n) head = n;
  const float4* body = reinterpret_cast<const float4*>(values + head);
  const int64_t vectors = (n - head) / 4;           // whole float4s after the head
  const int64_t tail = head + 4 * vectors;          // first element after them (0 to 3 remain)

  float sum = 0.0f;
  if (thread < head) sum += values[thread];

  // Full steps: all UNROLL loads of the step are in range, so no bounds test sits between them and
  // the compiler issues the four loads back to back.
  int64_t v = thread;
  for (; v + (UNROLL - 1) * threads < vectors; v += UNROLL * threads) {
    float4 chunk[UNROLL];
#pragma unroll
    for (int u = 0; u < UNROLL; ++u) chunk[u] = body[v + u * threads];
#pragma unroll
    for (int u = 0; u < UNROLL; ++u) sum += (chunk[u].x + chunk[u].y) + (chunk[u].z + chunk[u].w);
  }
  // The last partial step: fewer than UNROLL float4s left for this thread.
  for (; v < vectors; v += threads) {
    const float4 chunk = body[v];
    sum += (chunk.x + chunk.y) + (chunk.z + chunk.w);
  }
  if (thread < n - tail) sum += values[tail + thread];
  return sum;
}

#endif  // HG_REDUCE_SUM_GRID_STRIDE_SUM_H
