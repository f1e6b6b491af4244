"""The peer: Liger-Kernel's softmax, what a user who wants a faster softmax than PyTorch's installs.

parent: none
change: liger_kernel.ops.softmax.LigerSoftmaxFunction (Triton: one program per row holding the row
  when it fits in a block, column tiles otherwise)
hypothesis: a one-pass Triton kernel: ~4.0 TB/s on long rows (a reference run before this ladder measured a
  plain one-pass Triton softmax at 4018 GB/s, 8192x8192 float32), ~2x torch.softmax
prediction: ~2.0x torch.softmax at 8192x8192 float32
deterministic: yes, one program per row, a fixed reduction tree
package: liger_kernel
"""

# hello-gpu: record softmax.float32
# hello-gpu: record softmax.bfloat16


def run(x):
    from liger_kernel.ops.softmax import LigerSoftmaxFunction    # imported here: the package is optional
    return LigerSoftmaxFunction.apply(x)
