/*
Back to one tile per block, each thread moving two 128-bit packs: no grid-stride loop.
parent: v05_loads_in_flight
change: a grid of ceil(n / tile) blocks, each adding one tile of 256 threads x 2 packs (2048 floats,
  4096 bfloat16); every thread issues its 4 loads, then adds, then stores, and exits
hypothesis: v04 and v05 stay 5-7% under torch.add at 2^28 (4086 and 4174 GB/s against 4376,
  records/nvidia-h200/vector_add.float32.json). Their grid is sized for 8 resident blocks per SM,
  but v04 needs 40 registers a thread (6 blocks of 256 fit in 64k registers) and v05 56 (4 blocks):
  a quarter of v04's blocks wait for a second wave and the loop ends with part of the machine idle.
  torch.add and the Triton rungs, at 4368 GB/s, launch one short block per tile and let the block
  scheduler keep every SM full to the end. Doing the same, with two packs per thread in flight
  (the 8 elements per thread torch uses), should close the gap.
prediction: 0.98x to 1.0x torch.add at 2^28 and 2^24; 1.05x v05. Revised with the grid in bytes
  (ceil(n * itemsize / 8192); it was ceil(n / 2048) for both dtypes): float32 unchanged (the same
  grid); bfloat16 ~0.98x torch.add at 2^28, as the same kernel with that grid measured 0.984x in
  benchmarks/vector_add_grid.py (run of commit 3b81a7e)
outcome: 0.994x torch.add [0.993, 0.994] at 2^28 float32, 0.984x [0.983, 0.986] in bfloat16, as predicted (records vector_add.float32 and vector_add.bfloat16, run of 0640e65)
deterministic: yes, one writer per element
entry: vector_add_tile<{T}>
dtypes: float32 bfloat16
block: 256
grid: ceil(n * itemsize / 8192)
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

constexpr int kBlock = 256;        // threads per block (the header's block)
constexpr int kPacksPerThread = 2; // 2 x 16 bytes of a and of b in flight per thread

// The grid is ceil(n * itemsize / 8192) blocks: a block moves 256 x 2 packs of 16 bytes, 2048 float32
// or 4096 bfloat16 elements. (Counted in float32 elements, half the bfloat16 blocks found no tile, and
// those empty blocks cost 9%: records/nvidia-h200/vector_add-grid.json.)
template <typename T>
__global__ void __launch_bounds__(kBlock)
vector_add_tile(const T* __restrict__ a, const T* __restrict__ b, T* __restrict__ out, int64_t n) {
  constexpr int kLanes = 16 / sizeof(T);
  constexpr int64_t kTile = static_cast<int64_t>(kBlock) * kPacksPerThread * kLanes;   // elements per block
  const int64_t tile_start = static_cast<int64_t>(blockIdx.x) * kTile;
  if (tile_start >= n) return;
  bool aligned = ((reinterpret_cast<uintptr_t>(a) | reinterpret_cast<uintptr_t>(b) |
                   reinterpret_cast<uintptr_t>(out)) % 16) == 0;     // see v04: the same for every thread
  if (aligned && tile_start + kTile <= n) {
    // A whole tile: pack k of this thread is pack (tile_start / kLanes) + k * kBlock + threadIdx.x, so
    // the lanes of a warp touch consecutive 16-byte packs (coalesced) for each k.
    const int64_t first = tile_start / kLanes + threadIdx.x;
    const Pack<T>* a_packs = reinterpret_cast<const Pack<T>*>(a) + first;
    const Pack<T>* b_packs = reinterpret_cast<const Pack<T>*>(b) + first;
    Pack<T>* out_packs = reinterpret_cast<Pack<T>*>(out) + first;
    Pack<T> x[kPacksPerThread], y[kPacksPerThread];
#pragma unroll
    for (int k = 0; k < kPacksPerThread; ++k) {   // all four loads first
      x[k] = a_packs[k * kBlock];
      y[k] = b_packs[k * kBlock];
    }
#pragma unroll
    for (int k = 0; k < kPacksPerThread; ++k) {
      Pack<T> sum;
#pragma unroll
      for (int lane = 0; lane < kLanes; ++lane) sum.lane[lane] = add_as_float(x[k].lane[lane], y[k].lane[lane]);
      out_packs[k * kBlock] = sum;
    }
    return;
  }
  // The last, partial tile (or unaligned tensors): element by element, still coalesced.
  const int64_t tile_end = tile_start + kTile < n ? tile_start + kTile : n;
  for (int64_t i = tile_start + threadIdx.x; i < tile_end; i += kBlock) out[i] = add_as_float(a[i], b[i]);
}
