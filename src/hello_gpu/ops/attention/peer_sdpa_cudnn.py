"""A peer: F.scaled_dot_product_attention held to its cudnn backend (torch.nn.attention.sdpa_kernel).

parent: none
change: sdpa(q, k, v, causal, "cudnn") from sdpa.py: the cudnn backend only. Two kinds of edge shape run
  on the math backend instead, and no benchmark shape is either (tests/test_attention_peers.py checks
  BENCH_SHAPES): a bottom-right mask with S_q != S_kv, as for every SDPA peer (see sdpa.py), and a
  single key, S_kv = 1, for which cuDNN has no kernel: PyTorch refuses it before calling cuDNN
  (aten/.../cuda/sdp_utils.cpp, check_cudnn_tensor_shapes: "cudnn SDPA does not support key/value
  sequence length 1"), and on the H200 SDPA raised "No available kernel" at 1x2x1x1x1x128.
  Any other shape cuDNN refuses raises the same error, never runs elsewhere
hypothesis: cuDNN's fused attention (Hopper kernels with wgmma and TMA): the issue measured 597 TFLOP/s at
  4x32x4096x128 bf16 (causal 523), the fastest backend there and the target of the Triton rungs (>= 0.9x).
  PyTorch now tries cuDNN first on sm_90 (sdp_utils.cpp, check_prefer_cudnn_attention, cuDNN > 9.15):
  v00_torch's record at 89ae604, 667 TFLOP/s at 4x32x32x4096x4096x128 against flash's 352, suggests the
  default already is this backend
prediction: ~1.0x v00_torch at every benchmark shape (its record at 89ae604: 667 / 605 TFLOP/s at
  4x32x32x4096x4096x128 bfloat16, non-causal / causal; 49.3 us at 1x32x8x1x32768x128, where the anchors
  measured cuDNN at 51.1 us)
deterministic: yes, SDPA's forward kernels reduce each row in a fixed order
dtypes: bfloat16 float16
package: torch
"""

# hello-gpu: record attention.bfloat16
# hello-gpu: record attention.float16

from hello_gpu.ops.attention.sdpa import sdpa


def has_cudnn_kernel(kv_len: int) -> bool:
    """Whether cuDNN attention runs this many keys: every count but 1 (see the header)."""
    return kv_len != 1


def run(q, k, v, causal):
    return sdpa(q, k, v, causal, "cudnn" if has_cudnn_kernel(k.shape[2]) else "math")
