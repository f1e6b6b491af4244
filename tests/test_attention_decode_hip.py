"""v05_flash_decoding (the HIP-dialect flash-decoding rung of issue 22): what the CPU tier can prove, and the
GPU checks the next GPU session runs.

CPU tier:
- the compile gate: sm_90 (NVRTC, no spills) and gfx1201 (clang), plus gfx942, whose 64-wide wavefronts
  exercise HG_WARP_SIZE = 64;
- the launcher's checks and its split (chunk count from S_kv and the SM count);
- the split/combine maths: partial softmaxes (max, sum, unnormalised output) merged in order agree with a
  float64 softmax, fully masked splits included;
- a lane-by-lane float32 NumPy model of both kernels (the lane -> key mapping, the butterflies, the weight
  shuffles, the warp and block merges, the partials' layout) against the spec's float64 reference, on
  32- and 64-wide warps and every pack size, with splits that see no key; and the same model with one
  deliberate slip, which must fail.
GPU tier (``-m gpu``): the rung against the reference at decode shapes (S_kv 1 ... 32768, S_q 1 and 4, causal
and not) with poisoned outputs and fresh seeds, forced splits with fully masked chunks, prefill handed to v04.
"""

from __future__ import annotations

import math
import os
import random

import numpy as np
import pytest
import torch

from hello_gpu.ops import check_rung, load_op
from hello_gpu.ops.checking import output_failure
from hello_gpu.ops.rung import INCLUDE_DIR, load_module
from hello_gpu.runtime.clang_hip import find_clang
from hello_gpu.runtime.device import gpu_vendor

HAS_GPU = gpu_vendor() is not None
AMD_TOOLS = find_clang() is not None and os.path.isfile("/usr/include/hip/hip_runtime.h")
OP = load_op("attention")
spec = OP.spec
RUNG = OP.rung("v05_flash_decoding")
launcher = load_module(RUNG.companion, "test_v05_launcher")
from hello_gpu.ops.attention import launch  # noqa: E402 - after the rung's own modules, as the ladder loads them

WARPS = launch.FUSED_WARPS           # kWarps: warps a block
ROWS = launcher.BLOCK_ROWS           # kDecodeRows: (query, head) rows a block
LOADS_IN_FLIGHT = 4                  # kLoadsInFlight: a key's packs come in batches of it


# ------------------------------------------------------------------------------------------ compile gate

@pytest.fixture(scope="module")
def gate():
    """The repository's compile gate on v05 alone: sm_90 and gfx1201, then gfx942 (64-wide wavefronts)."""
    from hello_gpu.ops.header import declared_target, rung_instantiations
    from hello_gpu.runtime import compile_gate
    reports = {}
    for amd_arch in ("gfx1201", "gfx942"):
        reports[amd_arch] = compile_gate.check([str(RUNG.path)], arch="sm_90", amd_arch=amd_arch, amd=AMD_TOOLS,
                                               instantiations=rung_instantiations, targets=declared_target,
                                               include_dirs=[INCLUDE_DIR])
    return reports


EXPECTED_KERNELS = {"attention_flash_decoding<hip_bfloat16>", "attention_flash_decoding<__half>",
                    "attention_flash_decoding<float>", "attention_decode_combine_float",
                    "attention_decode_combine_half", "attention_decode_combine_bfloat16"}


def test_v05_compiles_for_sm_90_without_spills(gate):
    report = gate["gfx1201"]
    assert {k.kernel for k in report.kernels} == EXPECTED_KERNELS
    for kernel in report.kernels:
        assert kernel.nvidia.status == "ok", f"{kernel.kernel}: {kernel.nvidia.error}"
        assert kernel.nvidia.registers and not kernel.nvidia.spill_stores and not kernel.nvidia.spill_loads, kernel
    # The launcher's BLOCKS_PER_SM is what the split kernel's registers allow: 3 blocks of 128 threads in 64K.
    split_registers = max(k.nvidia.registers for k in report.kernels if k.kernel.startswith("attention_flash"))
    assert launcher.BLOCKS_PER_SM == 65536 // (split_registers * WARPS * 32), split_registers


@pytest.mark.skipif(not AMD_TOOLS, reason="no clang-19 / HIP headers: scripts/install_amd_compile_tools.sh")
@pytest.mark.parametrize("amd_arch", ["gfx1201", "gfx942"])
def test_v05_compiles_for_amd_with_32_and_64_wide_wavefronts(gate, amd_arch):
    for kernel in gate[amd_arch].kernels:
        assert kernel.amd.status == "ok", f"{amd_arch} {kernel.kernel}: {kernel.amd.error}"


# ------------------------------------------------------------------------------------------ the launcher

def _inputs(shape, dtype="float32", seed=None, distribution="normal"):
    seed = random.randrange(2**31) if seed is None else seed
    return spec.make_inputs(shape, dtype, seed=seed, distribution=distribution, device="cpu")


def test_the_launcher_refuses_what_the_kernels_cannot_read_before_touching_a_kernel():
    """The kernel argument is never reached (None stands in for it), so these run without a GPU."""
    q, k, v, causal = _inputs((1, 4, 1, 1, 70, 64))
    with pytest.raises(ValueError, match="must be contiguous"):
        launcher.run(None, q, k.transpose(2, 3).contiguous().transpose(2, 3), v, causal)
    with pytest.raises(TypeError, match="causal must be True or False"):
        launcher.run(None, q, k, v, 1)
    with pytest.raises(ValueError, match="out must be"):
        launcher.run(None, q, k, v, causal, out=torch.empty(1, 4, 1, 32))
    flat = torch.empty(k.numel() + 1, dtype=k.dtype)
    shifted = flat[1:].view(k.shape)                      # contiguous, but 4 bytes past a 16-byte boundary
    shifted.copy_(k)
    assert shifted.is_contiguous() and shifted.data_ptr() % 16 == 4
    with pytest.raises(ValueError, match="k starts at an address 4 bytes past a 16-byte boundary"):
        launcher.run(None, q, shifted, v, causal)
    with pytest.raises(ValueError, match="v starts at an address"):
        launcher.run(None, q, k, shifted, causal)
    for bad in (0, -3, 2.5, True):
        with pytest.raises(ValueError, match="chunk_keys must be a positive int"):
            launcher.run(None, q, k, v, causal, chunk_keys=bad)
    q, k, v, causal = _inputs((1, 4, 1, 1, 70000, 64))
    with pytest.raises(ValueError, match="70000 chunks exceed a grid dimension"):
        launcher.run(None, q, k, v, causal, chunk_keys=1)


@pytest.mark.parametrize("dtype", spec.DTYPES)
def test_every_kernel_a_launcher_delegates_to_is_found_where_it_is_declared(dtype):
    """The H200 failure (records/nvidia-h200/gpu-tests.test_attention_decode_hip.xml): prefill looked v04's kernel
    up in v05's own text, which only #includes it. The signature parser, on the real sources, finds every kernel
    the attention launchers call besides their entry (v01's softmax and weighted values, v05's merge and v04's
    prefill kernel, v06's D = 64 kernel), for each dtype of the rung; v05's prefill kernel also compiles for
    sm_90 from v04's file. The old lookup still fails here, on the CPU, as it did on the GPU."""
    from hello_gpu.ops.attention import launch
    from hello_gpu.runtime.signature import SignatureError
    delegated = {"v01_materialised_three_kernels": ["attention_softmax_rows", "attention_weighted_values_{T}"],
                 "v05_flash_decoding": ["attention_decode_combine_{T}"],
                 "v06_mma_sync": ["attention_mma_sync_d64_{T}"]}
    for rung_id, functions in delegated.items():
        rung = OP.rung(rung_id)
        if not rung.supports(dtype):
            continue
        entry = rung.kernel(arch="sm_90", dtype=dtype)
        for function in functions:
            assert launch.sibling(entry, function).signature.parameters, (rung_id, function)
    entry = RUNG.kernel(arch="sm_90", dtype=dtype)
    prefill = launcher.prefill_kernel(entry)
    assert prefill.entry == f"attention_causal_skipping{entry.entry[entry.entry.index('<'):]}"
    assert prefill.compile().arch == "sm_90"
    assert prefill.file_name == "v04_causal_block_skipping.hip"
    with pytest.raises(SignatureError, match="no __global__ function named 'attention_causal_skipping'"):
        launch.sibling(entry, "attention_causal_skipping<{T}>")


@pytest.mark.parametrize("kv_len", [1, 31, 127, 128, 129, 1000, 4097, 32768, 10**6])
@pytest.mark.parametrize("blocks_per_chunk", [1, 8, 128, 1000])
@pytest.mark.parametrize("step", [128, 256])        # 4 warps of 32 or 64 lanes
def test_the_split_covers_every_key_once_in_whole_steps_with_no_empty_chunk(kv_len, blocks_per_chunk, step):
    wanted = launcher.BLOCKS_PER_SM * 132
    chunk_keys, chunks = launcher.split(kv_len, blocks_per_chunk, wanted, step)
    assert chunk_keys % step == 0 and chunk_keys >= step
    assert (chunks - 1) * chunk_keys < kv_len <= chunks * chunk_keys           # every key once, none empty
    assert chunks == 1 or chunks * blocks_per_chunk <= wanted + blocks_per_chunk  # no more blocks than asked
    if blocks_per_chunk * 2 <= wanted and kv_len >= 2 * step * math.ceil(wanted / blocks_per_chunk):
        assert chunks * blocks_per_chunk >= wanted // 2                         # long caches fill the device


def test_decode_at_the_bench_shape_fills_the_h200_as_the_header_says():
    """1x32x8x1x32768x128: 43 chunks of 768 keys x 8 KV heads = 344 blocks for 396 slots (3 a SM)."""
    assert launcher.split(32768, 8, launcher.BLOCKS_PER_SM * 132, 128) == (768, 43)


# ------------------------------------------------------------------------------------------ the merge maths

def _merge(max_a, sum_a, acc_a, max_b, sum_b, acc_b):
    """merge_partial in float32, as the kernels write it (both sides rescaled to the larger maximum)."""
    new_max = np.maximum(max_a, max_b)
    shift = np.where(new_max == -np.inf, np.float32(0), new_max).astype(np.float32)
    mine, theirs = np.exp2(max_a - shift), np.exp2(max_b - shift)
    return new_max, sum_a * mine + sum_b * theirs, acc_a * mine[..., None] + acc_b * theirs[..., None]


def _partials(scores, values, visible, bounds):
    """float32 partials of each chunk [start, stop): (max, sum, unnormalised output), -inf / 0 / 0 when the
    chunk shows the row no key. scores (rows, keys) in base 2, values (keys, D), visible (rows, keys)."""
    parts = []
    for start, stop in bounds:
        s = np.where(visible[:, start:stop], scores[:, start:stop], -np.inf).astype(np.float32)
        chunk_max = s.max(axis=1) if stop > start else np.full(len(s), -np.inf, np.float32)
        shift = np.where(chunk_max == -np.inf, 0, chunk_max).astype(np.float32)
        weights = np.exp2(s - shift[:, None])
        parts.append((chunk_max, weights.sum(axis=1), weights @ values[start:stop]))
    return parts


@pytest.mark.parametrize("case", ["random chunks", "masked chunks first", "rows that see nothing", "one key"])
def test_chunk_partials_merged_in_order_are_the_softmax(case):
    """The log-sum-exp merge of the chunks' partials (in chunk order, starting from (-inf, 0, 0)) equals the
    float64 softmax-weighted sum, whatever chunks see no key; a row that sees none gets exactly 0."""
    rng = np.random.default_rng(random.randrange(2**31))
    rows, keys, dim = 6, 300, 16
    scores = (rng.standard_normal((rows, keys)) * 4).astype(np.float32)
    values = rng.standard_normal((keys, dim)).astype(np.float32)
    visible = np.ones((rows, keys), dtype=bool)
    cuts = sorted(set(rng.integers(1, keys, size=7).tolist()))
    if case == "masked chunks first":        # causal-like: rows see a prefix, so the later chunks see nothing
        visible = np.arange(keys)[None, :] <= np.array([0, 3, 40, 150, 280, 299])[:, None]
    elif case == "rows that see nothing":
        visible[[1, 4]] = False
        visible[2, :250] = False               # and a row whose first chunks are all masked
    elif case == "one key":
        keys, cuts = 1, []
        scores, values, visible = scores[:, :1], values[:1], visible[:, :1]
    bounds = list(zip([0, *cuts], [*cuts, keys]))
    max_, sum_, acc = np.full(rows, -np.inf, np.float32), np.zeros(rows, np.float32), np.zeros((rows, dim), np.float32)
    for part in _partials(scores, values, visible, bounds):
        max_, sum_, acc = _merge(max_, sum_, acc, *part)
    out = np.where(sum_[:, None] > 0, acc / np.where(sum_ > 0, sum_, 1)[:, None], 0)
    weights = np.where(visible, np.exp2(scores.astype(np.float64)), 0)
    seen = weights.sum(axis=1, keepdims=True)
    expected = np.where(seen > 0, (weights / np.where(seen > 0, seen, 1)) @ values.astype(np.float64), 0)
    np.testing.assert_allclose(out, expected, rtol=1e-5, atol=1e-5 * np.abs(values).max())
    nothing = ~visible.any(axis=1)
    assert (out[nothing] == 0).all() and not np.isnan(out).any()
    assert case != "rows that see nothing" or nothing.sum() == 2


# ------------------------------------------------------------------------------------------ lane-by-lane model

def _butterfly(values: np.ndarray, lanes: np.ndarray, offsets, combine) -> np.ndarray:
    """__shfl_xor butterflies over the last axis (lanes): after each offset, lane l combines with lane l ^ offset."""
    for offset in offsets:
        values = combine(values, values[..., lanes ^ offset])
    return values


def model_v05(q, k, v, causal, *, warp_size: int, sm_count: int = 132, chunk_keys: int | None = None,
              slip: str | None = None) -> torch.Tensor:
    """Both v05 kernels in float32 NumPy, one warp's lanes as an array axis: the same lane -> (key, pack)
    mapping, butterflies, weight shuffles, warp and block merges and partials layout as the .hip file.
    ``slip`` breaks one thing on purpose (the tests show the checks see it)."""
    d = spec.dims_of(q, k, v, causal)
    pack = 16 // q.element_size()                      # kPack
    lanes_per_key = d.head_dim // pack                 # kLanesPerKey
    keys_per_step = warp_size // lanes_per_key         # kKeysPerStep
    assert lanes_per_key % LOADS_IN_FLIGHT == 0 and lanes_per_key <= warp_size
    rows = d.group * d.q_len
    row_groups, heads_in_flight = math.ceil(rows / ROWS), d.batch * d.kv_heads
    if chunk_keys is None:
        chunk_keys, chunks = launcher.split(d.kv_len, heads_in_flight * row_groups,
                                            launcher.BLOCKS_PER_SM * sm_count, WARPS * warp_size)
    else:
        chunks = math.ceil(d.kv_len / chunk_keys)
    qf, kf, vf = (t.to(torch.float32).numpy() for t in (q, k, v))
    scale_log2 = np.float32(launch.softmax_scale_log2(d))
    lanes = np.arange(warp_size)
    segment, slot = lanes % lanes_per_key, lanes // lanes_per_key
    minus_inf = np.float32(-np.inf)
    part_acc = np.full(heads_in_flight * row_groups * chunks * ROWS * d.head_dim, np.nan, np.float32)   # poisoned
    part_stats = np.full(heads_in_flight * row_groups * chunks * ROWS * 2, np.nan, np.float32)

    def packs(head_rows, keys, stop):
        """(lanes, kPack): pack `segment` of each lane's key, zeros from `stop` on."""
        columns = segment[:, None] * pack + np.arange(pack)[None, :]
        inside = keys < stop
        out = np.zeros((warp_size, pack), np.float32)
        out[inside] = head_rows[keys[inside, None], columns[inside]]
        return out

    for bkv in range(heads_in_flight):
        b, kv_head = divmod(bkv, d.kv_heads)
        k_head, v_head = kf[b, kv_head], vf[b, kv_head]
        for row_group in range(row_groups):
            g = row_group * ROWS + np.arange(ROWS)
            live, query = g < rows, g // d.group
            head = (bkv % d.kv_heads) * d.group + g % d.group
            q_part = np.zeros((ROWS, warp_size, pack), np.float32)
            for r in np.flatnonzero(live):
                row = qf[b, head[r], query[r]]
                q_part[r] = row[segment[:, None] * pack + np.arange(pack)[None, :]] * scale_log2
            for chunk in range(chunks):
                start = chunk * chunk_keys
                stop = min(d.kv_len, start + chunk_keys)
                warp_parts = []
                for warp in range(WARPS):
                    row_max = np.full(ROWS, minus_inf)
                    share = np.zeros((ROWS, warp_size), np.float32)
                    acc = np.zeros((ROWS, warp_size, pack), np.float32)
                    for tile in range(start + warp * warp_size, stop, WARPS * warp_size):
                        score = np.zeros((ROWS, warp_size), np.float32)
                        for step in range(lanes_per_key):                     # score_tile
                            key_part = packs(k_head, tile + step * keys_per_step + slot, stop)
                            dot = np.zeros((ROWS, warp_size), np.float32)
                            for e in range(pack):
                                dot = dot + q_part[:, :, e] * key_part[None, :, e]
                            offsets = [lanes_per_key >> i for i in range(1, lanes_per_key.bit_length())]
                            dot = _butterfly(dot, lanes, offsets, np.add)
                            score = np.where(segment == step, dot, score)
                        key = tile + segment * keys_per_step + slot
                        seen = live[:, None] & (key < stop)[None, :]
                        if d.causal:
                            seen &= key[None, :] <= query[:, None] + (d.kv_len - d.q_len)
                        s = np.where(seen, score, minus_inf)
                        new_max = np.maximum(row_max, s.max(axis=1))
                        shift = np.where(new_max == minus_inf, np.float32(0), new_max).astype(np.float32)
                        scale = np.exp2(row_max - shift)
                        weight = np.exp2(s - shift[:, None])
                        share = share * scale[:, None] + weight
                        row_max = new_max
                        if slip != "no rescale":
                            acc = acc * scale[:, None, None]
                        for step in range(lanes_per_key):                     # add_weighted_values
                            value = packs(v_head, tile + step * keys_per_step + slot, stop)
                            source = lanes - segment + step
                            if slip == "weight from the wrong lane":
                                source = lanes - segment + (step + 1) % lanes_per_key
                            acc = acc + weight[:, source][:, :, None] * value[None]
                    total = _butterfly(share, lanes, [warp_size >> i for i in range(1, warp_size.bit_length())],
                                       np.add)[:, 0]
                    offsets = [lanes_per_key << i for i in range(warp_size.bit_length())
                               if lanes_per_key << i < warp_size]
                    acc = _butterfly(acc.transpose(0, 2, 1), lanes, offsets, np.add).transpose(0, 2, 1)
                    warp_parts.append((row_max, total, acc[:, slot == 0].reshape(ROWS, d.head_dim)))
                if slip == "last warp left out":
                    warp_parts = warp_parts[:-1]
                merged = (np.full(ROWS, minus_inf), np.zeros(ROWS, np.float32),
                          np.zeros((ROWS, d.head_dim), np.float32))
                for part in warp_parts:
                    merged = _merge(*merged, *part)
                part = ((bkv * row_groups + row_group) * chunks + chunk) * ROWS
                for r in range(ROWS):
                    part_acc[(part + r) * d.head_dim:(part + r + 1) * d.head_dim] = merged[2][r]
                    part_stats[(part + r) * 2:(part + r) * 2 + 2] = merged[0][r], merged[1][r]

    out = np.full(tuple(q.shape), np.nan, np.float32)                                 # poisoned, as the checker does
    for bkv in range(heads_in_flight):                                                # combine_chunks
        b, kv_head = divmod(bkv, d.kv_heads)
        for g in range(rows):
            first = (bkv * row_groups + g // ROWS) * chunks * ROWS + g % ROWS
            merged = (np.full(1, minus_inf), np.zeros(1, np.float32), np.zeros((1, d.head_dim), np.float32))
            for c in range(chunks):
                part = first + c * ROWS
                merged = _merge(*merged, part_stats[part * 2:part * 2 + 1], part_stats[part * 2 + 1:part * 2 + 2],
                                part_acc[part * d.head_dim:(part + 1) * d.head_dim][None])
            total = merged[1][0]
            row = merged[2][0] / total if total > 0 else np.zeros(d.head_dim, np.float32)
            out[b, kv_head * d.group + g % d.group, g // d.group] = row
    return torch.from_numpy(out).to(q.dtype)


# (shape, dtype, warp size, chunk_keys): pack sizes 8 (16-bit) and 4 (float32) at D = 64 and 128, i.e. 8, 16
# and 32 lanes a key, on 32- and 64-wide warps; GQA groups of 1, 2, 4 and 8 (two row groups), S_q 1 and 4
# (16 rows: 4 row groups); chunks of the launcher's choosing and forced ones whose causal tail, or whole
# chunk, no row can see; S_q > S_kv (fully masked rows); warps with no key (S_kv = 1, 5).
MODEL_CASES = [
    ((1, 8, 2, 1, 1000, 128), "bfloat16", 32, None),
    ((1, 8, 2, 1, 1000, 128), "bfloat16", 64, None),
    ((2, 4, 1, 1, 127, 64, 1), "float16", 32, None),
    ((1, 4, 1, 4, 130, 128, 1), "float32", 32, 128),     # chunk 2 (keys 128, 129): masked for queries 0 and 1
    ((1, 4, 1, 4, 130, 128, 1), "float32", 64, 64),
    ((1, 2, 2, 4, 2, 64, 1), "float32", 32, 1),          # S_q > S_kv: queries 0, 1 see nothing; 1-key chunks
    ((1, 8, 1, 1, 5, 64), "float16", 64, None),           # 8 heads on one KV head: two row groups; 3 idle warps
    ((1, 2, 1, 3, 300, 64, 1), "bfloat16", 32, 33),       # chunks of 33 keys: tiles cut mid-chunk
    ((1, 4, 2, 1, 1, 128), "float32", 32, None),          # one key
]


@pytest.mark.parametrize("shape, dtype, warp_size, chunk_keys", MODEL_CASES,
                         ids=[f"{'x'.join(map(str, s))}-{t}-w{w}-c{c}" for s, t, w, c in MODEL_CASES])
def test_the_lane_by_lane_model_agrees_with_the_float64_reference(shape, dtype, warp_size, chunk_keys):
    """The model's output, cast to the dtype, is within the spec's tolerance of the float64 reference and its
    invariants (fully masked rows exactly 0), on normal and "large" inputs and a fresh seed each."""
    for distribution in ("normal", "large"):
        inputs = _inputs(shape, dtype, distribution=distribution)
        output = model_v05(*inputs, warp_size=warp_size, chunk_keys=chunk_keys)
        assert not torch.isnan(output).any()
        failure = output_failure(spec, inputs, output, dtype)
        assert failure is None, f"{distribution}: {failure}"


@pytest.mark.parametrize("slip", ["no rescale", "weight from the wrong lane", "last warp left out"])
def test_the_model_with_one_slip_fails_the_same_check(slip):
    """The agreement above means something: each slip (a rescale forgotten, a weight shuffled from the
    neighbouring step's lane, one warp's partial dropped in the block merge) misses the reference. One chunk
    of 700 keys: each warp walks 5 or 6 tiles, so a forgotten rescale has tiles to forget it between.
    "large" inputs make the running maximum move (what a forgotten rescale gets wrong), but put nearly all
    of a row's weight on a few keys: a dropped warp whose keys hold none of it went unseen in 6 of 60
    seeds. So the dropped warp is shown on "normal" inputs, where every warp's keys carry weight."""
    distribution = "normal" if slip == "last warp left out" else "large"
    inputs = _inputs((1, 4, 1, 1, 700, 64), "float32", distribution=distribution)
    assert output_failure(spec, inputs, model_v05(*inputs, warp_size=32, chunk_keys=700), "float32") is None
    slipped = model_v05(*inputs, warp_size=32, chunk_keys=700, slip=slip)
    assert output_failure(spec, inputs, slipped, "float32") is not None


def test_the_model_reads_every_key_once_for_the_whole_group():
    """GQA: the blocks of one (row group, chunk) read each key of their chunk exactly once, for all 4 heads of
    the group (S_q = 1, a group of 4: one row group), not once per query head."""
    d = spec.dims((1, 32, 8, 1, 4097, 128))
    assert math.ceil(d.group * d.q_len / ROWS) == 1
    chunk_keys, chunks = launcher.split(d.kv_len, d.batch * d.kv_heads, launcher.BLOCKS_PER_SM * 132, WARPS * 32)
    pack, lanes_per_key = 8, 128 // 8
    keys_per_step = 32 // lanes_per_key
    read = np.zeros(d.kv_len, int)
    for chunk in range(chunks):
        start, stop = chunk * chunk_keys, min(d.kv_len, (chunk + 1) * chunk_keys)
        for warp in range(WARPS):
            for tile in range(start + warp * 32, stop, WARPS * 32):
                for step in range(lanes_per_key):
                    keys = tile + step * keys_per_step + np.arange(32) // lanes_per_key
                    np.add.at(read, keys[keys < stop], 1)
    assert (read == lanes_per_key).all()            # each key's 16 packs once (one lane each), every key
    assert pack * lanes_per_key == d.head_dim


# ------------------------------------------------------------------------------------------ GPU tier

def _decode_shapes():
    """The brief's decode shapes: 32 query / 8 KV heads, S_kv in {1, 127, 1000, 4097, 32768}, S_q in {1, 4},
    causal and not (D = 128; D = 64 at S_kv 1000 and 4097), and a batch of 2."""
    shapes = []
    for kv_len in (1, 127, 1000, 4097, 32768):
        for q_len in (1, 4):
            for causal in (0, 1):
                shapes.append((1, 32, 8, q_len, kv_len, 128, causal))
    shapes += [(2, 32, 8, 4, 1000, 64, 1), (2, 32, 8, 1, 4097, 64)]
    return shapes


@pytest.mark.gpu
@pytest.mark.skipif(not HAS_GPU, reason="needs a GPU")
@pytest.mark.parametrize("dtype", ["bfloat16", "float16", "float32"])
def test_v05_agrees_with_the_reference_at_decode_shapes(dtype):
    """The checker's full treatment (fresh seeds, poisoned outputs, normal and large inputs, the block probe,
    the strided layouts refused, a bitwise repeat) at every decode shape; float32 up to S_kv = 4097."""
    shapes = [s for s in _decode_shapes() if dtype != "float32" or s[4] <= 4097]
    report = check_rung(RUNG, OP, shapes=shapes, dtypes=[dtype])
    assert report.skipped is None, report.skipped
    assert report.passed, report.reason
    assert report.deterministic_checked


@pytest.mark.gpu
@pytest.mark.skipif(not HAS_GPU, reason="needs a GPU")
@pytest.mark.parametrize("shape, chunk_keys", [((1, 4, 1, 4, 130, 128, 1), 128), ((1, 4, 1, 4, 130, 128, 1), 1),
                                               ((2, 8, 2, 4, 2, 64, 1), 1), ((1, 32, 8, 4, 4097, 128, 1), 33),
                                               ((1, 32, 8, 1, 32768, 128), 32768), ((1, 8, 1, 1, 5, 64), 3)])
@pytest.mark.parametrize("dtype", ["bfloat16", "float32"])
def test_forced_splits_with_fully_masked_chunks_agree_with_the_reference(shape, chunk_keys, dtype):
    """Splits the launcher would not choose: 1-key chunks, chunks whose keys no row of a query can see
    (causal tail), S_q > S_kv (rows that see nothing: exactly 0), one chunk of all 32768 keys. Into a NaN
    output, fresh inputs each time."""
    kernel = RUNG.kernel(dtype=dtype)
    for _ in range(2):
        inputs = spec.make_inputs(shape, dtype, seed=random.randrange(2**31), device="cuda")
        out = torch.full_like(inputs[0], float("nan"))
        launcher.run(kernel, *inputs, out=out, chunk_keys=chunk_keys)
        assert output_failure(spec, inputs, out, dtype) is None, (shape, chunk_keys)


@pytest.mark.gpu
@pytest.mark.skipif(not HAS_GPU, reason="needs a GPU")
def test_misaligned_kv_is_refused_and_prefill_runs_v04_bit_for_bit():
    built = RUNG.build()
    q, k, v, causal = spec.make_inputs((1, 8, 2, 1, 300, 128), "bfloat16", seed=random.randrange(2**31), device="cuda")
    flat = torch.empty(k.numel() + 8, dtype=k.dtype, device="cuda")
    shifted = flat[8 - 3:k.numel() + 8 - 3].view(k.shape)
    shifted.copy_(k)
    with pytest.raises(ValueError, match="16-byte boundary"):
        built(q, shifted, v, causal)
    prefill = spec.make_inputs((1, 4, 2, 100, 300, 64, 1), "bfloat16", seed=random.randrange(2**31), device="cuda")
    ours = built(*prefill)
    parent = OP.rung("v04_causal_block_skipping").build()(*prefill)
    assert torch.equal(ours, parent)
    assert output_failure(spec, prefill, ours, "bfloat16") is None
