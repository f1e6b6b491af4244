"""What the row operators' specs (softmax, rms_norm) share: a (rows, width) shape and its random rows."""

from __future__ import annotations

import torch


def rows_and_width(shape, op_name: str, width_name: str = "columns") -> tuple[int, int]:
    """``(rows, width)`` from a 2-D shape; anything else is an error naming the operator."""
    if not (isinstance(shape, tuple) and len(shape) == 2):
        raise ValueError(f"{op_name} takes a (rows, {width_name}) shape, got {shape!r}")
    return int(shape[0]), int(shape[1])


def normal_rows(rows: int, width: int, *, seed: int, device: str) -> tuple[torch.Tensor, torch.Generator]:
    """float32 N(0, 1) values of shape (rows, width) with no exact zero, and the generator that drew
    them (to draw more from the same seed)."""
    generator = torch.Generator(device=device).manual_seed(seed)
    values = torch.randn((rows, width), generator=generator, device=device, dtype=torch.float32)
    values[values == 0] = 1            # randn gives an exact 0 with probability ~2^-24 per element
    return values, generator
