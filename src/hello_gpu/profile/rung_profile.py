"""``hello-gpu profile OP RUNG``: one rung's kernel table, with hardware counters and counted vs measured bytes.

1. The rung is built and called on the spec's inputs under torch.profiler (:func:`kernel_table`),
   in this process; its own kernels are named from its files (the ``__global__`` functions of a HIP
   rung, the ``@triton.jit`` functions of a Triton rung), so anything else shows as a library kernel.
2. With counters, the same rung runs again in a child process under ncu (NVIDIA) or rocprofv3 (AMD)
   (:func:`~hello_gpu.profile.counters.counters_for_rungs`), and the counters join the table by kernel name.
3. The work model's bytes per call are set beside the measured DRAM bytes: their ratio is the lesson
   (re-reads, over-fetch by uncoalesced access, or a work model that forgot something).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ..bench.records import RecordError
from ..ops import RungError, load_op
from ..ops.rung import load_module
from ..ops.shapes import shape_label
from ..runtime import HelloGpuError
from ..runtime.device import require_gpu
from ..runtime.signature import list_kernels
from ._target import INPUT_SEED
from .counters import counters_for_rungs
from .kernel_table import KernelTable, kernel_table

TRITON_KERNEL_TYPES = ("JITFunction", "InterpretedFunction", "Autotuner", "Heuristics")  # @triton.jit, @autotune


@dataclass
class RungProfile:
    """One rung profiled at one shape and dtype."""

    op: object                 # hello_gpu.ops.Op
    rung: object               # hello_gpu.ops.Rung
    shape: object
    dtype: str
    table: KernelTable
    work: object               # hello_gpu.bench.Work

    def to_dict(self) -> dict:
        return {"op": self.op.name, "rung": self.rung.id, "route": self.rung.route, "shape": shape_label(self.shape),
                "dtype": self.dtype, "work": self.work.to_dict(), **self.table.to_dict()}


def own_kernel_names(rung) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(C++ kernel names, Triton kernel names) a rung launches itself; torch rungs launch none."""
    if rung.route in ("hip", "cuda"):
        return tuple(list_kernels(rung.path.read_text(encoding="utf-8"))), ()
    if rung.route == "triton":
        module = load_module(rung.path, f"{rung.op.name}_{rung.path.stem}_names")
        names = [getattr(value, "__name__", None) or getattr(getattr(value, "fn", None), "__name__", None)
                 for value in vars(module).values() if type(value).__name__ in TRITON_KERNEL_TYPES]
        return (), tuple(name for name in names if name)
    return (), ()


def raw_stem(rung_id: str, shape, dtype: str) -> str:
    """File name stem for saved raw outputs: ``v01_thread_per_element.float32.2^24``."""
    return f"{rung_id}.{dtype}.{shape_label(shape)}"


def profile_rung(op, rung_id: str, shape=None, dtype: str = "float32", *, counters: bool = True, warmup: int = 3,
                 repeats: int = 10, calls: int = 3, root=None, save_raw: Path | None = None) -> RungProfile:
    """Kernel table of one rung at ``shape`` (default: the spec's largest BENCH_SHAPES), with counters.

    ``save_raw``: a folder that receives the torch.profiler Chrome trace (``STEM.trace.json``) and
    ncu's output (``STEM.ncu.csv``), the files the parsers' test fixtures are made of.
    """
    require_gpu()
    op = load_op(op, root) if isinstance(op, str) else op
    rung = op.rung(rung_id)
    shape = shape if shape is not None else op.spec.BENCH_SHAPES[-1]
    if dtype not in op.spec.DTYPES or not rung.supports(dtype):
        raise ValueError(f"{rung.id} is not defined for {dtype} (its dtypes: "
                         f"{', '.join(d for d in op.spec.DTYPES if rung.supports(d))})")
    stem = raw_stem(rung.id, shape, dtype)
    if save_raw is not None:
        Path(save_raw).mkdir(parents=True, exist_ok=True)
    built = rung.build()
    inputs = op.spec.make_inputs(shape, dtype, seed=INPUT_SEED, distribution="normal", device="cuda")
    ours, triton = own_kernel_names(rung)
    table = kernel_table(built, *inputs, warmup=warmup, repeats=repeats, ours=ours, triton=triton,
                         title=f"{op.name} {rung.id} {shape_label(shape)} {dtype}",
                         trace_path=Path(save_raw) / f"{stem}.trace.json" if save_raw is not None else None)
    work = op.spec.work(shape, dtype)
    table.counted_bytes = work.bytes
    if counters:
        result = counters_for_rungs(op, [rung.id], shape, dtype, calls=calls, root=root)[rung.id]
        table.with_counters(result)
        if save_raw is not None and result.raw_output:
            (Path(save_raw) / f"{stem}.{result.tool}.csv").write_text(result.raw_output, encoding="utf-8")
    return RungProfile(op, rung, shape, dtype, table, work)


def run_profile(op_name: str, rung_id: str, *, shape, dtype: str, counters: bool, record_dir: Path | None,
                save_raw: Path | None, repeats: int, calls: int, root, as_json: bool, console) -> int:
    """The ``hello-gpu profile`` command after its arguments are checked: 0; 1 when no kernel ran or the
    record could not be written; 2 when the rung cannot be profiled as asked."""
    import json

    try:
        profile = profile_rung(op_name, rung_id, shape, dtype, counters=counters, repeats=repeats, calls=calls,
                               root=root, save_raw=save_raw)
    except (ValueError, RungError, HelloGpuError) as error:     # a dtype the rung lacks, a rung that does not build
        console.print(f"profile: {error}", markup=False, highlight=False, soft_wrap=True, style="bold red")
        return 2
    if as_json:
        print(json.dumps(profile.to_dict(), indent=2))
    else:
        console.print(profile.table.render())
    if record_dir is not None:
        from .record import write_profile_record
        try:
            path = write_profile_record([profile], Path(record_dir))
        except RecordError as error:
            console.print(f"profile: record not written: {error}", markup=False, highlight=False, soft_wrap=True,
                          style="bold red")
            return 1
        console.print(f"wrote {path}", markup=False, highlight=False, soft_wrap=True)
    return 0 if profile.table.rows else 1
