// A whole program in the original course's style: kernels, then main() with hipMalloc/hipMemcpy,
// <vector>/<algorithm>/<cstdio> and printf. hello-gpu compiles the kernels of this file as it is:
//
//     mod = hg.load("examples/course_kernels.hip")
//     c = mod.vector_add_v3_float4(a, b)          # kernels are attributes by name
//     matmul = mod["tiled<16>"]                   # a template is instantiated by name
//
// The host code (main, fill_random, the host buffers) is left out of the device compile, blanked so
// every line keeps its number. The device code uses the C/C++ standard names the course uses:
// std::size_t parameters, INFINITY, FLT_MAX, std::numeric_limits, std::min/std::max, a kernel in an
// anonymous namespace and one in a named namespace.
#include <hip/hip_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <vector>

#define HIP_CHECK(call)                                                              \
  do {                                                                               \
    hipError_t status_ = (call);                                                     \
    if (status_ != hipSuccess) {                                                     \
      std::fprintf(stderr, "%s:%d: %s\n", __FILE__, __LINE__, hipGetErrorString(status_)); \
      std::exit(1);                                                                  \
    }                                                                                \
  } while (0)

constexpr int kBlockSize = 256;   // threads per block of the reduction and the softmax

// v1: one thread per element.
__global__ void vector_add_v1(const float* a, const float* b, float* c, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) {
    c[i] = a[i] + b[i];
  }
}

// v2: a grid-stride loop, so any grid covers any n; std::size_t indices never overflow.
__global__ void vector_add_v2_grid_stride(const float* a, const float* b, float* c, std::size_t n) {
  std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  for (std::size_t i = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) {
    c[i] = a[i] + b[i];
  }
}

// v3: four elements per load with float4 (16-byte accesses), then the n % 4 tail one at a time.
__global__ void vector_add_v3_float4(const float* __restrict__ a, const float* __restrict__ b,
                                     float* __restrict__ c, std::size_t n) {
  const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  const std::size_t first = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const std::size_t vectors = n / 4;
  const float4* a4 = reinterpret_cast<const float4*>(a);
  const float4* b4 = reinterpret_cast<const float4*>(b);
  float4* c4 = reinterpret_cast<float4*>(c);
  for (std::size_t i = first; i < vectors; i += stride) {
    float4 x = a4[i];
    float4 y = b4[i];
    c4[i] = make_float4(x.x + y.x, x.y + y.y, x.z + y.z, x.w + y.w);
  }
  for (std::size_t i = vectors * 4 + first; i < n; i += stride) {
    c[i] = a[i] + b[i];
  }
}

// Tree reduction in shared memory: each block writes the sum of its kBlockSize elements.
__global__ void block_sum_shared(const float* x, float* partial, int n) {
  __shared__ float cache[kBlockSize];
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  cache[threadIdx.x] = i < n ? x[i] : 0.0f;
  __syncthreads();
  for (int half = blockDim.x / 2; half > 0; half /= 2) {
    if (threadIdx.x < half) {
      cache[threadIdx.x] += cache[threadIdx.x + half];
    }
    __syncthreads();
  }
  if (threadIdx.x == 0) {
    partial[blockIdx.x] = cache[0];
  }
}

namespace {

// The largest finite value of each row, or -INFINITY if the row has none: one block per row.
__device__ float block_max(float value, float* scratch) {
  scratch[threadIdx.x] = value;
  __syncthreads();
  for (int half = blockDim.x / 2; half > 0; half /= 2) {
    if (threadIdx.x < half) {
      scratch[threadIdx.x] = std::max(scratch[threadIdx.x], scratch[threadIdx.x + half]);
    }
    __syncthreads();
  }
  float result = scratch[0];
  __syncthreads();
  return result;
}

__global__ void row_max_finite(const float* x, float* out, int rows, int cols) {
  __shared__ float scratch[kBlockSize];
  const float* row = x + static_cast<std::size_t>(blockIdx.x) * cols;
  float best = -INFINITY;
  for (int j = threadIdx.x; j < cols; j += blockDim.x) {
    float v = row[j];
    if (v <= FLT_MAX && v >= -FLT_MAX) {   // finite: neither +-inf nor NaN
      best = std::max(best, v);
    }
  }
  best = block_max(best, scratch);
  if (threadIdx.x == 0 && blockIdx.x < rows) {
    out[blockIdx.x] = best;
  }
}

// Numerically stable softmax of each row: subtract the row's maximum before exp.
__global__ void row_softmax(const float* x, float* y, int rows, int cols) {
  __shared__ float scratch[kBlockSize];
  const std::size_t offset = static_cast<std::size_t>(blockIdx.x) * cols;
  float row_max = -std::numeric_limits<float>::infinity();
  for (int j = threadIdx.x; j < cols; j += blockDim.x) {
    row_max = std::max(row_max, x[offset + j]);
  }
  row_max = block_max(row_max, scratch);
  float sum = 0.0f;
  for (int j = threadIdx.x; j < cols; j += blockDim.x) {
    sum += std::exp(x[offset + j] - row_max);
  }
  scratch[threadIdx.x] = sum;
  __syncthreads();
  for (int half = blockDim.x / 2; half > 0; half /= 2) {
    if (threadIdx.x < half) {
      scratch[threadIdx.x] += scratch[threadIdx.x + half];
    }
    __syncthreads();
  }
  const float total = scratch[0];
  for (int j = threadIdx.x; j < cols; j += blockDim.x) {
    y[offset + j] = std::exp(x[offset + j] - row_max) / total;
  }
}

}  // namespace

namespace course {

// y = min(max(alpha * x, lo), hi), where lo and hi default to the float range (no clamping).
__global__ void scale_clamp(const float* x, float* y, float alpha, float lo, float hi, std::ptrdiff_t n) {
  std::ptrdiff_t i = static_cast<std::ptrdiff_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) {
    y[i] = std::min(std::max(alpha * x[i], std::max(lo, -FLT_MAX)), std::min(hi, FLT_MAX));
  }
}

}  // namespace course

// C = A (m x k) * B (k x n), row-major, in TILE x TILE tiles staged in shared memory.
template <int TILE>
__global__ void tiled(const float* a, const float* b, float* c, int m, int n, int k) {
  __shared__ float a_tile[TILE][TILE];
  __shared__ float b_tile[TILE][TILE];
  const int row = blockIdx.y * TILE + threadIdx.y;
  const int col = blockIdx.x * TILE + threadIdx.x;
  float acc = 0.0f;
  for (int t = 0; t < k; t += TILE) {
    a_tile[threadIdx.y][threadIdx.x] = (row < m && t + threadIdx.x < k) ? a[row * k + t + threadIdx.x] : 0.0f;
    b_tile[threadIdx.y][threadIdx.x] = (col < n && t + threadIdx.y < k) ? b[(t + threadIdx.y) * n + col] : 0.0f;
    __syncthreads();
    for (int e = 0; e < TILE; ++e) {
      acc += a_tile[threadIdx.y][e] * b_tile[e][threadIdx.x];
    }
    __syncthreads();
  }
  if (row < m && col < n) {
    c[row * n + col] = acc;
  }
}

// ----------------------------------------------------------------------------- host code

static void fill_random(std::vector<float>& values) {
  for (float& v : values) {
    v = static_cast<float>(std::rand()) / RAND_MAX - 0.5f;
  }
}

int main() {
  const int n = 1 << 20;
  const std::size_t bytes = n * sizeof(float);
  std::vector<float> h_a(n), h_b(n), h_c(n);
  fill_random(h_a);
  fill_random(h_b);

  float *d_a, *d_b, *d_c;
  HIP_CHECK(hipMalloc(&d_a, bytes));
  HIP_CHECK(hipMalloc(&d_b, bytes));
  HIP_CHECK(hipMalloc(&d_c, bytes));
  HIP_CHECK(hipMemcpy(d_a, h_a.data(), bytes, hipMemcpyHostToDevice));
  HIP_CHECK(hipMemcpy(d_b, h_b.data(), bytes, hipMemcpyHostToDevice));

  const int blocks = (n + kBlockSize - 1) / kBlockSize;
  hipLaunchKernelGGL(vector_add_v3_float4, dim3(blocks), dim3(kBlockSize), 0, 0, d_a, d_b, d_c,
                     static_cast<std::size_t>(n));
  HIP_CHECK(hipMemcpy(h_c.data(), d_c, bytes, hipMemcpyDeviceToHost));
  float worst = 0.0f;
  for (int i = 0; i < n; ++i) {
    worst = std::max(worst, std::fabs(h_c[i] - (h_a[i] + h_b[i])));
  }
  std::printf("vector_add_v3_float4: max abs error %g\n", worst);

  const int m = 100, k = 70, cols = 90;
  dim3 tile(16, 16);
  dim3 grid((cols + 15) / 16, (m + 15) / 16);
  hipLaunchKernelGGL(HIP_KERNEL_NAME(tiled<16>), grid, tile, 0, 0, d_a, d_b, d_c, m, cols, k);
  HIP_CHECK(hipDeviceSynchronize());

  HIP_CHECK(hipFree(d_a));
  HIP_CHECK(hipFree(d_b));
  HIP_CHECK(hipFree(d_c));
  return 0;
}
