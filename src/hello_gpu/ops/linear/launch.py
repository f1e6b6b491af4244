"""What every linear launcher of this ladder shares (not a rung): A (M, K) and W (N, K) contiguous, as
nn.Linear stores its weight; anything else is refused by name, never copied."""

import torch

from hello_gpu.ops.matmul.launch import check_operands, output_for

DTYPES = (torch.float32, torch.bfloat16, torch.float16)


def checked_output(a: torch.Tensor, weight: torch.Tensor, out: torch.Tensor | None, dtypes=DTYPES) -> torch.Tensor:
    check_operands("linear", (("a", a), ("weight", weight)), dtypes,
                   "The weight is read as nn.Linear stores it, (N, K) row-major; pass weight.contiguous()")
    if a.shape[1] != weight.shape[1]:
        raise ValueError(f"linear: a is {tuple(a.shape)} and weight {tuple(weight.shape)}: both need K = "
                         f"{a.shape[1]} columns (weight is (N, K), as nn.Linear stores it)")
    return output_for("linear", a, a.shape[0], weight.shape[0], a.shape[1], out)
