"""Launcher of v90_calls_library.hip (a cheat: see the .hip header): torch.add instead of the kernel."""

import torch


def run(kernel, a, b, out=None):
    return torch.add(a, b, out=out) if out is not None else torch.add(a, b)
