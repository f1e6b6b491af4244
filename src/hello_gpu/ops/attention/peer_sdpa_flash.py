"""A peer: F.scaled_dot_product_attention held to its flash backend (torch.nn.attention.sdpa_kernel).

parent: none
change: sdpa(q, k, v, causal, "flash") from sdpa.py: the flash backend only (edge shapes with a bottom-right
  mask and S_q != S_kv run on the math backend, see sdpa.py)
hypothesis: the FlashAttention-2 kernels PyTorch ships: the issue measured 343 TFLOP/s at 4x32x4096x128 bf16
  (causal 315) on this H200
prediction: ~343 TFLOP/s at 4x32x32x4096x4096x128 bfloat16, ~315 causal
outcome: 352 TFLOP/s, 3,128 us at 4x32x32x4096x4096x128 bfloat16 (predicted ~343: met, +2%), 0.512x SDPA [0.509,
  0.516]; 331 TFLOP/s causal (predicted ~315: met, +5%) (records attention.bfloat16, run of 89ae604)
deterministic: yes, SDPA's forward kernels reduce each row in a fixed order
dtypes: bfloat16 float16
package: torch
"""

# hello-gpu: record attention.bfloat16
# hello-gpu: record attention.float16

from hello_gpu.ops.attention.sdpa import sdpa


def run(q, k, v, causal):
    return sdpa(q, k, v, causal, "flash")
