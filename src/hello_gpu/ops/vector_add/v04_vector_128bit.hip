/*
128-bit loads and stores: four float32 (or eight bfloat16) per instruction.
parent: v03_grid_stride
change: each thread moves one 16-byte pack of a, b and out per loop step instead of one element
hypothesis: memory is the limit, not instructions, so fewer, wider loads change little at 2^28: the
  same bytes cross the same bus. They cut the load/store instructions 4x (8x in bfloat16) and the
  index arithmetic with them, which matters where the SM's issue rate shows: bfloat16, where v03
  issues a 2-byte load per element, and the small 2^20 case. torch.add uses 128-bit accesses too.
prediction: 1.0x to 1.03x v03 at 2^28 in float32; 1.05x to 1.2x in bfloat16
outcome: 1.07x v03 [1.07, 1.08] at 2^28 float32 (predicted 1.0-1.03x), 1.65x in bfloat16 (predicted 1.05-1.2x) (records vector_add.float32, run of a3e1cf2)
deterministic: yes, one writer per element
entry: vector_add_vec128<{T}>
dtypes: float32 bfloat16
block: 256
grid: min(ceil(n / 1024), sm_count * 8)
*/
// hello-gpu: record vector_add.float32
// hello-gpu: record vector_add.bfloat16

// 16 bytes of T, aligned so that one access is one 128-bit load or store (LDG.128 / global_load_dwordx4).
template <typename T>
struct alignas(16) Pack {
  T lane[16 / sizeof(T)];
};

template <typename T>
__device__ inline T add_as_float(T x, T y) {
  return static_cast<T>(static_cast<float>(x) + static_cast<float>(y));
}

template <typename T>
__global__ void vector_add_vec128(const T* __restrict__ a, const T* __restrict__ b, T* __restrict__ out,
                                  int64_t n) {
  constexpr int kLanes = 16 / sizeof(T);
  int64_t thread = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  // A pack access needs 16-byte aligned addresses. Fresh PyTorch tensors are (256 bytes), a slice such
  // as x[1:] is not: then every thread takes the scalar loop (the condition is the same for all threads).
  bool aligned = ((reinterpret_cast<uintptr_t>(a) | reinterpret_cast<uintptr_t>(b) |
                   reinterpret_cast<uintptr_t>(out)) % 16) == 0;
  int64_t vector_end = 0;
  if (aligned) {
    const Pack<T>* a_packs = reinterpret_cast<const Pack<T>*>(a);
    const Pack<T>* b_packs = reinterpret_cast<const Pack<T>*>(b);
    Pack<T>* out_packs = reinterpret_cast<Pack<T>*>(out);
    int64_t packs = n / kLanes;
    for (int64_t p = thread; p < packs; p += stride) {
      Pack<T> x = a_packs[p], y = b_packs[p], sum;
#pragma unroll
      for (int k = 0; k < kLanes; ++k) sum.lane[k] = add_as_float(x.lane[k], y.lane[k]);
      out_packs[p] = sum;
    }
    vector_end = packs * kLanes;
  }
  // The tail (n % kLanes elements), or everything when unaligned, one element per thread per step.
  for (int64_t i = vector_end + thread; i < n; i += stride) out[i] = add_as_float(a[i], b[i]);
}
