/*
Single pass, atomic: v07 without the counter and the last block: every block adds its partial
straight into out[0] with one atomicAdd, so out must be zeroed first (a second, tiny launch).
parent: v07_single_pass_last_block
change: each block atomicAdd's its partial into out[0] (zeroed first by the launcher) instead of
  the counter and the last block's ordered sum
hypothesis: 528 atomics on one address cost ~528 L2 clocks, well under 1 us, and no block has to
  fence, count and then sum the partials (~1 us in v07). But out[0] must start at 0, and the zeroing
  is a launch of its own (out.zero_(): ~2-3 us on the device, ~5 us of host time), which gives back
  what the single pass saved: ~0.9x v07 at 2^20, the same as v07 at 2^28. The price is
  repeatability: the float adds happen in the order the blocks finish.
prediction: 0.9x v07_single_pass_last_block at 2^20; 1.0x v07 at 2^28
outcome: 0.91x v07 [0.89, 0.92] at 2^20 (predicted 0.9x), 1.00x v07 at 2^28, as predicted (records reduce_sum.float32, run of a3e1cf2)
deterministic: no, the blocks' partials are added to out[0] in whatever order the atomics arrive
dtypes: float32
*/
// hello-gpu: record reduce_sum.float32

// warp_sum_to_lane0 and block_sum_to_thread0: v05's shuffle tree in each warp, one shared slot per
// warp, the sum in thread 0.
#include "hg_reduce.h"

// thread_sum: v06's grid-stride walk over float4s, UNROLL = 4 loads in flight a thread.
#include "grid_stride_sum.h"

// out[0] must be 0 before the launch: the launcher zeroes it.
__global__ void __launch_bounds__(256)
reduce_sum_single_pass_atomic(const float* values, float* out, int64_t n) {
  const float sum = block_sum_to_thread0(thread_sum(values, n));
  if (threadIdx.x == 0) atomicAdd(&out[0], sum);
}
