"""How fast can a batch-1 decode step be when it is launched as the hello-gpu step is? Its reads, measured alone.

The bandwidth bound of a decode step (hello_gpu.models.run.decode_bound) is tokens/s = copy bandwidth / the bytes
a step must read (every weight once and the filled KV cache), as if the step were one copy. The hello-gpu step
(batch 1, after session 23's fusions) is 8 kernels a layer: five read what the bound counts (qkv_rope_cache_write,
the attention's split kernel over the KV cache, o_proj, gate_up_swiglu, down_proj), three read next to nothing
(the attention's merge, the two add_rms_norm), and 5 more a step (the embedding, the RoPE tables' gathers, the
mask, the first norm) besides the head. Each boundary between two kernels of a CUDA graph costs the drain of one
and the ramp of the next, on the critical path.

Floors, each the same bytes in one CUDA graph, replayed (bf16, prompt 512 + 256 new: the filled cache of the
average step, 640 positions, as the bound counts it):

1. ``one read``: all of the step's bytes in one streaming kernel: the bound's premise, measured as reads (the copy
   ceiling counts a read and a write);
2. ``the step's reads``: one read kernel per weight matrix, in the step's order, and one per layer for its K and V;
3. ``the step's launches``: (2) with an empty kernel for each of the step's other launches;
4. ``the folded step's launches``: the same where the norms are folded into the projections after them
   (hello_gpu.models.norm_fold): the merge alone a layer, and the last layer's norm once a step.

The read kernel is t04's loop without x: [2, 2048] bf16 tiles straight to registers, evict-first, each program
summing its rows into one float that it stores (so no load can be dropped). Then, in the same process, the hello-gpu
backend's own decode steps (``run_model``, as ``hello-gpu model run`` times them: 255 steps of its captured graph,
the median step with its bootstrap interval), so the step and its floors are one run's figures: ``of_floor`` is the
floor of the structure it ran (folded where it used both norm folds, else the unfolded one; ``structure`` says
"folded", "partly folded" or "unfolded"), its
median step over hello-gpu's (the interval from the two medians' intervals, not paired).

    python benchmarks/decode_floor.py > records/nvidia-h200/decode-floor.json
"""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass

import torch

# the hello-gpu batch-1 step's launches that read next to nothing: the merge and two norms a layer, then the
# embedding, two gathers of the RoPE tables, the mask and the first norm (as the H100's profile of the 1B's
# hello-gpu step counts them a step: records/nvidia-h100-80gb-hbm3/models/profile.1b.decode.b1.p512.hello-gpu,
# session 24: merge_kernel 16, add_rms_norm_kernel 32; two index kernels, two elementwise, rms_norm_kernel 1)
EMPTY_A_LAYER = 3
EMPTY_A_STEP = 5
# folded (norm_fold): the merge a layer; the embedding, the two gathers, the mask and the last layer's norm a step
FOLDED_EMPTY_A_LAYER = 1
ROW = 2048                  # the read kernel's row: t04's BLOCK_K
SECONDS = 3.0


@dataclass(frozen=True)
class Read:
    label: str
    elements: int


def step_reads(config, *, batch: int = 1, context: int) -> list[Read]:
    """The step's reads in its order: per layer the qkv weight, the K and V caches (``context`` positions of every
    KV head), o_proj, gate/up, down; then the head. The embedding's one row a sequence is left to the embedding
    kernel, as the bound counts it (batch x hidden)."""
    c = config
    reads = []
    for layer in range(c.num_layers):
        reads += [Read(f"layer {layer} qkv", (c.q_size + 2 * c.kv_size) * c.hidden_size),
                  Read(f"layer {layer} K and V", 2 * batch * c.kv_size * context),
                  Read(f"layer {layer} o_proj", c.hidden_size * c.q_size),
                  Read(f"layer {layer} gate_up", 2 * c.intermediate_size * c.hidden_size),
                  Read(f"layer {layer} down", c.hidden_size * c.intermediate_size)]
    reads.append(Read("head", c.vocab_size * c.hidden_size))
    return reads


def empty_launches(config, folded: bool = False) -> int:
    return (FOLDED_EMPTY_A_LAYER if folded else EMPTY_A_LAYER) * config.num_layers + EMPTY_A_STEP


def _kernels():
    import triton
    import triton.language as tl

    @triton.jit
    def read_rows(w_ptr, out_ptr, rows_total, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
        rows = tl.program_id(0) * BLOCK_N + tl.arange(0, BLOCK_N)
        columns = tl.arange(0, BLOCK_K)
        live = rows < rows_total
        tile = tl.load(w_ptr + rows[:, None].to(tl.int64) * BLOCK_K + columns[None, :], mask=live[:, None],
                       other=0.0, eviction_policy="evict_first")
        tl.store(out_ptr + rows, tl.sum(tile.to(tl.float32), axis=1), mask=live)

    @triton.jit
    def empty(out_ptr):
        tl.store(out_ptr, 1.0)

    return read_rows, empty


class Floors:
    """One buffer holding every byte of the step (a view per read), and the launches that read it."""

    def __init__(self, config, *, context: int):
        import triton
        self.read_rows, self.empty = _kernels()
        self.reads = step_reads(config, context=context)
        rows = [triton.cdiv(read.elements, ROW) for read in self.reads]
        offsets = [0]
        for count in rows:
            offsets.append(offsets[-1] + count)
        # bf16 ones: contents do not change a streaming read's time; never zeros all the same
        self.buffer = torch.ones(offsets[-1], ROW, device="cuda", dtype=torch.bfloat16)
        self.views = [self.buffer[start:end] for start, end in zip(offsets, offsets[1:])]
        self.sums = torch.empty(offsets[-1], device="cuda", dtype=torch.float32)
        self.sum_views = [self.sums[start:end] for start, end in zip(offsets, offsets[1:])]
        self.flag = torch.zeros(1, device="cuda", dtype=torch.float32)
        self.empty_count = empty_launches(config)
        self.folded_empty_count = empty_launches(config, folded=True)
        self.layers = config.num_layers

    @property
    def bytes(self) -> int:
        return self.buffer.numel() * self.buffer.element_size()

    def _read(self, view, sums):
        import triton
        self.read_rows[(triton.cdiv(view.shape[0], 2),)](view, sums, view.shape[0], BLOCK_N=2, BLOCK_K=ROW,
                                                          num_warps=4, num_stages=1)

    def one_read(self):
        self._read(self.buffer, self.sums)

    def in_step_order(self, with_empty: bool = False, folded: bool = False):
        empties_left = self.folded_empty_count if folded else self.empty_count
        if with_empty:
            for _ in range(EMPTY_A_STEP):
                self.empty[(1,)](self.flag)
                empties_left -= 1
        # after a layer's K and V (the merge), after o_proj and after down (the two norms; folded: none)
        after = (1,) if folded else (1, 2, 4)
        for index, (view, sums) in enumerate(zip(self.views, self.sum_views)):
            self._read(view, sums)
            if with_empty and index < 5 * self.layers and index % 5 in after:
                self.empty[(1,)](self.flag)
                empties_left -= 1
        assert not with_empty or empties_left == 0, empties_left

    def check(self) -> None:
        """Every row summed: the buffer is ones, so each row's sum is ROW."""
        torch.cuda.synchronize()
        if not bool((self.sums == ROW).all()):
            raise AssertionError("a read kernel left rows unread")


def floor(config_name: str) -> dict:
    from hello_gpu.bench import measure
    from hello_gpu.models import config_named
    from hello_gpu.models.backends import captured_call
    from hello_gpu.models.run import decode_bound

    config = config_named(config_name)
    prompt, new = 512, 256
    bound = decode_bound(config, torch.bfloat16, batch=1, prompt=prompt, new=new)
    floors = Floors(config, context=prompt + new // 2)
    bytes_read, read_launches, empty_count = floors.bytes, len(floors.reads), floors.empty_count
    folded_empty_count = floors.folded_empty_count
    # the copy ceiling in this run: a 2 GiB copy, read and write counted as hello-gpu ceilings counts them
    source = torch.ones(2**30, device="cuda", dtype=torch.bfloat16)
    target = torch.empty_like(source)
    copy = measure(lambda: target.copy_(source), cache="warm", max_seconds=SECONDS)
    copy_bytes_per_s = 2 * source.numel() * source.element_size() / copy.summary.median
    del source, target
    bound_tokens_per_s = copy_bytes_per_s / bound.bytes_per_step
    results = {"copy": {"bytes_per_s": copy_bytes_per_s, "median_s": copy.summary.median,
                        "ci95_s": list(copy.summary.ci95)}}
    for name, call in (("one read", floors.one_read), ("the step's reads", floors.in_step_order),
                       ("the step's launches", lambda: floors.in_step_order(with_empty=True)),
                       ("the folded step's launches", lambda: floors.in_step_order(with_empty=True, folded=True))):
        floors.sums.fill_(-1.0)
        graph, _ = captured_call(lambda: call(), torch.device("cuda"), warmups=1)
        graph.replay()
        floors.check()
        timed = measure(graph.replay, cache="warm", max_seconds=SECONDS)
        median, (low, high) = timed.summary.median, timed.summary.ci95
        results[name] = {"median_s": median, "ci95_s": [low, high], "tokens_per_s": 1 / median,
                         "tokens_per_s_ci95": [1 / high, 1 / low], "of_bound": (1 / median) / bound_tokens_per_s,
                         "read_bytes_per_s": floors.bytes / median}
        print(f"{config_name} {name}: {median * 1e3:.3f} ms, {1 / median:,.1f} tokens/s, "
              f"{(1 / median) / bound_tokens_per_s:.3f} of the bound", file=sys.stderr)
    del floors, graph, call          # the 15 GB buffer (8B) goes before the model's weights arrive
    torch.cuda.empty_cache()
    return {"config": config_name, "prompt": prompt, "new": new, "bytes_read": bytes_read,
            "bound_bytes_per_step": bound.bytes_per_step, "bound_tokens_per_s": bound_tokens_per_s,
            "read_launches": read_launches, "empty_launches": empty_count,
            "folded_empty_launches": folded_empty_count, "floors": results,
            "hello_gpu": hello_gpu_step(config_name, prompt, new, results, bound_tokens_per_s)}


def hello_gpu_step(config_name: str, prompt: int, new: int, floors: dict, bound_tokens_per_s: float) -> dict:
    """The hello-gpu backend's decode steps on the model with random weights, timed as ``hello-gpu model run``
    times them, against the floor of its structure measured just before (folded where it used the norm folds)."""
    from hello_gpu.models.work import NORM_FOLDS
    from hello_gpu.bench import summarize
    from hello_gpu.models import build_model
    from hello_gpu.models.run import run_model

    model = build_model(config_name, device="cuda", dtype=torch.bfloat16, seed=0)
    (run,) = run_model(model, ["hello-gpu"], batch=1, prompt_length=prompt, new=new, check_logits=False).runs
    step = summarize(run.step_seconds)
    low, high = step.ci95
    folds = set(NORM_FOLDS) & set(run.used)
    structure = "folded" if folds == set(NORM_FOLDS) else "partly folded" if folds else "unfolded"
    floor = floors["the folded step's launches" if structure == "folded" else "the step's launches"]
    floor_low, floor_high = floor["ci95_s"]
    del model
    torch.cuda.empty_cache()
    print(f"{config_name} hello-gpu: {step.median * 1e3:.3f} ms, {floor['median_s'] / step.median:.3f} of the "
          f"structure's floor", file=sys.stderr)
    return {"steps": len(run.step_seconds), "median_step_s": step.median, "ci95_s": [low, high],
            "tokens_per_s": 1 / step.median, "of_bound": (1 / step.median) / bound_tokens_per_s,
            "of_floor": floor["median_s"] / step.median, "of_floor_ci95": [floor_low / high, floor_high / low],
            "structure": structure, "used": run.used}


def main() -> None:
    print(json.dumps({"device": torch.cuda.get_device_name(), "floors": [floor(name) for name in ("1b", "8b")]},
                     indent=1))


if __name__ == "__main__":
    main()
