/*
CHEAT, work left running off the timed stream, launched where no launch record looks: the HIP route.

The .hip file is v01's kernel, unchanged; the launcher v55_hides_work_unprofiled.py adds the first
seven eighths on the caller's stream and leaves the last eighth on a side stream of its own, through
hello-gpu's runtime (kernel(..., stream=side)), never joined. The end event of each timed call fires
after the seven eighths; the eighth runs beside the next call's L2 flush, in no call's time. Only
while the profiler is on (the check step's profiled calls) does it add everything on the caller's
stream, so the profile sees nothing off the timed stream; and our runtime records no launch's stream
(the per-launch stream record is Triton's JIT only). Output always right (the parent reads it after
the device synchronised). Caught by the context event after every counted timed call
(worker.ContextDrain): the context's work went on past the call's end event.
parent: v01_thread_per_element
change: an eighth of the add on an unjoined side stream, except while profiled
hypothesis: timed calls look 1/8 faster while every check and profile sees an honest kernel
entry: vector_add<{T}>
dtypes: float32 bfloat16
block: 256
grid: ceil(n / 256)
*/

template <typename T>
__global__ void vector_add(const T* __restrict__ a, const T* __restrict__ b, T* __restrict__ out, int64_t n) {
  int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) out[i] = static_cast<T>(static_cast<float>(a[i]) + static_cast<float>(b[i]));
}
