"""A peer: F.scaled_dot_product_attention held to its efficient backend (torch.nn.attention.sdpa_kernel).

parent: none
change: sdpa(q, k, v, causal, "efficient") from sdpa.py: the efficient backend only (edge shapes with a bottom-right
  mask and S_q != S_kv run on the math backend, see sdpa.py)
hypothesis: the memory-efficient (xformers/cutlass, Ampere-era) kernels: fused, but without Hopper's
  instructions; expect well under the flash backend
prediction: ~0.6x the flash backend at 4x32x32x4096x4096x128 bfloat16
outcome: 175 TFLOP/s, 6,274 us at 4x32x32x4096x4096x128 bfloat16, 0.257x SDPA [0.254, 0.257]: 0.50x the flash peer
  (ratio of medians; predicted ~0.6x: missed, -17%) (records attention.bfloat16, run of 89ae604)
deterministic: yes, SDPA's forward kernels reduce each row in a fixed order
dtypes: bfloat16 float16 float32
package: torch
"""

# hello-gpu: record attention.bfloat16
# hello-gpu: record attention.float16

from hello_gpu.ops.attention.sdpa import sdpa


def run(q, k, v, causal):
    return sdpa(q, k, v, causal, "efficient")
