"""ops/: the ladders. One folder per operator: a spec, then one file per rung, each changing one thing.

::

    ops/vector_add/
      spec.py                   what the operator is (below)
      v00_torch.py              the PyTorch baseline; the registry adds v00_torch_compile from it
      v01_thread_per_element.hip
      v02_vectorized.hip        (+ v02_vectorized.py when launching needs more than the signature)
      v03_wgmma.cu              a CUDA-dialect rung, NVIDIA only (its header may say arch: sm_90a)
      t01_block_per_program.py  Triton rungs

Rungs are found by file name (:mod:`.registry`); their metadata is the file's own header
(:mod:`.header`): ``parent``, ``change``, ``hypothesis`` (required), ``prediction``, ``outcome``,
``requires`` (or ``vendor`` and ``arch``), ``deterministic``, ``entry``, ``block``, ``grid``, ``dtypes``.
A rung lands in the package only with a measured GPU record; the framework itself is tested with rungs under
``tests/fixtures/ops/``.

The spec convention
-------------------

A ``spec.py`` defines:

- ``NAME``: the folder's name. ``DTYPES``: the dtypes the operator is defined for (``"float32"``, ...).
- ``reference(*inputs) -> Tensor``: the answer in float64 (on the inputs' device or the CPU). The
  output of a rung has the reference's shape and the first input's dtype.
- ``make_inputs(shape, dtype, *, seed, distribution, device) -> tuple``: fresh tensors per seed, optionally
  followed by plain Python options the rungs take by position (attention's ``causal``, a bool: see
  :mod:`.checking`), drawn from ``distribution`` in ``"normal"``, ``"large"`` (magnitudes far from 1) and
  ``"near_overflow"`` (close to the dtype's range where that can break a rung). Never zeros: a kernel
  that writes nothing must not pass.
- ``EDGE_SHAPES``: the shapes correctness is checked on: 1, 31, 4097 and a 2-D shape like
  ``(1823, 781)``, sizes that are multiples of no block size. A shape is an int or a tuple.
- ``BENCH_SHAPES``: the shapes timed, several times the L2 (``2**20, 2**24, 2**28``).
- ``TOLERANCE = {dtype: (rtol, atol)}``: an element passes when ``|out - ref| <= atol + rtol * |ref|``.
  Optional ``tolerance(inputs, dtype) -> (rtol, atol)`` where the bound depends on the data (a sum).
- ``work(shape, dtype) -> hello_gpu.bench.Work``: bytes when each input is read once and the output
  written once, and FLOPs; time becomes GB/s and % of the measured ceiling through it.
- Optional ``invariants(inputs, output) -> list[str]``: problems the tolerance cannot see.
- Optional ``DETERMINISTIC_REQUIRED = True``: every rung must repeat bit for bit.

Use: ``load_op("vector_add").rungs``, :func:`check_rung`, :func:`run_ladder`, or the command line
(``hello-gpu list``, ``hello-gpu run``, ``hello-gpu ladder``).

The best rungs of three operators are plain functions (:mod:`.functions`): ``hello_gpu.ops.softmax(x)``,
``hello_gpu.ops.rms_norm(x, weight, eps)`` and ``hello_gpu.ops.attention(q, k, v, causal)`` (with
``attention_rung``, which says the rung it runs); matmul and linear run the rung a rule picks
(:mod:`.matmul_functions`): ``hello_gpu.ops.matmul(a, b)`` and ``hello_gpu.ops.linear(x, weight)``, with
``matmul_rung`` and ``linear_rung``, which name it. Their names are also the names of the operator
folders; the folders are imported first below, so that a later ``from hello_gpu.ops.softmax.spec
import ...`` finds them in ``sys.modules`` and leaves the attribute ``hello_gpu.ops.softmax`` (the
function) alone.
"""

import importlib

from .checking import (INTERPRETER_MAX_ELEMENTS, CaseResult, CheckReport, check_rung, compare_outputs, poison_value,
                       synchronize_device, tensor_bits)
from .header import Header, HeaderError, evaluate_grid, parse_header
from .ladder import LadderResult, check_ladder, run_ladder
from .registry import Op, SpecError, list_ops, load_op, ops_root
from .rung import BuiltRung, Rung, RungError
from .shapes import numel, parse_shape, shape_label

for _folder in ("softmax", "rms_norm", "attention", "matmul", "linear"):
    importlib.import_module(f"{__name__}.{_folder}")
from .functions import attention, attention_rung, rms_norm, softmax  # noqa: E402 - after the folders: the functions
from .matmul_functions import linear, linear_rung, matmul, matmul_rung  # noqa: E402 - the same

__all__ = ["BuiltRung", "CaseResult", "CheckReport", "Header", "HeaderError", "INTERPRETER_MAX_ELEMENTS",
           "LadderResult", "Op", "Rung", "RungError", "SpecError", "attention", "attention_rung", "check_ladder",
           "check_rung", "compare_outputs", "evaluate_grid", "linear", "linear_rung", "list_ops", "load_op",
           "matmul", "matmul_rung", "numel", "ops_root", "parse_header", "parse_shape", "poison_value", "rms_norm",
           "run_ladder", "shape_label", "softmax", "synchronize_device", "tensor_bits"]
