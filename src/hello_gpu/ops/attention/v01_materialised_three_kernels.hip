/*
Attention as the textbook writes it: three kernels and the S_q x S_kv scores in memory between them.
parent: none
change: (1) one thread per score: s = (q_i . k_j) x scale x log2(e), -inf where the causal mask hides
  key j from query i, written to a float32 buffer of B x H x S_q x S_kv; (2) one block of 256 threads
  per score row: block maximum, block sum of exp2(s - max), each score replaced by its weight (a row
  with no visible key gets 0 everywhere); (3) one thread per output element, summing p_ij v_jd over
  the keys. K and V are read through kv_head = h / (H / H_kv), no copy. The launcher refuses, before
  allocating, scores the GPU's free memory cannot hold
hypothesis: every score is written once and read three times as float32: 16 bytes a score, 4.3 GB of
  scores (~68 GB of traffic, ~15 ms at 4.8 TB/s) at 4x32x32x4096x4096x128, plus kernel (1) reading a
  q row and a k row from L1/L2 per score with no reuse in registers: it, not the traffic, should
  dominate (~2 x 128 loads per score at ~20 TB/s of L1: ~30 ms). Expect ~30 TFLOP/s, under a tenth of
  the flash backend; decode shapes are three small launches over S_kv scores a head
prediction: ~30 TFLOP/s at 4x32x32x4096x4096x128 bfloat16 (0.09x the flash backend)
outcome: 0.904 TFLOP/s, 1,215,712 us at 4x32x32x4096x4096x128 bfloat16 (predicted ~30: missed, 33x under), 0.0013x
  SDPA [0.0013, 0.0013]; likely why: each lane of kernel (1) reads its own K row, 2 bytes at a time 256 bytes apart
  (records attention.bfloat16, run of 89ae604)
deterministic: yes, each score, weight and output has one owner summing in a fixed order
entry: attention_scores<{T}>
dtypes: bfloat16 float16 float32
*/
// hello-gpu: record attention.bfloat16
// hello-gpu: record attention.float16

#include "hg_reduce.h"

// (1) Scores. Thread (j, i, b x H + h): key j of query i. q, k are (B, H or H_kv, S, D), contiguous.
template <typename T>
__global__ void attention_scores(const T* __restrict__ q, const T* __restrict__ k, float* __restrict__ scores,
                                 int heads, int kv_heads, int q_len, int kv_len, int head_dim, float scale_log2,
                                 int causal) {
  const int key = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
  const int query = static_cast<int>(blockIdx.y);
  const int bh = static_cast<int>(blockIdx.z);
  if (key >= kv_len) return;
  const int kv_head = (bh / heads) * kv_heads + (bh % heads) / (heads / kv_heads);
  const T* q_row = q + (static_cast<int64_t>(bh) * q_len + query) * head_dim;
  const T* k_row = k + (static_cast<int64_t>(kv_head) * kv_len + key) * head_dim;
  float dot = 0.0f;
  for (int d = 0; d < head_dim; ++d) dot += static_cast<float>(q_row[d]) * static_cast<float>(k_row[d]);
  // Bottom-right causal: query i sees key j when j <= i + S_kv - S_q (spec.py).
  const bool hidden = causal && key > query + (kv_len - q_len);
  scores[(static_cast<int64_t>(bh) * q_len + query) * kv_len + key] = hidden ? minus_infinity() : dot * scale_log2;
}

// (2) Softmax of one score row in place, in base 2 (the scores carry log2(e)). blockDim.x = 256.
__global__ void attention_softmax_rows(float* __restrict__ scores, int kv_len) {
  __shared__ float slots[2][32];
  float* row = scores + static_cast<int64_t>(blockIdx.x) * kv_len;
  float local_max = minus_infinity();
  for (int j = threadIdx.x; j < kv_len; j += blockDim.x) local_max = fmaxf(local_max, row[j]);
  const float row_max = block_max(local_max, slots[0]);
  // A row that sees no key keeps -inf: subtract 0 there (no -inf - -inf = NaN); its sum stays 0.
  const float shift = row_max == minus_infinity() ? 0.0f : row_max;
  float local_sum = 0.0f;
  for (int j = threadIdx.x; j < kv_len; j += blockDim.x) local_sum += exp2f(row[j] - shift);
  const float row_sum = block_sum(local_sum, slots[1]);
  const float inverse = row_sum > 0.0f ? 1.0f / row_sum : 0.0f;      // no visible key: every weight 0
  for (int j = threadIdx.x; j < kv_len; j += blockDim.x) row[j] = exp2f(row[j] - shift) * inverse;
}

// (3) O = P V. Thread (d, i, b x H + h) sums p_ij v_jd over the keys; blockDim.x = D.
template <typename T>
__device__ __forceinline__ void weighted_values(const float* __restrict__ weights, const T* __restrict__ v,
                                          T* __restrict__ out, int heads, int kv_heads, int q_len, int kv_len,
                                          int head_dim) {
  const int d = static_cast<int>(threadIdx.x);
  const int query = static_cast<int>(blockIdx.x);
  const int bh = static_cast<int>(blockIdx.y);
  if (d >= head_dim) return;
  const int kv_head = (bh / heads) * kv_heads + (bh % heads) / (heads / kv_heads);
  const float* p = weights + (static_cast<int64_t>(bh) * q_len + query) * kv_len;
  const T* v_column = v + static_cast<int64_t>(kv_head) * kv_len * head_dim + d;
  float acc = 0.0f;
  for (int j = 0; j < kv_len; ++j) acc += p[j] * static_cast<float>(v_column[static_cast<int64_t>(j) * head_dim]);
  out[(static_cast<int64_t>(bh) * q_len + query) * head_dim + d] = static_cast<T>(acc);
}

// One kernel per dtype, not a template: the compile gate compiles a rung's entry for each of its dtypes
// and every non-template kernel, so these are checked too. The launcher picks one by the entry's
// template argument (launch.sibling).
__global__ void attention_weighted_values_float(const float* __restrict__ weights, const float* __restrict__ v,
                                                float* __restrict__ out, int heads, int kv_heads, int q_len,
                                                int kv_len, int head_dim) {
  weighted_values<float>(weights, v, out, heads, kv_heads, q_len, kv_len, head_dim);
}
__global__ void attention_weighted_values_half(const float* __restrict__ weights, const __half* __restrict__ v,
                                               __half* __restrict__ out, int heads, int kv_heads, int q_len,
                                               int kv_len, int head_dim) {
  weighted_values<__half>(weights, v, out, heads, kv_heads, q_len, kv_len, head_dim);
}
__global__ void attention_weighted_values_bfloat16(const float* __restrict__ weights,
                                                   const hip_bfloat16* __restrict__ v, hip_bfloat16* __restrict__ out,
                                                   int heads, int kv_heads, int q_len, int kv_len, int head_dim) {
  weighted_values<hip_bfloat16>(weights, v, out, heads, kv_heads, q_len, kv_len, head_dim);
}
