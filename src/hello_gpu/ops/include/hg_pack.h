// 16-byte vector packs of a tensor's elements and reading their lanes as float32, shared by the rungs
// that no longer teach them (softmax v05_vector_128bit and rms_norm v04_vector_128bit introduce packs;
// softmax v08_packed_registers introduces lane_value). Portable HIP dialect, NVIDIA and AMD.
#ifndef HG_PACK_H
#define HG_PACK_H

// 16 bytes of T, aligned so that one access is one 128-bit load or store (LDG.128 / STG.128 on
// NVIDIA, global_load_b128 on RDNA): 4 float32 or 8 bfloat16 / float16 values. A pointer may be read
// as packs only where it is 16-byte aligned.
template <typename T>
struct alignas(16) Pack {
  T lane[16 / sizeof(T)];
};

template <typename T> struct IsBfloat16 { static constexpr bool value = false; };
template <> struct IsBfloat16<hip_bfloat16> { static constexpr bool value = true; };

// Element `lane` of a pack, as float32. bfloat16 is the top half of a float32, so a pair of them is
// read as one 32-bit word (little-endian: lane 2i is the low half) and each is a shift or a mask
// away, exactly. Converted lane by lane instead, ptxas first splits every pair into two registers
// and keeps both (rms_norm v05 needed 50 registers a thread in bfloat16 instead of 40).
template <typename T>
__device__ __forceinline__ float lane_as_float(const Pack<T>& pack, int lane) {
  if constexpr (IsBfloat16<T>::value) {
    uint32_t pair;                                     // lanes 2i (low 16 bits) and 2i + 1 (high)
    memcpy(&pair, &pack.lane[lane & ~1], sizeof(pair));
    return __uint_as_float(lane % 2 ? (pair & 0xffff0000u) : (pair << 16));
  } else {
    return static_cast<float>(pack.lane[lane]);
  }
}

// Lane l of a 16-byte pack of T kept as four raw 32-bit words (uint4), as a float. Raw because NVRTC
// spilled a Pack<hip_bfloat16> array held across softmax's three passes (30 bytes at 64 registers)
// and did not spill the same bits held as uint4: the conversions are shifts and masks, done when needed.
template <typename T> __device__ __forceinline__ float lane_value(const uint4& pack, int l);
template <> __device__ __forceinline__ float lane_value<float>(const uint4& pack, int l) {
  const unsigned word = l == 0 ? pack.x : l == 1 ? pack.y : l == 2 ? pack.z : pack.w;
  return __uint_as_float(word);
}
template <> __device__ __forceinline__ float lane_value<hip_bfloat16>(const uint4& pack, int l) {
  const unsigned word = l < 2 ? pack.x : l < 4 ? pack.y : l < 6 ? pack.z : pack.w;
  // bfloat16 is the top half of a float32: the low lane of a word is its low 16 bits (little endian).
  return __uint_as_float(l % 2 == 0 ? word << 16 : word & 0xffff0000u);
}
template <> __device__ __forceinline__ float lane_value<__half>(const uint4& pack, int l) {
  const unsigned word = l < 2 ? pack.x : l < 4 ? pack.y : l < 6 ? pack.z : pack.w;
  return __half2float(__ushort_as_half(static_cast<unsigned short>(l % 2 == 0 ? word & 0xffffu : word >> 16)));
}

#endif  // HG_PACK_H
