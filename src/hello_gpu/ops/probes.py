"""Inputs that a dropped, repeated or misplaced block of work cannot pass, and a reduce_sum bound that
scales with the rounding a correct kernel really makes.

Why these live here and not in the operators' ``spec.py``: a spec is one of the files every record of
its operator hashes (:mod:`.sources`), so an edit there makes every committed record stale and costs a
re-measurement on the GPU. The checker (:mod:`.checking`) asks this module, by the spec's ``NAME``, for

- :func:`probe_inputs`: one extra case per (dtype, shape, seed), the "probe" distribution, whose
  answer a kernel that skips, repeats or misplaces one block of its work cannot match:

  * ``reduce_sum``: positive small integers (1, 2, 4, 8), zeros at random places and larger powers of
    two at the head (2^12) and the tail (2^13). Every partial sum, in any order, is an integer below
    2^24, so float32 holds it exactly: the answer is exact and the tolerance is zero. A dropped block
    changes the sum by at least 1.
  * ``vector_add``: powers of two 1..8 in both inputs (64 and 128 at the head and the tail): every sum
    is an integer up to 136, exact in float32 and bfloat16 (8 significant bits hold integers to 256);
    tolerance zero.
  * ``softmax``: rows at -30 (e^-30 ~ 1e-13: nothing) except a few "live" entries of 0, -0.5 or -1 at
    the head, the tail and ~6 random columns. Each live entry holds 1/8 or more of the row's mass, so
    a block whose live entry is dropped or read twice moves every output of the row by >= ~5%, far
    outside even bfloat16's 2^-7; with random normal rows a 256-column block of a 70000-column row is
    0.4% of the mass, which bfloat16's tolerance cannot see.
  * ``rms_norm``: rows of +-2^-5 with spikes of +-4 at the head, the tail and ~6 random columns: the
    spikes hold most of the sum of squares, so dropping one moves the row's scale by ~5%.
  * ``matmul`` and ``linear``: A and B of +-1 and +-2. Every product is +-1, 2 or 4 and every partial
    sum an integer of magnitude <= 4K (16380 at K = 4095), exact in float32 in any order: the float32
    answer is exact (tolerance zero), and bfloat16 / float16 outputs are one rounding of it (rtol
    2u). One dropped or repeated K tile moves an element by a nonzero integer almost everywhere.

  * ``attention``: every query is 128 e_0 (plus noise in the other columns), every key +-1 or -3
    times e_0 (zeros elsewhere): a "live" key (k_0 = 1) scores 128 scale (16 at D = 64), a dead one
    (k_0 = -3) 64 scale lower, a weight of e^-45 ~ 3e-20. One live key sits in each aligned block of
    16 keys, plus the first and the last key; live values are +-1 or +-2, dead ones +-1/8. So each
    output row is the plain mean of the values of the live keys it may see, and a key tile (16 keys
    or more) left out, or read twice, removes or doubles at least one of ~S_kv / 16 live keys:
    at S_kv = 1000 a 64-key tile moves outputs by ~0.1, 10x bfloat16's tolerance there; with
    normal inputs that tile moves them by ~0.01, about the bfloat16 tolerance.

- :func:`tolerance_override`: reduce_sum's (rtol, atol) for random inputs. The spec's
  ``2 * sqrt(n) * eps * sum|x|`` is ~50x the sum itself at 2^28 normal inputs (issue 19), because
  sum|x| ~ 0.8 n while the sum is ~sqrt(n). A correct kernel's rounding error is driven instead by the
  partial sums it forms: a float32 addition giving s errs by at most u|s| (u = 2^-24). Unbiased, those
  errors add up to a standard deviation of u * sqrt(sum_k s_k^2 / 3); all-positive inputs also round
  with a bias, seen at up to 1/40 of u * sum_k |s_k| in a sequential float32 sum in random order
  (what atomics do). The bound is u * (8 sd + sum_k |s_k| / 16 + |sum|), with s_k the index-order
  running sums (a tree's or a per-thread run's partial sums are no larger for iid inputs), and never
  more than the spec's own. Measured against sequential float32 sums in random order (4 seeds each),
  the worst error used 2% of it on normal inputs and 33% on near_overflow ones up to 2^24, while
  the bound is 85-100x tighter than the spec's on normal inputs: ~2.6 at 1823x781 where the spec
  allowed ~320, so a dropped 256-element block (its sum: sd 16) fails 7 times in 8. All-positive
  (near_overflow) inputs keep the spec's bound, which is the tighter there; the probe catches drops.

Where a probe is drawn: on the device it is checked on, with that device's generator. Built on the CPU
and copied over, the attention probe at 4x32x32x4096x4096x128 took 6.5 s on this project's 2-core
CPU box and at 16x32x8x1x32768x128 46 s (a Python loop over 2048 key blocks, float32 temporaries of
2 GiB), paid again for every rung of a ladder. Determinism across devices does not matter here: the
spec's own inputs (``make_inputs``) are drawn on the device already, so a failing seed is replayed on
the same kind of device in every case; the CPU tier draws on the CPU, as before.
"""

from __future__ import annotations

import math

PROBE = "probe"                       # the distribution name of the probe cases in a report
FLOAT32_UNIT_ROUNDOFF = 2.0**-24      # u: half an ulp of 1.0 in float32
SIGMAS = 8                            # reduce_sum: the bound in standard deviations of the rounding model
BIAS_DIVISOR = 16                     # reduce_sum: the allowance for biased rounding, sum_k |s_k| / 16
EXACT_INTEGER_LIMIT = 2**24           # float32 holds every integer below this exactly
_LIVE_ENTRIES = 6                     # softmax / rms_norm: random live columns a row (plus head and tail)


def _torch():
    import torch
    return torch


def _dims(shape) -> tuple[int, ...]:
    return tuple(shape) if isinstance(shape, (tuple, list)) else (int(shape),)


def _powers_of_two(size, top: int, generator, device):
    """float32 tensor of ``size`` holding 2^0 .. 2^(top - 1) at random (no int64 temporary: 2 GiB at 2^28)."""
    torch = _torch()
    return 2.0 ** torch.randint(0, top, size, generator=generator, device=device, dtype=torch.float32)


def _random_signs(size, generator, device):
    """float32 tensor of ``size`` holding -1 or +1 at random."""
    torch = _torch()
    return torch.where(torch.rand(size, generator=generator, device=device) < 0.5, -1.0, 1.0)


def _reduce_sum_probe(shape, dtype: str, generator, device):
    torch = _torch()
    dims = _dims(shape)
    n = math.prod(dims)
    head, tail = 2.0**12, 2.0**13
    # Units to spend below 2^24 on the body: dense (every element 1..8, with zeros) while n * 8 fits,
    # else sparse ones and twos, so the total stays exact whatever the size (2^28 elements: ~1 in 48).
    budget = EXACT_INTEGER_LIMIT // 2 - int(head + tail)
    if n * 8 > budget:
        values = _powers_of_two((n,), 2, generator, device)                                   # 1, 2
        values.masked_fill_(torch.rand(n, generator=generator, device=device) >= min(budget / (2 * n), 15 / 16), 0)
    else:
        values = _powers_of_two((n,), 4, generator, device)                                   # 1, 2, 4, 8
        values.masked_fill_(torch.rand(n, generator=generator, device=device) < 1 / 16, 0)
    values[0] = head
    if n > 1:
        values[-1] = tail
    assert float(values.sum(dtype=torch.float64)) < EXACT_INTEGER_LIMIT, "probe total must stay exact in float32"
    return (values.reshape(dims),), (0.0, 0.0)


def _vector_add_probe(shape, dtype: str, generator, device):
    torch = _torch()
    dims = _dims(shape)
    n = math.prod(dims)
    inputs = []
    for edge in (64.0, 128.0):
        values = _powers_of_two((n,), 4, generator, device)
        values[0] = edge
        values[-1] = 2 * edge
        inputs.append(values.reshape(dims).to(getattr(torch, dtype)))
    return tuple(inputs), (0.0, 0.0)


def _live_columns(rows: int, columns: int, generator, device):
    """A (rows, columns) mask: column 0, the last column and ~_LIVE_ENTRIES random columns of each row."""
    torch = _torch()
    live = torch.zeros((rows, columns), dtype=torch.bool, device=device)
    live[:, 0] = True
    live[:, -1] = True
    picks = torch.randint(0, columns, (rows, _LIVE_ENTRIES), generator=generator, device=device)
    live.scatter_(1, picks, True)
    return live


def _softmax_probe(spec, shape, dtype: str, generator, device):
    torch = _torch()
    rows, columns = _dims(shape) if len(_dims(shape)) == 2 else (1, _dims(shape)[0])
    live = _live_columns(rows, columns, generator, device)
    levels = -0.5 * torch.randint(0, 3, (rows, columns), generator=generator, device=device, dtype=torch.float32)
    values = torch.where(live, levels, -30.0)                                  # live: 0, -0.5 or -1
    return (values.reshape(_dims(shape)).to(getattr(torch, dtype)),), spec.TOLERANCE[dtype]


def _rms_norm_probe(spec, shape, dtype: str, generator, device):
    torch = _torch()
    rows, hidden = _dims(shape)
    live = _live_columns(rows, hidden, generator, device)
    values = _random_signs((rows, hidden), generator, device) * torch.where(live, 4.0, 2.0**-5)
    weight = _powers_of_two((hidden,), 3, generator, device) / 2                                 # 0.5, 1, 2
    torch_dtype = getattr(torch, dtype)
    return (values.to(torch_dtype), weight.to(torch_dtype)), \
        spec.TOLERANCE[dtype]


def _live_keys(d, generator, device):
    """(B, H_kv, S_kv) booleans: one key at a random place in each aligned block of 16 (the last block may
    be shorter), plus the first and the last key; drawn for all blocks at once (a loop over the 2048 blocks
    of S_kv = 32768 took seconds)."""
    torch = _torch()
    blocks = -(-d.kv_len // 16)
    starts = torch.arange(blocks, device=device) * 16
    widths = (d.kv_len - starts).clamp(max=16)
    uniform = torch.rand((d.batch, d.kv_heads, blocks), generator=generator, device=device)
    offsets = torch.minimum((uniform * widths).long(), widths - 1)          # uniform over the block's keys
    live = torch.zeros((d.batch, d.kv_heads, d.kv_len), dtype=torch.bool, device=device)
    live.scatter_(-1, starts + offsets, True)
    live[..., 0] = True
    live[..., -1] = True
    return live


def _attention_probe(spec, shape, dtype: str, generator, device):
    torch = _torch()
    d = spec.dims(shape)
    torch_dtype = getattr(torch, dtype)
    live = _live_keys(d, generator, device)   # first: q's noise then differs from the "normal" case's q of the seed
    q = torch.randn((d.batch, d.heads, d.q_len, d.head_dim), generator=generator, device=device)
    q[..., 0] = 128.0                         # the other columns meet zeros in k: noise that changes no score
    k = torch.zeros((d.batch, d.kv_heads, d.kv_len, d.head_dim), dtype=torch_dtype, device=device)
    k[..., 0] = torch.where(live, 1.0, -3.0)
    v = torch.empty_like(k)
    for b in range(d.batch):                  # a batch entry at a time: float32 temporaries of 2 GiB otherwise
        size = (d.kv_heads, d.kv_len, d.head_dim)
        magnitude = torch.where(live[b, ..., None], _powers_of_two(size, 2, generator, device), 0.125)
        v[b] = _random_signs(size, generator, device) * magnitude       # live: +-1 or +-2; dead: +-1/8
    inputs = (q.to(torch_dtype), k, v, d.causal)
    return inputs, spec.tolerance(inputs, dtype)


def _matmul_probe(spec, shape, dtype: str, generator, device):
    torch = _torch()
    m, n, k = (int(d) for d in shape)

    def operand(rows, columns):
        return _random_signs((rows, columns), generator, device) * _powers_of_two((rows, columns), 2, generator, device)

    a = operand(m, k)
    # matmul takes B as (K, N); linear takes the weight as (N, K): the same values either way.
    b = operand(n, k) if spec.NAME == "linear" else operand(n, k).t().contiguous()
    torch_dtype = getattr(torch, dtype)
    rtol = 0.0 if dtype == "float32" else spec.TOLERANCE[dtype][0]
    return (a.to(torch_dtype), b.to(torch_dtype)), (rtol, 0.0)


def probe_inputs(spec, shape, dtype: str, *, seed: int, device: str):
    """``(inputs, (rtol, atol))`` of the block probe for ``spec`` at ``shape``, or None where this module
    has none for the operator (see the module docstring for what each probe holds)."""
    torch = _torch()
    name = getattr(spec, "NAME", None)
    generator = torch.Generator(device=device).manual_seed(seed)     # drawn where it is used: see the module's notes
    if name == "reduce_sum":
        return _reduce_sum_probe(shape, dtype, generator, device)
    if name == "vector_add":
        return _vector_add_probe(shape, dtype, generator, device)
    if name == "softmax":
        return _softmax_probe(spec, shape, dtype, generator, device)
    if name == "rms_norm":
        return _rms_norm_probe(spec, shape, dtype, generator, device)
    if name == "attention":
        return _attention_probe(spec, shape, dtype, generator, device)
    if name in ("matmul", "linear"):
        return _matmul_probe(spec, shape, dtype, generator, device)
    return None


def reduce_sum_tolerance(inputs, dtype: str, floor: tuple[float, float]) -> tuple[float, float]:
    """(rtol, atol) for a float32 sum of ``inputs``: SIGMAS standard deviations of the rounding of its
    running sums, plus the final rounding (see the module docstring); at least the spec's ``floor``."""
    torch = _torch()
    (x,) = inputs
    running = torch.cumsum(x.to(torch.float64).flatten(), 0)
    if not running.numel():
        return floor
    spread = math.sqrt(float(running.square().sum()) / 3)
    bias = float(running.abs().sum()) / BIAS_DIVISOR
    rtol, atol = floor
    return rtol, max(atol, FLOAT32_UNIT_ROUNDOFF * (SIGMAS * spread + bias + abs(float(running[-1]))))


def tolerance_override(spec):
    """A function ``(inputs, dtype) -> (rtol, atol)`` replacing the spec's own, or None to keep it
    (reduce_sum: :func:`reduce_sum_tolerance`, never looser than the spec's ``tolerance``)."""
    if getattr(spec, "NAME", None) != "reduce_sum":
        return None

    def tighter(inputs, dtype):
        ours = reduce_sum_tolerance(inputs, dtype, spec.TOLERANCE[dtype])
        theirs = spec.tolerance(inputs, dtype) if hasattr(spec, "tolerance") else spec.TOLERANCE[dtype]
        return min(ours, theirs, key=lambda tolerance: tolerance[1])
    return tighter
