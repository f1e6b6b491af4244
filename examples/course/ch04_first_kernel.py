"""Chapter 4: a first kernel. Compile the README's vector_add, check it against a float64 reference on
sizes no block size divides, then time it against torch.add (paired, interleaved rounds).

    python examples/course/ch04_first_kernel.py             # n = 2^24 floats
    python examples/course/ch04_first_kernel.py --n 268435456

Without a GPU it compiles the kernel for sm_90 through NVRTC, prints what the compiler reports, runs the
checker on CPU functions (one right, one with the classic grid bug) and says what it skipped.
"""

from __future__ import annotations

import argparse

import torch

import hello_gpu as hg
from hello_gpu.bench import Work, compare, measure

SOURCE = r"""
__global__ void vector_add(const float* a, const float* b, float* out, int n) {
  int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) out[i] = a[i] + b[i];
}
"""

# No block size divides these: a missing bounds check or a grid rounded down shows here, not at 2^24.
ODD_SIZES = (1, 31, 255, 257, 4097, 1_000_003)
# float32 rounds the exact sum once: at most half an ulp, 2^-24 relative. Allowed: twice that, plus the
# smallest normal float as an absolute floor (results that flush to zero still pass).
RTOL, ATOL = 2.0**-23, 1.2e-38


def check(add, device: str, sizes=ODD_SIZES, seed: int = 0) -> bool:
    """Call ``add(a, b, out)`` on each size; compare with the exact sum in float64. ``out`` starts as NaN,
    so an element the kernel never writes fails the check instead of passing as a leftover value."""
    generator = torch.Generator().manual_seed(seed)
    for n in sizes:
        a = torch.randn(n, generator=generator).to(device)
        b = torch.randn(n, generator=generator).to(device)
        out = torch.full_like(a, float("nan"))
        add(a, b, out)
        exact = a.double() + b.double()
        ratio = (out.double() - exact).abs() / (RTOL * exact.abs() + ATOL)
        worst = torch.nan_to_num(ratio, nan=float("inf")).max().item()
        verdict = "pass" if worst <= 1 else "FAIL"
        print(f"  n = {n:>9,}: worst error / allowed = {worst:.3g}  {verdict}")
        if worst > 1:
            return False
    return True


def grid_rounded_down(a, b, out, block: int = 256):
    """What a kernel launched with grid = n // block (not ceil) computes: the last partial block is missing."""
    covered = a.numel() // block * block
    out[:covered] = a[:covered] + b[:covered]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=2**24, help="elements to time (default 2^24: 201 MB moved)")
    args = parser.parse_args()

    # 1. Compile. With a GPU: for its arch. Without: for sm_90 through NVRTC, as a check.
    vector_add = hg.hip(SOURCE, entry="vector_add")
    print(vector_add)
    print("resources:", vector_add.resources)
    print("occupancy at 256 threads per block:", vector_add.occupancy(256))

    if not torch.cuda.is_available():
        print("\nno GPU: the checker on CPU functions instead of the kernel")
        print("torch.add:")
        right = check(lambda a, b, out: torch.add(a, b, out=out), "cpu")
        print("grid = n // 256 (rounded down):")
        wrong = check(grid_rounded_down, "cpu")
        print("\nskipped (needs a GPU): running vector_add, its check, measure() and compare() against torch.add")
        return 0 if right and not wrong else 1

    # 2. Check, before any timing: a fast wrong kernel is worth nothing.
    print("\ncheck against float64:")
    if not check(lambda a, b, out: vector_add(a, b, out=out, block=256), "cuda"):
        return 1

    # 3. Time: each alone (cold L2), then the two paired in ABBA rounds.
    n = args.n
    a = torch.randn(n, device="cuda")
    b = torch.randn(n, device="cuda")
    ours, theirs = torch.empty_like(a), torch.empty_like(a)
    launch = vector_add.prepare(a, b, out=ours, block=256)   # checks and packs once; launch() only launches
    reference = lambda: torch.add(a, b, out=theirs)          # noqa: E731
    work = Work(bytes=3 * 4 * n, flops=n, dtype="float32")   # read a and b, write out: 12 bytes an element
    print(f"\nn = {n:,} float32")
    print("torch.add  :", measure(reference, work=work))
    print("vector_add :", measure(launch, work=work))
    print("vector_add vs torch.add:", compare(reference, launch))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
