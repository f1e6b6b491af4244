// The README kernel: out[i] = a[i] + b[i].
//
//   add = hello_gpu.hip(open("examples/vector_add.hip").read(), entry="vector_add")
//   out = add(a, b)          # n defaults to a.numel(); one thread per element
__global__ void vector_add(const float* a, const float* b, float* out, int n) {
  int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) out[i] = a[i] + b[i];
}
