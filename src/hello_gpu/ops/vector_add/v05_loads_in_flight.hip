/*
Four independent 128-bit packs per thread per loop step, all loads issued before the first add.
parent: v04_vector_128bit
change: unroll the grid-stride loop 4x and issue the 8 loads of a step before any arithmetic
hypothesis: Little's law: to sustain 4.2 TB/s with ~600 ns of DRAM latency, 2.5 MB must be in flight.
  v04 at full occupancy (2048 threads on each of 132 SMs) already has 270k threads x 32 bytes =
  8.6 MB in flight, over three times that, so more bytes per thread should not help here: the
  prediction is no change. (It would help at low occupancy: few threads, each with many loads.)
prediction: 0.98x to 1.03x v04 at 2^28
outcome: 1.02x v04 [1.02, 1.03] at 2^28 float32, within noise as predicted; 0.95x torch.add [0.95, 0.95] (records vector_add.float32, run of a3e1cf2)
deterministic: yes, one writer per element
entry: vector_add_in_flight<{T}>
dtypes: float32 bfloat16
block: 256
grid: min(ceil(n / 4096), sm_count * 8)
*/
// hello-gpu: record vector_add.float32
// hello-gpu: record vector_add.bfloat16

template <typename T>
struct alignas(16) Pack {
  T lane[16 / sizeof(T)];
};

template <typename T>
__device__ inline T add_as_float(T x, T y) {
  return static_cast<T>(static_cast<float>(x) + static_cast<float>(y));
}

constexpr int kUnroll = 4;   // packs per thread per step: 4 x 2 loads x 16 bytes = 128 bytes in flight

template <typename T>
__global__ void vector_add_in_flight(const T* __restrict__ a, const T* __restrict__ b, T* __restrict__ out,
                                     int64_t n) {
  constexpr int kLanes = 16 / sizeof(T);
  int64_t thread = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  bool aligned = ((reinterpret_cast<uintptr_t>(a) | reinterpret_cast<uintptr_t>(b) |
                   reinterpret_cast<uintptr_t>(out)) % 16) == 0;     // see v04: same for every thread
  int64_t vector_end = 0;
  if (aligned) {
    const Pack<T>* a_packs = reinterpret_cast<const Pack<T>*>(a);
    const Pack<T>* b_packs = reinterpret_cast<const Pack<T>*>(b);
    Pack<T>* out_packs = reinterpret_cast<Pack<T>*>(out);
    int64_t packs = n / kLanes;
    // Pack p + k * stride for k < kUnroll: lanes stay consecutive (coalesced) within each k.
    for (int64_t p = thread; p < packs; p += kUnroll * stride) {
      Pack<T> x[kUnroll], y[kUnroll];
#pragma unroll
      for (int k = 0; k < kUnroll; ++k) {          // every load first: 8 requests outstanding at once
        int64_t q = p + k * stride;
        if (q < packs) {
          x[k] = a_packs[q];
          y[k] = b_packs[q];
        }
      }
#pragma unroll
      for (int k = 0; k < kUnroll; ++k) {
        int64_t q = p + k * stride;
        if (q < packs) {
          Pack<T> sum;
#pragma unroll
          for (int lane = 0; lane < kLanes; ++lane) sum.lane[lane] = add_as_float(x[k].lane[lane], y[k].lane[lane]);
          out_packs[q] = sum;
        }
      }
    }
    vector_end = packs * kLanes;
  }
  for (int64_t i = vector_end + thread; i < n; i += stride) out[i] = add_as_float(a[i], b[i]);
}
