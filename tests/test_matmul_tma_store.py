"""matmul v18_tma_store_epilogue (sm_90a): its C tile in shared memory and its TMA stores, checked on the CPU
against models of the hardware; its SASS; its launcher's shared memory and the C it can store directly. GPU tier
(``-m gpu``): TMA clips at M and N (poisoned memory around C stays poisoned), and a C TMA cannot write (N not a
multiple of 8, an out= view at an odd element) is still right.

What v14 shares with it (the stage layouts, descriptors, grouped tile order) is checked for every Hopper rung by
tests/test_matmul_tensor_cores.py. The models follow the PTX ISA (wgmma's accumulator fragment, the 128-byte
swizzle that CU_TENSOR_MAP_SWIZZLE_128B reads, the async proxy, bulk groups, named barriers); the kernel's own
formulas are written once more here on purpose, and tied to its source by the string checks below.
"""

from __future__ import annotations

import re

import numpy as np
import pytest
import torch

from hello_gpu.ops import load_op
from hello_gpu.ops.rung import load_module
from hello_gpu.runtime.device import gpu_vendor
from test_attention_hopper import Barrier, accumulator_positions
from test_matmul_tensor_cores import _opcodes, _sass, swizzle_128

HAS_GPU = gpu_vendor() is not None
MATMUL = load_op("matmul")
RUNG = MATMUL.rung("v18_tma_store_epilogue")
SOURCE = RUNG.path.read_text()
launcher = load_module(RUNG.companion, "test_matmul_v18_launcher")
TILES = launcher.TILES
BOX_BYTES = 64 * 128                    # a store box: 64 rows x 64 16-bit columns
CONSUMER_BYTES = 4 * BOX_BYTES          # a consumer warpgroup's 64 x 256 block of C


# ---------------------------------------------------------------- the C tile in shared memory


def staged_offset(row: int, column: int) -> int:
    """stage_output's byte (before the swizzle) of element (row, column) of a consumer's 64 x 256 block."""
    return (column // 64) * BOX_BYTES + row * 128 + (column % 64) * 2


def stage_block(sums: np.ndarray, swizzle=swizzle_128) -> np.ndarray:
    """The consumer warpgroup's 128 threads writing a 64 x 256 block held in wgmma accumulators (two 64 x 128
    halves, register i of a half as PTX's D fragment) into shared memory as stage_output does; 16-bit cells
    (NaN: never written). Asserts that no cell is written twice."""
    shared = np.full(CONSUMER_BYTES // 2, np.nan)
    rows, columns = accumulator_positions(128)
    for half in range(2):
        for thread in range(128):
            for i in range(64):
                row, column = rows[thread, i], 128 * half + columns[thread, i]
                cell = swizzle(staged_offset(row, column)) // 2
                assert np.isnan(shared[cell]), (half, thread, i)
                shared[cell] = sums[row, column]
    return shared


def tma_store_box(shared: np.ndarray, box: int, c: np.ndarray, row0: int, column0: int) -> None:
    """cp.async.bulk.tensor's store of box ``box`` (64 rows x 64 columns, 128-byte swizzled) to C at
    (row0, column0): rows and columns outside C are not written (the tensor map's bounds)."""
    for r in range(64):
        for j in range(64):
            if row0 + r < c.shape[0] and column0 + j < c.shape[1]:
                c[row0 + r, column0 + j] = shared[swizzle_128(box * BOX_BYTES + r * 128 + 2 * j) // 2]


@pytest.mark.parametrize("m, n", ((128, 256), (100, 200), (64, 8), (1, 1)), ids=str)
def test_staged_block_stored_by_tma_is_the_consumers_block_clipped_to_c(m, n):
    """Each consumer's 64 x 256 sums go through shared memory and 4 box stores to exactly their places in C; an
    edge tile writes only inside M x N (poisoned cells around stay NaN)."""
    rng = np.random.default_rng(m * 1000 + n)
    tile = rng.integers(-99, 100, (128, 256)).astype(np.float64)         # the 128 x 256 tile's sums
    c = np.full((m, n), np.nan)
    for consumer in range(2):
        shared = stage_block(tile[64 * consumer:64 * consumer + 64])
        assert not np.isnan(shared).any(), "every cell of the 32 KiB is written"
        for box in range(4):
            tma_store_box(shared, box, c, 64 * consumer, 64 * box)
    np.testing.assert_array_equal(c, tile[:m, :n])


def test_a_block_staged_without_the_swizzle_is_stored_wrong():
    """The model is not vacuous: writing the cells where they lie before the swizzle (what TMA would read if the
    map said SWIZZLE_NONE) puts the sums in the wrong columns."""
    tile = np.arange(64 * 256, dtype=np.float64).reshape(64, 256)
    c = np.full((64, 256), np.nan)
    shared = stage_block(tile, swizzle=lambda offset: offset)
    for box in range(4):
        tma_store_box(shared, box, c, 0, 64 * box)
    assert not np.array_equal(c, tile)


def _banks_of_each_warp_store(swizzle) -> list[list[int]]:
    """For each 4-byte st.shared a warp issues in stage_output (half, j, lower): the bank of each lane."""
    found = []
    for warp in range(4):
        for half in range(2):
            for j in range(16):
                for lower in range(2):
                    banks = []
                    for lane in range(32):
                        g, t = lane // 4, lane % 4
                        offset = staged_offset(16 * warp + g + 8 * lower, 128 * half + 8 * j + 2 * t)
                        banks.append((swizzle(offset) // 4) % 32)
                    found.append(banks)
    return found


def test_the_staging_stores_have_no_bank_conflict_and_would_without_the_swizzle():
    """A warp's store covers 8 rows x 16 bytes; the swizzle puts the 8 rows' pieces on 8 different groups of 4
    banks, so each of the 64 stores a thread makes is one 128-byte wavefront. Unswizzled, the 8 rows (128 bytes
    apart) share 4 banks: 8 wavefronts a store."""
    for banks in _banks_of_each_warp_store(swizzle_128):
        assert len(set(banks)) == 32
    assert all(len(set(banks)) == 4 for banks in _banks_of_each_warp_store(lambda offset: offset))


def kernel_byte(thread: int, half: int, j: int, lower: int) -> int:
    """stage_output's address as the kernel forms it: from the thread's first row and column pair, plus the box,
    8 rows for the lower half of the fragment, and the swizzled piece (j % 8) ^ g."""
    warp, g, t = thread // 32, (thread % 32) // 4, thread % 4
    first = (16 * warp + g) * 128 + 4 * t
    return first + (2 * half + j // 8) * BOX_BYTES + lower * 8 * 128 + ((j % 8) ^ g) * 16


def test_the_kernels_addresses_are_the_swizzled_layout():
    """The kernel's shortcut (a thread's rows are all g modulo 8, so its swizzle is a fixed XOR of the piece
    index) gives the model's swizzled byte for each of the 64 stores of each thread."""
    for thread in range(128):
        warp, g, t = thread // 32, (thread % 32) // 4, thread % 4
        for half in range(2):
            for j in range(16):
                for lower in range(2):
                    row, column = 16 * warp + g + 8 * lower, 128 * half + 8 * j + 2 * t
                    assert kernel_byte(thread, half, j, lower) == swizzle_128(staged_offset(row, column))
    for line in ("char* first = boxes + (16 * warp + g) * 128 + 4 * t;",
                 "const int box = 2 * half + j / 8, piece = (j % 8) ^ g;",
                 "char* at = first + box * kOutputBoxBytes + lower * 8 * 128 + piece * 16;",
                 "const float* pair = &sums[0][half][4 * j + 2 * lower];",
                 "constexpr uint32_t kOutputBoxBytes = 64 * 128;",
                 "tma_store_tile(output_map, boxes + box * kOutputBoxBytes, tile_n * kBN + 64 * box, "
                 "tile_m * kBM + rows);",
                 "char* boxes = output + (warpgroup - 1) * kConsumerOutputBytes;"):
        assert line in SOURCE, line
    assert launcher.OUTPUT_BOX == (64, 64)


# ---------------------------------------------------------------- the schedule: ring, epilogue and TMA engine


class NamedBarrier:
    """bar.sync id, 128 for one warpgroup: a warp that arrives waits until all 4 of the warpgroup's have."""

    def __init__(self, warps: int = 4):
        self.warps, self.arrived, self.generation = warps, 0, 0

    def sync(self):
        generation = self.generation
        self.arrived += 1
        if self.arrived == self.warps:
            self.arrived, self.generation = 0, self.generation + 1
        while self.generation == generation:
            yield lambda: self.generation != generation


def block_schedule(rounds: int, k_tiles: int, seed: int, *, wait_before_writing=True, barrier_before_store=True,
                   fence=True, wait_at_exit=True) -> list[str]:
    """One persistent block of v18 over ``rounds`` tiles of ``k_tiles`` stages: the producer thread, the 8
    consumer warps (2 warpgroups) and the TMA engine, run in a random interleaving (agents are generators that
    yield where the kernel waits, a callable that says when they may go on). TMA loads land at random later
    steps; the engine reads each commit group's boxes at a random step after its issue (in half the seeds, late).
    C-tile cells hold the number of the tile a warp last wrote there; a warp's writes reach the engine only after
    its fence.proxy.async.
    Returns the problems seen: a slot overwritten while read, a wgmma reading another stage than its own, a box
    stored with another tile's (or no) data, shared memory left while the engine reads it, a deadlock."""
    rng = np.random.default_rng(seed)
    stages = TILES["Stages"]
    full, empty = [Barrier(1) for _ in range(stages)], [Barrier(8) for _ in range(stages)]
    slots, readers = [None] * stages, [0] * stages
    written = {(c, w): None for c in range(2) for w in range(4)}      # what warp w of consumer c wrote last
    visible = dict(written)                                           # ...as the TMA engine sees it
    barriers = [NamedBarrier(), NamedBarrier()]
    unread = [[], []]                     # per consumer's issuing thread: stores issued, boxes not yet read
    stored, landing, problems, exited = [], [], [], []

    def wait_on(barrier: Barrier, parity: int):
        while not barrier.passes(parity):
            yield lambda: barrier.passes(parity)

    def producer():
        for step in range(rounds * k_tiles):
            slot, use = step % stages, step // stages
            if use > 0:
                yield from wait_on(empty[slot], (use - 1) & 1)
            landing.append((slot, step))

    def consumer_warp(consumer: int, warp: int):
        issuer = warp == 0
        step = 0
        for tile in range(rounds):
            for _ in range(k_tiles):
                slot = step % stages
                yield from wait_on(full[slot], (step // stages) & 1)
                if slots[slot] != step:
                    problems.append(f"consumer {consumer} warp {warp} read stage {slots[slot]}, wanted {step}")
                readers[slot] += 1
                yield None                                          # the wgmmas run
                readers[slot] -= 1
                empty[slot].arrive()
                step += 1
            if issuer and wait_before_writing:
                while unread[consumer]:
                    yield lambda: not unread[consumer]               # cp.async.bulk.wait_group.read 0
            yield from barriers[consumer].sync()
            written[(consumer, warp)] = tile                         # st.shared of its 16 rows
            yield None
            if fence:
                visible[(consumer, warp)] = tile                     # fence.proxy.async.shared::cta
            if barrier_before_store:
                yield from barriers[consumer].sync()
            if issuer:
                unread[consumer].append(tile)                         # 4 boxes, one commit_group
            yield None
        if issuer and wait_at_exit:
            while unread[consumer]:
                yield lambda: not unread[consumer]
        exited.append((consumer, warp))

    def engine_reads(consumer: int):
        tile = unread[consumer].pop(0)
        seen = [visible[(consumer, w)] for w in range(4)]
        if len(exited) == 8:                                          # every consumer warp has left
            problems.append(f"consumer {consumer}'s tile {tile} read after the block left its shared memory")
        if seen != [tile] * 4:
            problems.append(f"consumer {consumer} stored tile {tile} from cells holding tiles {seen}")
        stored.append((consumer, tile))

    agents = [producer()] + [consumer_warp(c, w) for c in range(2) for w in range(4)]
    waiting = [None] * len(agents)
    engine_pace = 0.3 if seed % 2 else 0.01            # half the runs, an engine that reads late
    while agents or landing or any(unread):
        ready = [n for n, w in enumerate(waiting) if w is None or w()]
        storing = [c for c in range(2) if unread[c]]
        if storing and (not ready or rng.random() < engine_pace):
            engine_reads(storing[int(rng.integers(len(storing)))])
            continue
        if landing and (not ready or rng.random() < 0.3):
            slot, step = landing.pop(int(rng.integers(len(landing))))
            if readers[slot]:
                problems.append(f"stage {step} landed in slot {slot} while a wgmma read it")
            slots[slot] = step
            full[slot].arrive()
            continue
        if not ready:
            return problems + ["deadlock"]
        n = ready[int(rng.integers(len(ready)))]
        try:
            waiting[n] = next(agents[n])
        except StopIteration:
            agents.pop(n)
            waiting.pop(n)
    if sorted(stored) != sorted((c, t) for c in range(2) for t in range(rounds)):
        problems.append(f"stored {sorted(stored)}")
    return problems


@pytest.mark.parametrize("rounds, k_tiles", ((1, 1), (2, 1), (3, 2), (3, 3), (4, 5), (2, 8)))
def test_every_tile_is_stored_from_its_own_sums_in_any_interleaving(rounds, k_tiles):
    for seed in range(30):
        assert block_schedule(rounds, k_tiles, seed) == [], (rounds, k_tiles, seed)


@pytest.mark.parametrize("mutation", ("wait_before_writing", "barrier_before_store", "fence", "wait_at_exit"))
def test_the_schedule_model_sees_each_step_of_the_epilogue_left_out(mutation):
    """Without the wait for the engine's reads the next tile's sums overwrite boxes not yet stored; without the
    second barrier the issuer stores before the other warps have written; without the fence the engine reads
    what it saw before; without the last wait the block leaves while its boxes are read."""
    assert any(block_schedule(3, 2, seed, **{mutation: False}) for seed in range(60)), mutation


def test_the_kernel_orders_its_epilogue_as_the_model_does():
    """The statements the model stands for, in the kernel's order, once each tile (and the wait once at exit)."""
    epilogue = ("if (issuer) tma_store_wait_read();", "warpgroup_barrier(warpgroup);",
                "stage_output<T>(boxes, sums);", "shared_writes_to_async_proxy();", "warpgroup_barrier(warpgroup);",
                "tma_store_tile(", "tma_store_commit();", "if (issuer) tma_store_wait_read();")
    position = SOURCE.index("for (int t = 0; t < k_tiles; ++t, ++step) {\n      const int slot = step % kStages;\n"
                            "      mbarrier_wait(&full[slot]")
    for statement in epilogue:
        position = SOURCE.index(statement, position + 1)
    assert "mbarrier_init(&empty[s], kConsumerWarps);" in SOURCE and "constexpr int kConsumerWarps = 8;" in SOURCE
    assert "asm volatile(\"bar.sync %0, 128;\\n\"" in SOURCE                        # 4 warps: the model's NamedBarrier
    assert "if (use > 0) mbarrier_wait(&empty[slot], (use - 1) & 1);" in SOURCE
    assert "mbarrier_wait(&full[slot], (step / kStages) & 1);" in SOURCE


# ---------------------------------------------------------------- resources and SASS, no GPU needed


def test_stages_and_the_c_tile_fit_one_block_an_sm():
    """3 stages of 48 KiB and the 64 KiB C tile, the barriers and the alignment within the 227 KiB a block may have;
    the bytes the launcher asks for are the ones the kernel requires (require_dynamic_shared)."""
    tensor_maps = load_module(MATMUL.path / "tensor_maps.py", "test_matmul_v18_tensor_maps")
    assert TILES["Stages"] == 3 and TILES["OutputTiles"] == 1
    assert launcher.OUTPUT_BYTES == 2 * CONSUMER_BYTES == 65536
    total = tensor_maps.hopper_shared_bytes(TILES) + launcher.OUTPUT_BYTES
    assert total == 3 * 49152 + 65536 + 256 + 1024 <= 232_448
    assert "aligned_dynamic_shared(kStages * kStageBytes + kOutputTiles * 2 * kConsumerOutputBytes +" in SOURCE
    assert 2 * TILES["Stages"] * 8 <= 256                          # full and empty mbarriers in kBarrierBytes


@pytest.mark.parametrize("dtype", ("bfloat16", "float16"))
def test_the_epilogue_is_shared_stores_and_tma_stores_in_the_sass(dtype):
    """No global store left in the kernel: 64 STS (a thread's 128 sums as 64 pairs), 4 UTMASTG (the boxes), the
    block's one BAR plus the two named barriers of each tile; the mainloop is v14's (8 HGMMA, UTMALDG, SYNCS)."""
    sass = _sass("v18_tma_store_epilogue", dtype)
    opcodes = _opcodes(sass)
    counts = {op: len(re.findall(rf"^\s*/\*[0-9a-f]{{4,}}\*/\s+(?:@!?U?P\w+\s+)?{op}\b", sass, re.M))
              for op in ("STS", "STG", "UTMASTG", "HGMMA", "BAR")}
    assert counts == {"STS": 64, "STG": 0, "UTMASTG": 4, "HGMMA": 8, "BAR": 3}, counts
    assert {"UTMALDG", "WARPGROUP"} <= opcodes and any(op.startswith("SYNCS") for op in opcodes)


@pytest.mark.parametrize("columns, offset, direct", ((256, 0, True), (8, 0, True), (781, 0, False), (256, 1, False)))
def test_the_launcher_stores_directly_only_where_tma_can(columns, offset, direct):
    buffer = torch.empty(4 * columns + 8, dtype=torch.bfloat16)
    c = buffer[offset:offset + 4 * columns].view(4, columns)
    assert launcher.stores_directly(c) is direct


def test_the_launcher_refuses_by_name_and_launches_nothing_for_an_empty_c():
    with pytest.raises(ValueError, match="these kernels take bfloat16, float16"):
        launcher.run(None, torch.randn(3, 8), torch.randn(8, 8))
    with pytest.raises(ValueError, match="b must be contiguous row-major"):
        launcher.run(None, torch.randn(3, 8).bfloat16(), torch.randn(8, 8).bfloat16().t())
    empty = launcher.run(None, torch.randn(0, 8).bfloat16(), torch.randn(8, 16).bfloat16())   # kernel None: not called
    assert empty.shape == (0, 16)


# ---------------------------------------------------------------- GPU tier


@pytest.mark.gpu
@pytest.mark.skipif(not HAS_GPU, reason="needs a GPU")
@pytest.mark.parametrize("dtype", ("bfloat16", "float16"))
@pytest.mark.parametrize("shape", ((200, 264, 520), (1, 8, 64), (129, 256, 4096), (1823, 781, 517)), ids=str)
def test_tma_stores_stay_inside_c_and_odd_c_is_copied(shape, dtype):
    """C placed inside a poisoned buffer: the elements after it (rows past M of the boxes the edge tiles store) stay
    NaN; C at an odd element (not 16-byte aligned) goes through the padded copy and is right too."""
    from hello_gpu.ops.checking import output_failure
    if RUNG.skip_reason():
        pytest.fail(f"v18 cannot run here: {RUNG.skip_reason()} (the lead's H200 must run it)")
    built = RUNG.build()
    m, n, _ = shape
    inputs = MATMUL.spec.make_inputs(shape, dtype, seed=13, device="cuda")
    for offset in (0, 1):
        buffer = torch.full((m * n + 4096 + offset,), float("nan"), dtype=inputs[0].dtype, device="cuda")
        out = buffer[offset:offset + m * n].view(m, n)
        result = built(*inputs, out=out)
        assert result.data_ptr() == out.data_ptr()
        assert output_failure(MATMUL.spec, inputs, result, dtype) is None, (shape, dtype, offset)
        assert torch.isnan(buffer[:offset]).all() and torch.isnan(buffer[offset + m * n:]).all(), (shape, offset)
