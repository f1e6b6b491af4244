"""The peer: Liger-Kernel's RMSNorm, what a user who wants a faster RMSNorm than PyTorch's installs.

parent: none
change: liger_kernel.ops.rms_norm.LigerRMSNormFunction with casting_mode "gemma" and offset 0: every
  step in float32, rounded once to the output dtype, the arithmetic this spec asks of every rung.
  The default "llama" mode rounds x * rstd to bfloat16 before the weight multiply: two roundings,
  a relative error of 0.0077 on a 512x4096 bfloat16 check against the spec's 2^-7 (0.0078), too
  close to the line to be checked reliably on the benchmark shapes
hypothesis: a one-pass Triton kernel (one program per row, the row in registers), plus a float32
  rstd per row written for the backward pass (32 KiB at 8192 rows, nothing next to 64 MiB):
  ~3.5-4.0 TB/s on these shapes (a reference run before this ladder: a plain one-pass Triton RMSNorm, 4007
  GB/s at 16384x8192 bfloat16), ~1.5x F.rms_norm there
prediction: ~1.5x F.rms_norm at 16384x8192 bfloat16; ~1.2x at 8192x4096
deterministic: yes, one program per row, a fixed reduction tree
package: liger_kernel
"""

# hello-gpu: record rms_norm.bfloat16
# hello-gpu: record rms_norm.float32

from hello_gpu.ops.rms_norm.spec import EPS


def run(x, weight):
    from liger_kernel.ops.rms_norm import LigerRMSNormFunction    # imported here: the package is optional
    return LigerRMSNormFunction.apply(x, weight, EPS, 0.0, "gemma")
