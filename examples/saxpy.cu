// CUDA dialect: out = alpha * x + y. Compiles for AMD too, through hello-gpu's CUDA-on-HIP prelude.
//
//   saxpy = hello_gpu.cuda(open("examples/saxpy.cu").read(), entry="saxpy")
//   out = saxpy(x, y, alpha=2.0)    # alpha is packed as a 4-byte float, n defaults to x.numel()
__global__ void saxpy(const float* __restrict__ x, const float* __restrict__ y, float* __restrict__ out,
                      float alpha, int n) {
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
    out[i] = fmaf(alpha, x[i], y[i]);
  }
}
