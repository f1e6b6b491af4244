"""Triton, persistent and TMA-fed: one program per SM walks the tiles of C in t02's grouped order, and A,
B and C move between global and shared memory through tensor descriptors (Hopper's TMA copy engine)
instead of cp.async and per-thread stores.

parent: t04_autotuned
change: the kernel is new (t04 launched t02's): tl.range(first tile, tiles, programs, flatten=True)
  walks tiles p, p + 132, ... in grouped order (GROUP_M = 8) on a grid of one program per SM; A (M x K),
  B (K x N) and C are host-side TensorDescriptors (triton.tools.tensor_descriptor; no
  triton.set_allocator, whose allocator is a per-thread ContextVar), so each K step is two TMA box
  copies and the epilogue two TMA stores of BLOCK_M x BLOCK_N / 2 halves. Autotuned over four 16-bit
  configurations (CONFIGS); bfloat16 and float16 only. TMA needs 16-byte aligned rows: where K or N is
  not a multiple of 8 (or a pointer not 16-byte aligned) the kernel runs on tensor_cores.kernel_operands'
  zero-padded copies and a padded C, copied into out (edge shapes only)
hypothesis: at 4096^3 t04 takes 226 us, torch.mm 177 (609 and 777.9 TFLOP/s; the measured matmul
  ceiling 779.6). Not DRAM: 96 MiB at least, ~23 us of copy bandwidth, under a compute-bound 177. L2
  carries (128 + 256) x 4096 x 2 B = 3 MiB of A and B per 128x256 tile, 1.6 GB for 512 tiles: 9.1
  TB/s at cuBLAS's pace, 8.2 TB/s as v14 (same tiles, no multicast) measured: L2 feeds >= 0.9x.
  Not issue slots either (SASS of both, Triton 3.6, sm_90, compiled here): t04's K step is 166
  instructions a thread (12 LDGSTS with 64-bit addresses and masks: 36 IMAD, 21 SEL, 16 ISETP),
  t05's hot path 110 (2 UTMALDG from one elected thread, an mbarrier wait, 4 BAR.SYNC); 8 warps
  issue them in 220-330 of the 1,100-1,400 cycles a 128x256x64 step keeps an SM's tensor cores
  busy. What TMA and persistence remove is waiting: every thread's cp.async group and a barrier
  before each wgmma step become one transaction-count mbarrier; and at each tile's end (one 144 KiB CTA an SM,
  3.9 waves) the tensor cores idle while C leaves through registers and the next CTA refills 2
  stages. Flattened (tl.range flatten=True), t05 issues the next tile's first loads before this
  tile's epilogue, whose C leaves by TMA store. The hand-written route measured these steps: v13
  (TMA, warp-specialised) 1.12x t03; v14 (persistent) 1.03x v13, 704 TFLOP/s. Triton 3.6
  specialises warps on Blackwell only (tl.range's docs; compiled for sm_90 with warp_specialize=True
  the SASS is unchanged), so every t05 warp both waits for loads and issues wgmma: expect short of
  v14. Shared memory: 128x256x64 in 3 stages 144 KiB + 32 KiB for half of C = 176 KiB (180,248 B
  compiled); 4 stages 229,408 B, within the 232,448 a block may have
prediction: ~1.1x t04 bf16 at 4096^3 (~670 TFLOP/s, ~0.86x torch.mm: short of the issue's 1.0x);
  ~1.1x t04 at 8192^3 (~0.85x torch.mm paired, against t04's 0.772x); 0.85-0.9x torch.mm on the
  prefill shapes (4096x14336x4096: 1,792 tiles, 13.6 waves; 4096x4096x14336: 224 K steps a tile)
outcome: 1.273x t04 [1.270, 1.275] at 4096^3 bfloat16 (predicted ~1.1x), 0.988x torch.mm [0.983, 0.995], 178.8 us, 769
  TFLOP/s (predicted ~670, ~0.86x: missed, 15% faster, level with v18's 780); 1.309x t04 [1.302, 1.317], 1.016x torch.mm
  [1.011, 1.019] at 8192^3, 777 TFLOP/s (predicted ~0.85x) (records matmul.bfloat16, run of 6173353)
deterministic: yes, each tile of C is one program's sum over K in order; the autotuner's choice is made
  once per shape
dtypes: bfloat16 float16
"""

# hello-gpu: record matmul.bfloat16

import functools

import torch
import triton
import triton.language as tl
from triton.tools.tensor_descriptor import TensorDescriptor

from hello_gpu.ops.matmul.launch import checked_output
from hello_gpu.ops.matmul.tensor_cores import ALIGNMENT, DTYPES, kernel_operands
from hello_gpu.ops.rung import triton_interpreter_on

GROUP_M = 8
INTERPRETER_SMS = 3     # the Triton interpreter has no SMs: few programs, so each walks several tiles


def _set_boxes(nargs):
    """Point each descriptor's box (the block one TMA copy moves) at the configuration about to run:
    the autotuner calls this before every launch, timed or not."""
    block_m, block_n, block_k = nargs["BLOCK_M"], nargs["BLOCK_N"], nargs["BLOCK_K"]
    nargs["a_desc"].block_shape = [block_m, block_k]
    nargs["b_desc"].block_shape = [block_k, block_n]
    nargs["c_desc"].block_shape = [block_m, block_n // 2]          # C leaves in two halves


def _config(block_m, block_n, block_k, warps, stages):
    return triton.Config({"BLOCK_M": block_m, "BLOCK_N": block_n, "BLOCK_K": block_k, "GROUP_M": GROUP_M},
                         num_warps=warps, num_stages=stages, pre_hook=_set_boxes)


# Shared memory: stages x (BLOCK_M + BLOCK_N) x BLOCK_K x 2 B, plus the C half being stored:
# 176, 224, 176 and 144 KiB (the H100 / H200 give a block at most 227 KiB). BLOCK_K = 64 is one
# 128-byte swizzle row of bfloat16, the widest box row TMA swizzles.
CONFIGS = [_config(128, 256, 64, 8, 3), _config(128, 256, 64, 8, 4), _config(256, 128, 64, 8, 3),
           _config(128, 128, 64, 4, 4)]


@triton.jit
def grouped_tile(tile, tiles_m, tiles_n, GROUP_M: tl.constexpr):
    """t02's grouped order: tile number -> (tile row, tile column), down GROUP_M tile rows, then right."""
    per_group = GROUP_M * tiles_n
    first_m = (tile // per_group) * GROUP_M
    rows_in_group = tl.minimum(tiles_m - first_m, GROUP_M)      # the last group may be shorter
    within = tile % per_group
    return first_m + within % rows_in_group, within // rows_in_group


@triton.jit
def persistent_tma_kernel(a_desc, b_desc, c_desc, M, N, K, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                          BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr):
    tiles_m, tiles_n = tl.cdiv(M, BLOCK_M), tl.cdiv(N, BLOCK_N)
    k_steps = tl.cdiv(K, BLOCK_K)
    programs = tl.num_programs(0)
    # The tile whose C is stored is counted apart from the tile being loaded: flattened, the loop issues
    # the next tile's first loads before this tile's epilogue, and a separate count keeps the epilogue
    # from depending on values the next tile's prologue has already replaced.
    stored = tl.program_id(0) - programs
    for tile in tl.range(tl.program_id(0), tiles_m * tiles_n, programs, flatten=True):
        pid_m, pid_n = grouped_tile(tile, tiles_m, tiles_n, GROUP_M)
        acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
        for step in range(k_steps):
            k = step * BLOCK_K
            # Boxes past M, N or K arrive as zeros (the descriptors' padding), which add nothing.
            acc = tl.dot(a_desc.load([pid_m * BLOCK_M, k]), b_desc.load([k, pid_n * BLOCK_N]), acc)
        stored += programs
        pid_m, pid_n = grouped_tile(stored, tiles_m, tiles_n, GROUP_M)
        # C in two halves of BLOCK_N / 2 columns: half the shared memory a whole tile would stage (32 KiB
        # at 128x256, not 64), which lets 128x256x64 keep 4 stages. TMA clips what lies past M or N.
        halves = tl.permute(tl.reshape(acc, (BLOCK_M, 2, BLOCK_N // 2)), (0, 2, 1))
        left, right = tl.split(halves)
        c_desc.store([pid_m * BLOCK_M, pid_n * BLOCK_N], left.to(c_desc.dtype))
        c_desc.store([pid_m * BLOCK_M, pid_n * BLOCK_N + BLOCK_N // 2], right.to(c_desc.dtype))


INTERPRETED = triton_interpreter_on()
# The interpreter has no clock to tune with: there the first configuration runs (see launch()).
TUNER = None if INTERPRETED else triton.autotune(configs=CONFIGS, key=["M", "N", "K"])(persistent_tma_kernel)


def winners() -> dict[str, str]:
    """The configuration the autotuner chose per (M, N, K) it has seen (empty before the first call and
    in the interpreter)."""
    return {} if TUNER is None else {str(key): str(config) for key, config in TUNER.cache.items()}


@functools.cache
def _sm_count(device_index: int) -> int:
    return torch.cuda.get_device_properties(device_index).multi_processor_count


def _descriptor(tensor: torch.Tensor) -> TensorDescriptor:
    """A descriptor of the whole 2-D ``tensor``; its box is set per configuration (_set_boxes)."""
    return TensorDescriptor.from_tensor(tensor, [1, 1])


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
    descriptors = {"a_desc": _descriptor(a_used), "b_desc": _descriptor(b_used), "c_desc": _descriptor(c_used)}
    sms = _sm_count(a.device.index) if a.is_cuda else INTERPRETER_SMS

    def grid(meta):
        return (min(sms, triton.cdiv(m, meta["BLOCK_M"]) * triton.cdiv(n_used, meta["BLOCK_N"])),)

    sizes = (m, n_used, a_used.shape[1])
    if config is None and not INTERPRETED:
        TUNER[grid](*descriptors.values(), *sizes)
    else:
        config = config or CONFIGS[0]
        _set_boxes({**descriptors, **config.kwargs})
        persistent_tma_kernel[grid(config.kwargs)](*descriptors.values(), *sizes, num_warps=config.num_warps,
                                                   num_stages=config.num_stages, **config.kwargs)
    if not direct:
        out.copy_(c_used[:, :n])
    return out


def run(a, b, out=None):
    return launch(a, b, out)
