// A template kernel has no code until it is instantiated. hello-gpu calls one by naming the
// instantiation, and `hello-gpu compile-check` compiles the ones listed in these comment lines:
//
// hello-gpu: instantiate scale<float, 256>
// hello-gpu: instantiate scale<double, 128>
//
//   scale = hello_gpu.hip(source, entry="scale<float, 256>")
//   y = scale(x, alpha=0.5, block=256)    # the block size must match BLOCK
template <typename T, int BLOCK>
__global__ void __launch_bounds__(BLOCK) scale(const T* __restrict__ x, T* __restrict__ y, T alpha, int n) {
  int i = blockIdx.x * BLOCK + threadIdx.x;
  if (i < n) y[i] = alpha * x[i];
}
