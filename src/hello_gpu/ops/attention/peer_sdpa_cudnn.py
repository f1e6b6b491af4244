"""A peer: F.scaled_dot_product_attention held to its cudnn backend (torch.nn.attention.sdpa_kernel).

cuDNN has no kernel for a single key, S_kv = 1: PyTorch refuses it before calling cuDNN
(aten/src/ATen/native/transformers/cuda/sdp_utils.cpp, check_cudnn_tensor_shapes: "cudnn SDPA does not
support key/value sequence length 1"), and on the H200 SDPA raised "No available kernel" at the edge shape
1x2x1x1x1x128 (records at 89ae604). Edge shapes are checked, never timed; no benchmark shape has one key
(tests/test_attention_peers.py), and any other shape cuDNN refuses raises, never runs elsewhere.

parent: none
change: sdpa(q, k, v, causal, "cudnn") from sdpa.py: the cudnn backend only (edge shapes with a bottom-right
  mask and S_q != S_kv run on the math backend, see sdpa.py, and so do those with S_kv = 1, for which cuDNN
  has no kernel)
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
