"""Tensors that are no strided array in memory: sparse (COO, CSR, CSC), nested (torch.nested, strided or jagged)
and mkldnn. Every way in refuses them by name, before anything reads their strides or launches: the public ops,
a built rung and hello_gpu.Kernel.

Found from outside the harness: before the check, hello_gpu.Kernel took a nested tensor's buffer as its values,
ops.softmax of a CSR tensor raised torch's "Sparse CSR tensors do not have is_contiguous", of a nested one
"Internal error: NestedTensorImpl doesn't support sizes. Please file an issue.", and a sparse COO input to a rung
or ops.matmul was refused as "not contiguous (strides (0, 0))" with the advice to call .contiguous(), which keeps
it sparse.
"""

from __future__ import annotations

import pytest
import torch

import hello_gpu.ops as ops
from hello_gpu.ops import load_op
from hello_gpu.ops.rung import LayoutError
from hello_gpu.runtime.checks import check_tensor, unindexable
from hello_gpu.runtime.errors import KernelArgumentError
from hello_gpu.runtime.signature import parse_signature

DEVICE = "cuda" if torch.cuda.is_available() else "cpu"


def kinds(rows: int, columns: int, device: str = DEVICE) -> dict[str, torch.Tensor]:
    """Each kind of tensor that is not strided memory, holding fresh random values of shape (rows, columns)."""
    dense = torch.randn(rows, columns, device=device)
    made = {
        "sparse_coo": dense.to_sparse(),
        "sparse_csr": dense.to_sparse_csr(),
        "sparse_csc": dense.to_sparse_csc(),
        "nested": torch.nested.nested_tensor(list(dense.unbind(0))),
        "jagged": torch.nested.nested_tensor([dense[:1], dense[1:]], layout=torch.jagged),
    }
    if device == "cpu":                       # mkldnn tensors exist on the CPU alone
        made["mkldnn"] = dense.to_mkldnn()
    return made


def expected_words(kind: str) -> str:
    return "nested tensor" if kind in ("nested", "jagged") else "not strided memory; pass .to_dense()"


def test_unindexable_names_the_kind_and_the_fix():
    for kind, tensor in kinds(3, 8, "cpu").items():
        problem = unindexable(tensor)
        assert problem is not None and expected_words(kind) in problem, (kind, problem)
    dense = torch.randn(3, 8)
    assert unindexable(dense) is None and unindexable(dense.t()) is None      # strides: the layout rules' job
    assert unindexable(torch.nested.nested_tensor([dense]).to_padded_tensor(0.0)) is None


def test_a_kernel_argument_that_is_not_strided_memory_is_refused():
    (parameter,) = parse_signature("__global__ void k(const float* a) {}", "k").parameters
    for kind, tensor in kinds(3, 8, "cpu").items():
        with pytest.raises(KernelArgumentError, match="parameter 'a'") as raised:
            check_tensor(parameter, tensor, None, "cpu")
        assert expected_words(kind) in str(raised.value), (kind, raised.value)
    check_tensor(parameter, torch.randn(3, 8), None, "cpu")


def _calls(tensor: torch.Tensor, columns: int):
    """Each public function with ``tensor`` in each tensor argument it has (the others dense)."""
    dense = torch.randn(4, columns, device=DEVICE)
    vector = torch.randn(columns, device=DEVICE)
    return {
        "softmax x": lambda: ops.softmax(tensor),
        "rms_norm x": lambda: ops.rms_norm(tensor, vector),
        "rms_norm weight": lambda: ops.rms_norm(dense, tensor),
        "matmul a": lambda: ops.matmul(tensor, torch.randn(columns, 3, device=DEVICE)),
        "matmul b": lambda: ops.matmul(torch.randn(5, 4, device=DEVICE), tensor),
        "linear x": lambda: ops.linear(tensor, torch.randn(3, columns, device=DEVICE)),
        "linear weight": lambda: ops.linear(torch.randn(5, columns, device=DEVICE), tensor),
        "attention q": lambda: ops.attention(tensor, dense, dense),
        "attention k": lambda: ops.attention(dense, tensor, dense),
        "attention v": lambda: ops.attention(dense, dense, tensor),
    }


@pytest.mark.parametrize("kind", ["sparse_coo", "sparse_csr", "sparse_csc", "nested", "jagged", "mkldnn"])
def test_every_public_function_refuses_it_by_argument_name(kind):
    made = kinds(4, 64)
    if kind not in made:
        pytest.skip(f"{kind} tensors exist on the CPU alone; this tier runs on {DEVICE}")
    for call, function in _calls(made[kind], 64).items():
        argument = call.split()[1]
        with pytest.raises(ValueError) as raised:
            function()
        message = str(raised.value)
        assert message.startswith(f"hello_gpu.ops.{call.split()[0]}: {argument} "), (call, message)
        assert expected_words(kind) in message, (call, message)


def test_a_built_rung_refuses_it_as_input_and_as_out():
    rung = load_op("softmax").rung("t01_row_per_program").build()
    x = torch.randn(4, 33, device=DEVICE)
    assert torch.allclose(rung(x).double(), torch.softmax(x.double(), -1), rtol=1e-5, atol=1e-6)
    for kind, tensor in kinds(4, 33).items():
        if kind == "mkldnn":                  # reports itself contiguous, and lives on the CPU alone
            continue
        with pytest.raises(LayoutError, match="softmax/t01_row_per_program: x ") as raised:
            rung(tensor)
        assert expected_words(kind) in str(raised.value), (kind, raised.value)
        with pytest.raises(LayoutError, match="softmax/t01_row_per_program: out ") as raised:
            rung(x, out=tensor)
        assert expected_words(kind) in str(raised.value), (kind, raised.value)
