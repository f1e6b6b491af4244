"""Triton, warp-specialised: t05's persistent TMA loop with tl.range(..., warp_specialize=True), so Triton
splits each program into a producer warpgroup that issues the TMA loads and two consumer warpgroups that
only wait for full stages, multiply and store, as the hand-written v13-v18 do.

parent: t05_persistent_tma
change: the tile loop is tl.range(first tile, tiles, programs, warp_specialize=True) with num_warps = 4;
  Triton 3.6 compiles it for sm_90 into 3 warpgroups (ttg.warp_specialize: one producer at 40 registers,
  setmaxnreg, issuing the TMA copies into the stages; two consumers at 232, each owning half the
  tile's rows, waiting on the stage's full mbarrier and arriving on its empty one; 12 warps in all).
  What the partitioner needs, and t05 differs in: the descriptors are made in the kernel
  (tl.make_tensor_descriptor, 512 bytes of global scratch a program, from an allocator the launcher
  sets in a copied context) because it splits A's box between the consumers, which a host
  descriptor's fixed box refuses (compile error); the loop is not flattened (with flatten=True it does
  not specialise); C leaves as one tile store, each consumer storing its half by TMA (t05's two column
  halves are a reshape / split it cannot partition). Three 16-bit configurations (CONFIGS), bfloat16
  and float16 only; K or N not a multiple of 8 run on zero-padded copies, as in t05
hypothesis: split into rounds of 128x256 tiles (512 and 2,048 tiles on 132 SMs: 4 and 16 rounds), the
  record (run of 6173353) puts t05 at 43.7 us per 4,096 of K plus 1.0 us a tile (178.8 us at 4096^3,
  1,414.7 at 8192^3) and v18 at 42.4 plus 1.7 (176.2, 1,383.3): t05's multiply loop is 3% slower
  than a warp-specialised one, its epilogue (stmatrix + TMA store) faster than v18's. In t05 every
  warp waits for each stage's TMA and one elected thread reissues it after a CTA-wide barrier (8
  BAR.SYNC of all 256 threads in the loop, SASS of ladders.md item 9), so the two warpgroups run in
  lockstep and a late one stalls both. Compiled here (Triton 3.6, sm_90) each consumer's K step is 2
  mbarrier waits, 4 HGMMA.64x256x16, a wait for them, 2 arrivals behind a 128-thread named barrier:
  v18's step, no CTA-wide barrier; the epilogue is t05's (16 STSM a thread, one UTMASTG a consumer)
  plus a wait until TMA has read the 32 KiB of each consumer's C. Expect v18's 42.4 us per 4,096 of K
  and ~1.2 us a tile: 4 x (42.4 + 1.2) = 174.4 us at 4096^3 (4.4 us less), 16 x (84.8 + 1.2) = 1,376
  at 8192^3. Shared memory: 3 stages x 48 KiB + 2 x 32 KiB of C = 208 KiB (213,464 B compiled). Level
  with t05 would say the loop is not where t05 loses; the next suspect is the tail (512 tiles on 132 SMs:
  the 4th round runs 116)
prediction: ~1.025x t05 bf16 at 4096^3 (~174 us, ~790 TFLOP/s, ~1.00x torch.mm: the issue's 1.0x, within
  its noise); ~1.03x t05 at 8192^3 (~1,376 us, ~1.04x torch.mm paired); ~1.03x t05 on the prefill shapes
  (4096x14336x4096: 14 rounds, 4096x4096x14336: 4 rounds of 3.5x the K, 4096x128256x4096: 122 rounds),
  0.95-1.02x torch.mm there. Autotuning: 3 configurations, ~2 s of compiling each (sm_90, Triton 3.6,
  compiled here on a CPU) and ~0.15 s of timing each per shape: under 30 s for a 6-shape ladder run
outcome: not measured yet
deterministic: yes, each tile of C is one consumer pair's sum over K in order; the autotuner's choice is made
  once per shape
dtypes: bfloat16 float16
"""

# hello-gpu: record matmul.bfloat16

import contextvars
from pathlib import Path

import torch
import triton
import triton.language as tl

from hello_gpu.ops.matmul.launch import checked_output
from hello_gpu.ops.matmul.tensor_cores import ALIGNMENT, DTYPES, kernel_operands
from hello_gpu.ops.rung import load_module, triton_interpreter_on

_t05 = load_module(Path(__file__).resolve().with_name("t05_persistent_tma.py"), "matmul_t05_for_t06")
grouped_tile = _t05.grouped_tile           # t02's grouped order: tile number -> (tile row, tile column)
GROUP_M = _t05.GROUP_M
WARPS = 4       # a warpgroup per partition: Triton 3.6 specialises sm_90 loops of 4-warp kernels only


def _config(block_m, block_n, block_k, stages):
    return triton.Config({"BLOCK_M": block_m, "BLOCK_N": block_n, "BLOCK_K": block_k, "GROUP_M": GROUP_M},
                         num_warps=WARPS, num_stages=stages)


# Shared memory: stages x (BLOCK_M + BLOCK_N) x BLOCK_K x 2 B plus the whole C tile (each consumer's half):
# 208, 208 and 160 KiB. 128x256 and 256x128 give each consumer 64x256 or 128x128 of C (128 float32 sums a
# thread either way); 128x128 in 4 stages for tile counts 128x256 splits badly. 4 stages of 128x256 would
# be 256 KiB, over the 227 KiB a block may have.
CONFIGS = [_config(128, 256, 64, 3), _config(256, 128, 64, 3), _config(128, 128, 64, 4)]


@triton.jit
def warp_specialized_kernel(a_ptr, b_ptr, c_ptr, M, N, K, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                            BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr):
    # Row strides K and N: the launcher pads both to multiples of 8 elements (16 bytes), as TMA needs.
    a_desc = tl.make_tensor_descriptor(a_ptr, [M, K], [K, 1], [BLOCK_M, BLOCK_K])
    b_desc = tl.make_tensor_descriptor(b_ptr, [K, N], [N, 1], [BLOCK_K, BLOCK_N])
    c_desc = tl.make_tensor_descriptor(c_ptr, [M, N], [N, 1], [BLOCK_M, BLOCK_N])
    tiles_m, tiles_n = tl.cdiv(M, BLOCK_M), tl.cdiv(N, BLOCK_N)
    k_steps = tl.cdiv(K, BLOCK_K)
    for tile in tl.range(tl.program_id(0), tiles_m * tiles_n, tl.num_programs(0), warp_specialize=True):
        pid_m, pid_n = grouped_tile(tile, tiles_m, tiles_n, GROUP_M)
        acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
        for step in range(k_steps):
            k = step * BLOCK_K
            # Boxes past M, N or K arrive as zeros (the descriptors' padding), which add nothing.
            acc = tl.dot(a_desc.load([pid_m * BLOCK_M, k]), b_desc.load([k, pid_n * BLOCK_N]), acc)
        # TMA clips what lies past M or N.
        c_desc.store([pid_m * BLOCK_M, pid_n * BLOCK_N], acc.to(c_desc.dtype))


INTERPRETED = triton_interpreter_on()
# The interpreter has no clock to tune with: there the first configuration runs (see launch()).
TUNER = None if INTERPRETED else triton.autotune(configs=CONFIGS, key=["M", "N", "K"])(warp_specialized_kernel)


def winners() -> dict[str, str]:
    """The configuration the autotuner chose per (M, N, K) it has seen (empty before the first call and
    in the interpreter)."""
    return {} if TUNER is None else {str(key): str(config) for key, config in TUNER.cache.items()}


def _launch_with_scratch(a_used, b_used, c_used, sizes, sms, config):
    def scratch(size: int, alignment: int, stream):
        """Global scratch for the in-kernel descriptors (128 bytes each, per program), asked for at every
        launch; torch's caching allocator returns 512-byte aligned blocks, above the 128 asked for."""
        return torch.empty(size, dtype=torch.int8, device=a_used.device)

    triton.set_allocator(scratch)       # this context is a copy (launch()): the caller's allocator stays

    def grid(meta):
        return (min(sms, triton.cdiv(sizes[0], meta["BLOCK_M"]) * triton.cdiv(sizes[1], meta["BLOCK_N"])),)

    if config is None and not INTERPRETED:
        TUNER[grid](a_used, b_used, c_used, *sizes)
    else:
        config = config or CONFIGS[0]
        warp_specialized_kernel[grid(config.kwargs)](a_used, b_used, c_used, *sizes, num_warps=config.num_warps,
                                                     num_stages=config.num_stages, **config.kwargs)


def launch(a, b, out=None, config=None):
    """Check, pad what TMA cannot read, run: under the autotuner, or with ``config`` (one of CONFIGS; the
    interpreter, which cannot time, runs the first)."""
    out = checked_output(a, b, out, DTYPES)
    (m, k), n = a.shape, b.shape[1]
    if out.numel() == 0:
        return out
    if k == 0:
        return out.zero_()
    # TMA reads and writes rows that start 16 bytes apart, from 16-byte aligned addresses: K and N
    # multiples of 8 elements. Otherwise zero-padded copies of A (M, K8) and B (K8, N8), and C as (M, N8).
    a_used, b_used = kernel_operands(a, b)
    n_used = b_used.shape[1]
    direct = n_used == n and out.data_ptr() % ALIGNMENT == 0
    c_used = out if direct else out.new_empty((m, n_used))
    sms = _t05._sm_count(a.device.index) if a.is_cuda else _t05.INTERPRETER_SMS
    # triton.set_allocator sets a ContextVar: set in a copy of the caller's context, it lasts this launch.
    contextvars.copy_context().run(_launch_with_scratch, a_used, b_used, c_used, (m, n_used, a_used.shape[1]),
                                   sms, config)
    if not direct:
        out.copy_(c_used[:, :n])
    return out


def run(a, b, out=None):
    return launch(a, b, out)
