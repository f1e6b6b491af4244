"""Launcher for v10_exp2.hip: v08's, unchanged (v10 changes only how the kernel exponentiates)."""

from hello_gpu.ops.softmax.v08_packed_registers import run  # noqa: F401  (the rung's launcher)
