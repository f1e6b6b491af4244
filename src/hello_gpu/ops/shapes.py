"""What a shape is, in one place: an int for a 1-D size (4097, 2**24), a tuple of ints for rows and
columns ((1823, 781)). Specs, the ladder, the command line, the profiler's child process and the agent
all count, write and read shapes through these three functions.
"""

from __future__ import annotations

import math


def numel(shape) -> int:
    """The number of elements: 4097 -> 4097, (1823, 781) -> 1423763."""
    return math.prod(shape) if isinstance(shape, (tuple, list)) else int(shape)


def shape_label(shape) -> str:
    """4097 -> "4097", 2**28 -> "2^28", (1823, 781) -> "1823x781": shapes in reports, test ids and records.

    A 1-D size that is a power of two from 2^10 up is written as one: "2^28" reads at a glance,
    "268435456" does not (rows and columns, "8192x8192", are already short).
    """
    if isinstance(shape, (tuple, list)):
        return "x".join(str(int(d)) for d in shape)
    size = int(shape)
    return f"2^{size.bit_length() - 1}" if size >= 1024 and size & (size - 1) == 0 else str(size)


def parse_shape(text: str):
    """"4097", "2**24", "2^24" or "1823x781" -> an int or a tuple of ints; reads every :func:`shape_label`.

    Raises ValueError naming the text and the forms it accepts.
    """
    def number(part: str) -> int:
        base, _, exponent = part.replace("^", "**").partition("**")
        return int(base) ** int(exponent) if exponent else int(base)
    try:
        dims = tuple(number(part) for part in text.lower().split("x"))
    except ValueError:
        raise ValueError(f"not a shape: {text!r} (write 4097, 2**24 or 1823x781)") from None
    return dims[0] if len(dims) == 1 else dims
