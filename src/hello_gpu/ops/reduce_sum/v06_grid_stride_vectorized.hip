/*
Grid-stride, vectorized: a grid sized to the machine (4 blocks per SM) in which every thread sums
thousands of elements in registers, reading them as float4 (16 bytes per load, four loads in flight
per loop step), before one block_sum. Two launches in all: the same kernel then sums the partials in
one block.
parent: v05_warp_shuffle
change: many elements per thread: a grid of min(ceil(n / 4096), 4 * SMs) blocks, each thread
  looping over the array with four float4 loads per step (2^28: 528 blocks, ~2000 elements per
  thread); the same kernel with one block then adds the 528 partials
hypothesis: v05 keeps 8 bytes per thread in flight and pays a block_sum per 512 elements. Here a
  thread has four 16-byte loads in flight (64 bytes), 1024 threads per SM: 64 KiB per SM, 8 MiB over
  132 SMs, well above the ~3 MiB that 4.2 TB/s x ~0.7 us latency needs; block_sum runs once per
  ~0.5M elements; and the finish is always two launches (not four). Expect the read ceiling:
  ~1.0x torch.sum at 2^28 (~256 us). At 2^20 (4 MiB, ~1 us to read) it is two launches, the second
  leaving Python ~33 us after the first (one checked kernel() call). The timer zeroes a 256 MiB
  buffer (~65 us) before each call, which hides that host time; what remains is the second launch's
  device-side gap (~1-2 us) and its one block (~2 us): ~0.8x torch.sum there.
prediction: 1.0x torch.sum at 2^28; 0.8x at 2^20 (two launches)
outcome: 1.03x torch.sum [1.03, 1.03] at 2^28 (predicted 1.0x); 0.40x at 2^20 (predicted 0.8x) (records reduce_sum.float32, run of a3e1cf2)
deterministic: yes, each thread's elements, each block's tree and the final block are fixed by n,
  the grid and the data's alignment, which do not change between runs on the same GPU
dtypes: float32
*/
// hello-gpu: record reduce_sum.float32

// warp_sum_to_lane0 and block_sum_to_thread0: v05's shuffle tree in each warp, one shared slot per
// warp, the sum in thread 0.
#include "hg_reduce.h"

// thread_sum, this rung's change: a grid-stride walk over float4s, UNROLL = 4 loads in flight a thread.
#include "grid_stride_sum.h"

// Writes one partial sum per block: partials[blockIdx.x]. Launched with one block, it sums everything
// into partials[0], which is how the launcher turns the partials into the result.
__global__ void __launch_bounds__(256)
reduce_sum_grid_stride_vectorized(const float* values, float* partials, int64_t n) {
  const float sum = block_sum_to_thread0(thread_sum(values, n));
  if (threadIdx.x == 0) partials[blockIdx.x] = sum;
}
