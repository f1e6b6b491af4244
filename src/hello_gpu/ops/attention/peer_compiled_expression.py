"""A peer: torch.compile of the plain expression, softmax(Q K^T * scale + mask) V, written out.

Fixed after the H200's edge checks (records at 89ae604): Q K^T ran in the input dtype and only its result was
cast to float32. On the spec's "large" inputs (scores of std ~30, up to ~180 at the edge shapes) a bfloat16
score is off by up to 2^-9 of itself, ~0.35, which exp() turns into a ~40% error in a weight: 112 of 2112
outputs out of tolerance at 1x1x1x33x31x64x1 on the H200 (float16: 106); on the CPU, over the edge shapes,
error / allowed up to 34 (bfloat16) and 25 (float16), and at most 0.43 with float32 scores
(tests/test_attention_peers.py).

parent: none
change: the textbook expression as a careful user writes it for 16-bit inputs: K and V repeated to H heads,
  Q and K cast to float32 before Q K^T (float32 scores from the first rounding on), the mask and softmax in
  float32, the weights cast to the input dtype for P V; compiled per shape (rung.compile_per_shape): Inductor
  may rewrite it into SDPA (its fuse_attention patterns) or fuse the casts, mask and softmax around two
  cuBLAS matmuls
hypothesis: the float32 Q K^T is the price. TF32 stays off (PyTorch's default; the records' manifest says
  allow_tf32 false; with TF32 the scores of "large" inputs would err as bfloat16 ones did), so cuBLAS runs it
  on the CUDA cores: 51.2 TFLOP/s on this H200 against 687 for bfloat16 (anchors-h200.md, 8192^3), so the
  0.55 TFLOP of Q K^T at 4x32x32x4096x4096x128 take ~10.7 ms instead of ~0.8. The 4x32x4096x4096
  float32 scores (8.6 GB) are written, read by the softmax, written back as 16-bit weights (4.3 GB) and read
  by P V: ~26 GB, ~6 ms at the 4245 GB/s copy anchor, as before the fix; P V ~0.8 ms. If Inductor's
  patterns match (unlikely with a cast between the softmax and P V), an SDPA backend runs instead. Decode
  (S_q = 1) is memory-bound: K and V repeated to 32 heads, then K again as float32 (537 MB at B=1,
  S_kv=32768), written and read
prediction: ~18 ms at 4x32x32x4096x4096x128 bfloat16 (~60 TFLOP/s; ~0.17x peer_sdpa_flash and ~0.09x
  v00_torch, whose records at 89ae604 are 3.13 and 1.65 ms), ~2.3x slower than the bfloat16-score expression
  would be; causal the same time (every score is computed, then masked), so half the TFLOP/s. Decode
  1x32x8x1x32768x128: ~0.3-0.6 ms (~1-2.3 GB of copies and reads), ~0.1x v00_torch
deterministic: yes, cuBLAS matmuls and Inductor's row reductions run in a fixed order for a fixed shape
package: torch
"""

# hello-gpu: record attention.bfloat16
# hello-gpu: record attention.float16

import functools
import math

import torch

from hello_gpu.ops.attention.sdpa import repeat_heads
from hello_gpu.ops.attention.spec import visible_mask
from hello_gpu.ops.rung import compile_per_shape


def expression(q, k, v, causal: bool):
    k, v = repeat_heads(q, k), repeat_heads(q, v)
    scores = (q.float() @ k.float().transpose(-2, -1)) * (1.0 / math.sqrt(q.shape[-1]))
    if causal:
        visible = visible_mask(q.shape[2], k.shape[2], q.device)
        scores = scores.masked_fill(~visible, float("-inf"))
        # A row that sees no key: softmax gives NaN (0/0); the spec defines 0.
        weights = torch.where(visible.any(dim=-1, keepdim=True), torch.softmax(scores, dim=-1), 0.0)
    else:
        weights = torch.softmax(scores, dim=-1)
    return weights.to(q.dtype) @ v


@functools.cache
def _compiled():
    return compile_per_shape(expression)


def run(q, k, v, causal):
    return _compiled()(q, k, v, bool(causal))
