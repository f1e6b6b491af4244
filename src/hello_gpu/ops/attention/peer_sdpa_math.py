"""A peer: F.scaled_dot_product_attention held to its math backend (torch.nn.attention.sdpa_kernel).

parent: none
change: sdpa(q, k, v, causal, "math") from sdpa.py: the math backend only (edge shapes with a bottom-right
  mask and S_q != S_kv run on the math backend, see sdpa.py)
hypothesis: the unfused composite (two matmuls and a softmax over materialised S x S scores): reads and writes
  4x32x4096x4096 scores several times, expect it far below the fused backends
prediction: ~0.1x the flash backend at 4x32x32x4096x4096x128 bfloat16
outcome: 25.3 TFLOP/s, 43,497 us at 4x32x32x4096x4096x128 bfloat16, 0.037x SDPA [0.037, 0.037]: 0.072x the flash peer
  (ratio of medians; predicted ~0.1x: missed, -28%); causal 0.032x (records attention.bfloat16, run of 89ae604)
deterministic: yes, SDPA's forward kernels reduce each row in a fixed order
dtypes: bfloat16 float16 float32
package: torch
"""

# hello-gpu: record attention.bfloat16
# hello-gpu: record attention.float16

from hello_gpu.ops.attention.sdpa import sdpa


def run(q, k, v, causal):
    return sdpa(q, k, v, causal, "math")
