"""The PyTorch baseline: ``F.scaled_dot_product_attention`` with the backend PyTorch picks.

parent: none
change: F.scaled_dot_product_attention(q, k, v, is_causal=..., enable_gqa=True), what a user would
  write; bottom-right causal with S_q != S_kv goes through an explicit boolean mask (SDPA's is_causal is
  top-left aligned there, see spec.py)
hypothesis: on the H200 the dispatcher picks the flash backend for bf16 prefill (the issue measured
  343 TFLOP/s at 4x32x4096x128 non-causal, 315 causal), while cuDNN, selected explicitly, reaches 597 /
  523: the default is not the fastest backend here, which is why each backend is a peer of its own
prediction: ~343 TFLOP/s at 4x32x32x4096x4096x128 bfloat16 (flash), ~315 causal
outcome: 667 TFLOP/s, 1,648 us at 4x32x32x4096x4096x128 bfloat16 (predicted ~343, the flash backend's: missed, +94%),
  605 TFLOP/s causal (~315: missed, +92%); 1.90x the flash peer (ratio of medians): not the flash peer's kernel; the
  record does not name the backend (records attention.bfloat16, run of 89ae604)
deterministic: yes, the forward kernels of every SDPA backend reduce each row in a fixed order
"""

# hello-gpu: record attention.bfloat16
# hello-gpu: record attention.float16

from hello_gpu.ops.attention.sdpa import sdpa


def run(q, k, v, causal):
    return sdpa(q, k, v, causal)
