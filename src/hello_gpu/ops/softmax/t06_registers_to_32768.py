"""Triton, dispatch by width as t05, with rows up to 32768 columns held in registers (t03), not tiled (t02).

parent: t05_dispatch_by_width
change: the limit between t03 (the row in registers, 16 warps) and t02 (online tiles) moves from
  16384 to 32768 columns
hypothesis: t05 sent 4096x32768 float32 to t02 and ran at 1.03x torch.softmax, while t03 ran the
  same shape at 1.54x (4061 GB/s, 1.00x Liger; records softmax.float32, run of commit 2c2a085): a
  32768-column row in 512 threads is 64 values a thread, which costs less in spills than t02's
  second read and two exponentials per value. Moving the limit should give t03's figure there and
  change nothing at 8192 and 1024 columns.
prediction: 1.5x t05 at 4096x32768 (1.54x torch.softmax, as t03); 1.0x t05 at 8192x8192 and 4096x1024
outcome: 1.488x t05 [1.485, 1.490] at 4096x32768 float32 (predicted 1.5x) (records softmax.float32, run of 152c451)
deterministic: yes, each of the three kernels reduces a row in a fixed order
"""

# hello-gpu: record softmax.float32
# hello-gpu: record softmax.bfloat16

from pathlib import Path

import triton

from hello_gpu.ops.rung import load_module

REGISTER_ROW = 32768        # t03 holds up to 32768 float32 columns in 512 threads (64 values each)

# t05 itself, loaded fresh as the registry loads rungs: only the rows it sent to t02 are rerouted.
_t05 = load_module(Path(__file__).resolve().with_name("t05_dispatch_by_width.py"), "softmax_t05_for_t06")


def run(x, out=None):
    block = triton.next_power_of_2(x.shape[1])
    if _t05.REGISTER_ROW < block <= REGISTER_ROW:
        return _t05._row_in_registers.run(x, out)
    return _t05.run(x, out)
