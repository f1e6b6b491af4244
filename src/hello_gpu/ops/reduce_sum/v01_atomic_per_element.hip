/*
Atomic per element: every thread adds its one element straight into the single output.
A negative example: the simplest code that is correct, and the slowest.
parent: v00_torch
change: one thread per element, each atomicAdd'ing its element into out[0]; no cooperation
hypothesis: 2^28 atomic adds all go to one address, and the L2 applies them one after another,
  about one per clock (~2 GHz): ~0.13 s. The compiled code sends every thread's add on its own
  (REDG.E.ADD.F32 in the sm_90 SASS: no combining within a warp, float adds are not reassociated).
  torch.sum reads the same 1 GiB in ~0.26 ms. The atomics, not the memory, set the time at every
  size (2^20: ~0.5 ms against a few us), and the order of the adds is whichever warp gets there first.
prediction: about 0.002x torch.sum at 2^28 (the claim tested: more than 50x slower); ~0.01x at 2^20
outcome: 0.47 s a call at 2^28, 2.3 GB/s: 1800x slower than torch.sum, as predicted (records reduce_sum.float32, run of a3e1cf2)
deterministic: no, the float adds happen in whatever order the atomics arrive, so the rounding changes
dtypes: float32
*/
// hello-gpu: record reduce_sum.float32

// One thread per element, 256 threads per block. The output must start at 0: the companion
// (v01_atomic_per_element.py) zeroes it before the launch.
__global__ void reduce_sum_atomic_per_element(const float* x, float* out, int n) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) atomicAdd(&out[0], x[i]);
}
