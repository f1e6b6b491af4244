"""``hello-gpu model run``: prefill and decode tokens per second of each backend, against the bandwidth bound.

At batch 1 a decode step reads every weight once (and the KV cache written so far), so no backend
can make more than ``copy bandwidth / bytes per step`` steps a second. :func:`decode_bound` counts
those bytes; the copy bandwidth is the one ``hello-gpu ceilings`` measured on this GPU (cached; measured
now if it never was). On the CPU there is no such ceiling here and the bound is stated as unavailable.

Each backend gets its own runner (its own KV cache, same weights), one untimed warm-up generation
(compiles, CUDA-graph recordings, first launches), then the timed one: prefill (the whole prompt, up
to the first new token) and ``new - 1`` decode steps. The prefill is then timed again (:func:`prefill_repeats`) on
the same runner (the same prompt at the same positions: it rewrites the same cache rows), each from a
synchronised device to its last token's logits on the host's clock, what a user waits for; the prefill tokens
per second are from the median, and the prefill ratios between backends (:func:`prefill_ratios`) have a
bootstrap interval over the repeats, as the decode steps' do. One prefill alone, as before session 17, read
the 1B's eager prefill, whose code did not change, at 29,588 and then 50,915 tokens/s in two runs (H100).
Peak GPU memory is read per backend (``torch.cuda.max_memory_allocated``, weights included, reset before each
backend makes its runner).

The logits (``check_logits``, on by default): before the backends, one untimed greedy decode of an
eager runner is recorded (:func:`hello_gpu.models.logits.record_reference`: logits and tokens per step,
kept on the CPU, its runner freed before the first backend). After each other backend's timed
generation, its own runner is fed eager's tokens (teacher forcing) and its logits are compared step by
step (:func:`hello_gpu.models.logits.compare_with`): each step's error against the exact (float64) logits of
the same decode, at most twice eager's own, and whether every divergence of the greedy tokens is a near tie.
On by default because it is cheap next to the rest: one more eager decode for the whole run (8 s of the
8B's 256 steps at eager's 31.7 tokens/s on an H100), one float64 forward over the same tokens (the 8B's
~12 TFLOP in a few chunks, each projection's weight widened at its call) and one more decode per backend at its own speed (2 s for hello-gpu), against the minutes a
compiled backend of the 8B spends compiling; no compile, no capture is repeated (the backend's
runner is reused). ``--no-check-logits`` leaves it out.
"""

from __future__ import annotations

import json
import math
import statistics
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import torch

from .backends import Choice, greedy_tokens, make_runner
from .llama import Llama, LlamaConfig
from .logits import ReferenceDecode, compare_with, record_reference


def element_size(dtype: torch.dtype) -> int:
    return torch.empty((), dtype=dtype).element_size()


@dataclass
class Bound:
    """Bytes a decode step must read and the tokens per second that allows at the copy bandwidth."""

    batch: int
    weight_bytes: int                       # weights read once per step
    kv_bytes: int                           # KV cache read per step, averaged over the decode, all rows
    copy_bytes_per_s: float | None = None
    note: str = ""

    @property
    def bytes_per_step(self) -> int:
        return self.weight_bytes + self.kv_bytes

    @property
    def tokens_per_s(self) -> float | None:
        """Decode tokens per second (all rows of the batch) at the copy bandwidth."""
        return self.batch * self.copy_bytes_per_s / self.bytes_per_step if self.copy_bytes_per_s else None

    def to_dict(self) -> dict:
        return {**asdict(self), "bytes_per_step": self.bytes_per_step, "tokens_per_s": self.tokens_per_s}


# region decode-bound
def decode_bound(config: LlamaConfig, dtype: torch.dtype, *, batch: int, prompt: int, new: int,
                 copy_bytes_per_s: float | None = None, note: str = "") -> Bound:
    """Every matrix is read once a step, except the embedding table, of which a lookup reads one row per
    sequence (a tied head still reads the whole table). The KV cache read is the filled part: K and V of
    every layer for ``prompt + new / 2`` positions on average over the decode steps (the model itself
    reads its whole preallocated cache: at prompt 512 + 256 the bound is the stricter by 0.1 GB)."""
    size = element_size(dtype)
    table = config.vocab_size * config.hidden_size
    weights = config.parameter_count() - (0 if config.tie_word_embeddings else table) + batch * config.hidden_size
    context = prompt + new / 2
    kv = 2 * config.num_layers * config.kv_size * context * batch
    return Bound(batch, int(weights * size), int(kv * size), copy_bytes_per_s, note)
# endregion decode-bound


def copy_bandwidth(device: torch.device, *, progress: bool = False) -> tuple[float | None, str]:
    """(bytes/s, note): the copy ceiling of this GPU (hello_gpu.bench.ceilings), measured now if not cached."""
    if device.type != "cuda":
        return None, (f"bandwidth bound unavailable on the {device.type}: the copy ceiling is measured on a GPU "
                      f"(hello-gpu ceilings)")
    from ..bench import cached_ceilings, measure_ceilings
    ceilings = cached_ceilings(allow_partial=True)
    if ceilings is None or not ceilings.copy_bytes_per_s:
        ceilings = measure_ceilings(progress=progress)
        return ceilings.copy_bytes_per_s, "copy bandwidth measured now (hello-gpu ceilings; cached for next time)"
    return ceilings.copy_bytes_per_s, f"copy bandwidth from hello-gpu ceilings (measured {ceilings.measured_at})"


@dataclass
class BackendRun:
    backend: str
    prefill_seconds: float
    decode_seconds: float
    prefill_tokens_per_s: float
    decode_tokens_per_s: float | None
    of_bound: float | None                         # decode tokens/s over the bound's
    peak_memory_bytes: int | None
    memory_note: str
    used: list[str] = field(default_factory=list)  # hello-gpu kernels swapped in
    choices: list[dict] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    tokens: list[list[int]] = field(default_factory=list)
    agreement: str = ""                            # greedy tokens against the first backend's
    logits: dict | None = None                     # teacher-forced logits against eager (LogitComparison.to_dict)
    step_seconds: list[float] = field(default_factory=list)   # each decode step's time (see run_backend)
    prefill_each_s: list[float] = field(default_factory=list)  # the timed generation's prefill, then the repeats

    def to_dict(self) -> dict:
        return asdict(self)


def device_label(device: torch.device) -> str:
    """``"NVIDIA H200 (cuda:0)"`` on a GPU, ``"cpu"`` on the CPU: a record says which card measured it
    wherever it is copied (the first model run's record said only "cuda:0")."""
    return f"{torch.cuda.get_device_name(device)} ({device})" if device.type == "cuda" else str(device)


def _synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def run_backend(model: Llama, backend: str, prompt: torch.Tensor, new: int, *, bound: Bound | None = None,
                force=(), on_step=None, replacements=None, reference: ReferenceDecode | None = None,
                choices: list[Choice] | None = None) -> BackendRun:
    """Warm up, then time one greedy generation of ``new`` tokens after ``prompt`` with ``backend``
    (``replacements``, ``choices``: the hello-gpu backend's registry and decisions made already, see
    :func:`~hello_gpu.models.backends.make_runner`);
    then, given a ``reference`` decode, compare this runner's teacher-forced logits with it (untimed)."""
    device, (batch, length) = model.device, prompt.shape
    if new < 2:
        raise ValueError(f"--new must be at least 2 (the first token comes from the prefill), got {new}")
    on_gpu = device.type == "cuda"
    if on_gpu:
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats(device)
    runner = make_runner(model, backend, batch=batch, max_seq=length + new, force=force, replacements=replacements,
                         prompt=length, choices=choices)
    greedy_tokens(runner, prompt, min(new, 4))              # warm-up: compiles, graph recordings
    _synchronize(device)
    marks, stamps = {}, []

    def step(index: int) -> None:
        if index == 0:
            _synchronize(device)                            # the prefill, up to its token, is done
            marks["prefill"] = time.perf_counter()
        stamps.append(_stamp(device))
        if on_step is not None:
            on_step(index)

    started = time.perf_counter()
    tokens = greedy_tokens(runner, prompt, new, on_step=step)
    _synchronize(device)
    finished = time.perf_counter()
    first_prefill, decode = marks["prefill"] - started, finished - marks["prefill"]
    decode_rate = batch * (new - 1) / decode if decode > 0 else None
    limit = bound.tokens_per_s if bound else None
    peak = torch.cuda.max_memory_allocated(device) if on_gpu else None
    prefills = [first_prefill] + time_prefills(runner, prompt, prefill_repeats(first_prefill))
    prefill = statistics.median(prefills)
    logits = compare_with(reference, runner).to_dict() if reference is not None else None
    return BackendRun(
        backend, prefill, decode, batch * length / prefill, decode_rate,
        decode_rate / limit if decode_rate and limit else None, peak,
        "weights + KV cache + workspace, torch.cuda.max_memory_allocated" if on_gpu
        else f"not measured on the {device.type} (torch.cuda.max_memory_allocated is per GPU)",
        runner.used(), [c.to_dict() for c in runner.choices], list(runner.notes), tokens.cpu().tolist(),
        logits=logits, step_seconds=_intervals(stamps), prefill_each_s=prefills)


# Prefills timed after the generation: as many as fit in PREFILL_SECONDS, within [MIN, MAX]. Eight alone (before
# session 25) gave the 8B's 2048-token prefill (~52 ms each, H100) an interval of [0.996, 1.064] around 1.031x
# compile: about +-3%. The interval narrows as 1/sqrt(n), so ~38 prefills (2 s) should give about +-1.5%,
# for 6 s more of a three-backend run; a 1B prefill of 512 tokens (~2.6 ms) stops at MAX (0.1 s).
PREFILL_SECONDS = 2.0
MIN_PREFILL_REPEATS, MAX_PREFILL_REPEATS = 8, 48


def prefill_repeats(first_seconds: float) -> int:
    """How many prefills to time after one that took ``first_seconds``: PREFILL_SECONDS of them, clamped."""
    wanted = math.ceil(PREFILL_SECONDS / first_seconds) if first_seconds > 0 else MAX_PREFILL_REPEATS
    return max(MIN_PREFILL_REPEATS, min(MAX_PREFILL_REPEATS, wanted))


def time_prefills(runner, prompt: torch.Tensor, repeats: int) -> list[float]:
    """Seconds of ``repeats`` prefills of ``prompt`` by ``runner``, each from a synchronised device until its
    first token is on the host (greedy_tokens' first step, as the timed generation measured it)."""
    device, length = prompt.device, prompt.shape[1]
    positions = torch.arange(length, device=device)
    seconds = []
    for _ in range(repeats):
        _synchronize(device)
        began = time.perf_counter()
        logits = runner.prefill(prompt, positions)[:, -1]
        runner.ops.sample(logits).cpu()                     # the first token, on the host
        seconds.append(time.perf_counter() - began)
    return seconds


def _stamp(device: torch.device):
    """A mark of "now" where the work runs: an event queued on the GPU's stream (no synchronisation, so the
    decode loop runs as it would untimed; ~2 us of host time against a step of milliseconds), the host's
    clock on the CPU (where every operation has finished when it returns)."""
    if device.type != "cuda":
        return time.perf_counter()
    event = torch.cuda.Event(enable_timing=True)
    event.record()
    return event


def _intervals(stamps: list) -> list[float]:
    """Seconds between consecutive stamps: each decode step as the device ran it, gaps waiting for the host
    included (what a user pays). Read after the run has synchronised."""
    if stamps and isinstance(stamps[0], float):
        return [later - earlier for earlier, later in zip(stamps, stamps[1:])]
    return [earlier.elapsed_time(later) / 1e3 for earlier, later in zip(stamps, stamps[1:])]


# The ratios a run reports: every backend against eager, and ours against each compiled one.
def _ratios(runs: list[BackendRun], times: str, count: str, median: str) -> list[dict]:
    """{candidate, baseline, speedup, ci95, count, median}: the baseline's median time over the candidate's, with
    a bootstrap interval over the samples (hello_gpu.bench.stats.unpaired_ratio: the backends run one after
    another, so the interval is each run's own noise, not a drift between them). ``times``: the BackendRun field
    of samples; ``count``, ``median``: the keys the samples' number and medians go under."""
    from ..bench.stats import unpaired_ratio
    by_name = {run.backend: run for run in runs if getattr(run, times)}
    pairs = [(name, "eager") for name in by_name if name != "eager"]
    pairs += [(ours, name) for ours in ("hello-gpu", "hello-gpu-pdl") for name in by_name if name.startswith("compile")]
    pairs += [("hello-gpu-pdl", "hello-gpu")]          # the dependent launches alone
    pairs += [("hello-gpu", "hello-gpu-unfolded")]     # the norm folds alone
    found = []
    for candidate, baseline in pairs:
        if candidate in by_name and baseline in by_name:
            ratio = unpaired_ratio(getattr(by_name[baseline], times), getattr(by_name[candidate], times))
            found.append({"candidate": candidate, "baseline": baseline, "speedup": ratio.value,
                          "ci95": list(ratio.ci95), count: ratio.pairs,
                          median: {name: statistics.median(getattr(by_name[name], times))
                                   for name in (candidate, baseline)}})
    return found


def step_ratios(runs: list[BackendRun]) -> list[dict]:
    """The decode step's ratios (:func:`_ratios` over each run's ``step_seconds``)."""
    return _ratios(runs, "step_seconds", "steps", "median_step_s")


def prefill_ratios(runs: list[BackendRun]) -> list[dict]:
    """The prefill's ratios (:func:`_ratios` over each run's ``prefill_each_s``): issue 23's 2048-token target."""
    return _ratios(runs, "prefill_each_s", "prefills", "median_prefill_s")


def ratio_sentence(ratio: dict) -> str:
    """One of :func:`step_ratios` or :func:`prefill_ratios` in words, as the printout and ch18's tables give it."""
    low, high = ratio["ci95"]
    what, count = ("step", "steps") if "median_step_s" in ratio else ("prefill", "prefills")
    medians = ratio[f"median_{what}_s"]
    return (f"{ratio['candidate']} {ratio['speedup']:.3f}x {ratio['baseline']} [{low:.3f}, {high:.3f}] (median {what} "
            f"{medians[ratio['candidate']] * 1e3:.3f} ms against {medians[ratio['baseline']] * 1e3:.3f} ms, "
            f"{ratio[count]} {count} each, one backend after the other)")


def logits_verdict(logits: dict | None) -> str:
    """The table's cell for a teacher-forced logit comparison (LogitComparison.to_dict)."""
    if logits is None:
        return ""
    divergences, ratio = len(logits["divergences"]), logits["worst_ratio"]
    text = (f"error {ratio:.2g}x eager's own at worst (at most {logits['factor']:g}x)" if ratio is not None
            else "no steps")
    if divergences:
        text += (f", {divergences} divergence{'s' if divergences > 1 else ''} from step {logits['first_divergence']}"
                 + (", all near ties" if logits["near_ties"] else ", NOT all near ties"))
    return ("OK: " if logits["ok"] else "FAIL: ") + text


def agreement(tokens: list[list[int]], reference: list[list[int]]) -> str:
    """"same" or where the first row that differs first differs."""
    for row, (ours, theirs) in enumerate(zip(tokens, reference)):
        for step, (a, b) in enumerate(zip(ours, theirs)):
            if a != b:
                return f"row {row} differs from step {step} on"
    return "same"


@dataclass
class ModelRun:
    config: dict
    device: str
    dtype: str
    batch: int
    prompt: int
    new: int
    seed: int
    bound: Bound
    runs: list[BackendRun] = field(default_factory=list)

    def to_dict(self) -> dict:
        return {"kind": "model-run", "config": self.config, "device": self.device, "dtype": self.dtype,
                "batch": self.batch, "prompt": self.prompt, "new": self.new, "seed": self.seed,
                "bound": self.bound.to_dict(), "runs": [run.to_dict() for run in self.runs],
                "step_ratios": step_ratios(self.runs), "prefill_ratios": prefill_ratios(self.runs)}

    def write(self, folder: Path) -> Path:
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / "model-run.json"
        path.write_text(json.dumps(self.to_dict(), indent=2), encoding="utf-8")
        return path


def default_out_dir(kind: str, name: str) -> Path:
    """``<user data dir>/hello-gpu/models/<kind>/<name>.<UTC time>``: never a tracked folder."""
    import platformdirs
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    return Path(platformdirs.user_data_dir("hello-gpu")) / "models" / kind / f"{name}.{stamp}"


def format_bytes(count: float | None) -> str:
    if count is None:
        return "-"
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if count >= scale:
            return f"{count / scale:.2f} {unit}"
    return f"{count:.0f} B"


def run_table(result: ModelRun):
    from rich.table import Table
    table = Table(title=f"{result.config['name']} on {result.device} {result.dtype}, batch {result.batch}, "
                        f"prompt {result.prompt}, {result.new} new tokens")
    left = ("backend", "kernels swapped in", "tokens vs first", "logits vs eager (teacher-forced)")
    for column in ("backend", "prefill tok/s", "decode tok/s", "of bound", "peak memory", "kernels swapped in",
                   "tokens vs first", "logits vs eager (teacher-forced)"):
        table.add_column(column, justify="left" if column in left else "right")
    for run in result.runs:
        table.add_row(run.backend, f"{run.prefill_tokens_per_s:,.1f}",
                      f"{run.decode_tokens_per_s:,.1f}" if run.decode_tokens_per_s else "-",
                      f"{run.of_bound:.0%}" if run.of_bound is not None else "-", format_bytes(run.peak_memory_bytes),
                      ", ".join(run.used) if run.backend.startswith("hello-gpu") and run.used else
                      ("none" if run.backend.startswith("hello-gpu") else ""), run.agreement,
                      logits_verdict(run.logits) or ("(reference)" if run.backend == "eager" else "not compared"))
    return table


def render_run(result: ModelRun, console) -> None:
    say = lambda text: console.print(text, markup=False, highlight=False, soft_wrap=True)  # noqa: E731
    console.print(run_table(result))
    bound = result.bound
    say(f"bandwidth bound: {format_bytes(bound.weight_bytes)} of weights + {format_bytes(bound.kv_bytes)} of KV "
        f"cache a decode step = {format_bytes(bound.bytes_per_step)}; "
        + (f"at {bound.copy_bytes_per_s / 1e9:,.0f} GB/s copy: {bound.tokens_per_s:,.1f} tokens/s ({bound.note})"
           if bound.tokens_per_s else bound.note))
    for run in result.runs:
        for choice in run.choices:
            say(f"  {run.backend} {choice['name']}: {'USED' if choice['used'] else 'not used'}: {choice['reason']}")
        for note in run.notes:
            say(f"  {run.backend}: {note}")
        if run.logits is not None:
            say(f"  {run.backend} logits: {run.logits['summary']}")
    for ratio in step_ratios(result.runs):
        say(f"decode step: {ratio_sentence(ratio)}")
    for ratio in prefill_ratios(result.runs):
        say(f"prefill: {ratio_sentence(ratio)}")
    memory = next((run.memory_note for run in result.runs if run.peak_memory_bytes is None), None)
    if memory:
        say(f"peak memory: {memory}")


def run_model(model: Llama, backends: list[str], *, batch: int, prompt_length: int, new: int, seed: int = 0,
              prompt: torch.Tensor | None = None, force=(), console=None, progress: bool = False,
              replacements=None, on_run=None, check_logits: bool = True) -> ModelRun:
    """Every backend in turn on the same model and prompt (random ids from ``seed`` unless ``prompt``);
    with ``check_logits``, each backend but eager is compared with eager's recorded decode (module).
    ``on_run(result)`` is called after each backend, so a caller can write what is measured so far: an 8B
    model's compiled backends take minutes each, and a run cut short keeps the backends it finished."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    if prompt is None:
        generator = torch.Generator().manual_seed(seed)
        prompt = torch.randint(0, model.config.vocab_size, (batch, prompt_length), generator=generator)
    prompt = prompt.to(model.device)
    batch, prompt_length = prompt.shape
    copy, note = copy_bandwidth(model.device, progress=progress)
    bound = decode_bound(model.config, model.dtype, batch=batch, prompt=prompt_length, new=new,
                         copy_bytes_per_s=copy, note=note)
    result = ModelRun(model.config.to_dict(), device_label(model.device), str(model.dtype).removeprefix("torch."),
                      batch, prompt_length, new, seed, bound)
    reference = None
    if check_logits and any(backend != "eager" for backend in backends):
        reference = record_reference(make_runner(model, "eager", batch=batch, max_seq=prompt_length + new), prompt, new)
        if model.device.type == "cuda":
            torch.cuda.empty_cache()            # the reference runner's cache, before the backends' peaks
    # hello-gpu and hello-gpu-pdl swap in the same kernels (PDL changes how they launch, not which): the first
    # one's decisions serve the second, so their ratio compares launches (hello-gpu-unfolded: the same, less the
    # norm folds; it takes the others' decisions, and gives its own to none). Decided twice, a kernel within a few
    # percent of eager could go in for one and not the other (session 19's 8B run: linear at 1.02x eager,
    # "faster" for hello-gpu, "within noise" for hello-gpu-pdl).
    decided = None
    columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn())
    with Progress(*columns, console=console, transient=True, disable=not progress) as bar:
        for backend in backends:
            task = bar.add_task(f"{backend}: warm-up, prefill, decode", total=new)
            ours = backend.startswith("hello-gpu")
            run = run_backend(model, backend, prompt, new, bound=bound, force=force, replacements=replacements,
                              on_step=lambda index, task=task: bar.update(task, completed=index + 1),
                              reference=reference if backend != "eager" else None,
                              choices=decided if ours else None)
            if ours and decided is None and backend != "hello-gpu-unfolded":    # its choices are hello-gpu's, less
                decided = [Choice(**choice) for choice in run.choices]          # the folds: not for the others
            run.agreement = agreement(run.tokens, result.runs[0].tokens) if result.runs else "(reference)"
            result.runs.append(run)
            if on_run is not None:
                on_run(result)
    return result
