/*
Single pass, last block: v06's kernel, but the last block to finish sums the partials itself, so
the whole reduction is one launch.
parent: v06_grid_stride_vectorized
change: one launch instead of two: each block publishes its partial (store, __threadfence,
  atomicAdd on a counter); the block that counts last adds all partials in index order and resets
  the counter
hypothesis: at 2^20 the work is ~1 us of reading and v06 pays a second launch (~2-3 us device side,
  ~33 us of host time for a checked kernel() call from Python). One launch removes it; the extra
  cost is one atomic and one fence per block (528 at most) and a 528-value block_sum in the last
  block (~1 us). torch.sum at 2^20 is also one launch plus a device-wide combine, so the win over it
  comes from a leaner kernel: ~1.3x torch.sum at 2^20. At 2^28 the same reads as v06: ~1.0x.
prediction: 1.3x torch.sum at 2^20 and 1.6x v06_grid_stride_vectorized there; 1.0x torch.sum at 2^28
outcome: 1.37x torch.sum [1.35, 1.38] at 2^20 (predicted 1.3x), 1.03x [1.03, 1.04] at 2^28 (predicted 1.0x) (records reduce_sum.float32, run of a3e1cf2)
deterministic: yes, the last block adds the partials in index order whichever block finishes last
dtypes: float32
*/
// hello-gpu: record reduce_sum.float32

// warp_sum_to_lane0 and block_sum_to_thread0: v05's shuffle tree in each warp, one shared slot per
// warp, the sum in thread 0.
#include "hg_reduce.h"

// thread_sum: v06's grid-stride walk over float4s, UNROLL = 4 loads in flight a thread.
#include "grid_stride_sum.h"

// Launched with grid = min(ceil(n / 4096), 4 * SMs) blocks of 256 threads (see the launcher).
// partials holds at least gridDim.x floats; blocks_done is one int that is 0 before the launch, and the
// kernel leaves it 0 again. Two launches sharing one blocks_done must not run at the same time.
__global__ void __launch_bounds__(256)
reduce_sum_single_pass_last_block(const float* values, float* partials, int* blocks_done, float* out,
                                  int64_t n) {
  __shared__ bool is_last_block;
  const float sum = block_sum_to_thread0(thread_sum(values, n));
  if (threadIdx.x == 0) {
    partials[blockIdx.x] = sum;
    // The store above must reach memory that every SM sees before the count below says it is there:
    // otherwise the last block could read an old partial.
    __threadfence();
    const int finished_before = atomicAdd(blocks_done, 1);
    is_last_block = (finished_before == static_cast<int>(gridDim.x) - 1);
    __threadfence();   // and our reads of the partials come after the count (the acquire side)
  }
  // Every thread learns the answer; this barrier also means warp 0 has finished reading warp_sums in
  // the first block_sum_to_thread0 before the second one below overwrites them.
  __syncthreads();

  // is_last_block is the same for every thread of the block, so the barriers inside block_sum_to_thread0 are
  // reached by all of them (a barrier inside a branch is only wrong when the branch splits a block).
  if (is_last_block) {
    // volatile: read from the L2, where the other blocks' partials are, not from a stale L1 line.
    const volatile float* done_partials = partials;
    float total = 0.0f;
    for (int b = threadIdx.x; b < static_cast<int>(gridDim.x); b += blockDim.x) total += done_partials[b];
    total = block_sum_to_thread0(total);
    if (threadIdx.x == 0) {
      out[0] = total;
      *blocks_done = 0;   // ready for the next launch (the next kernel on this stream starts after this one)
    }
  }
}
