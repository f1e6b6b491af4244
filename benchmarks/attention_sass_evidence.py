"""CPU evidence for the attention rungs whose predictions missed on the H200 (records attention.bfloat16, run of 89ae604).

No GPU: the C++ rungs are compiled as the ladder builds them (NVRTC, bfloat16, each rung's declared arch) and
t02's Triton kernel by triton.compile for sm_90 (this machine's Triton, not necessarily the H200's). For each:
registers, shared memory and resident warps an SM, and the SASS that docs/ladders.md (attention, "预测没中的地方")
quotes: how kernel (1) of v01 loads K, the main loop of v02-v05 (instructions, FFMA, shuffles, serial global round
trips, as benchmarks/matmul_sass_evidence.py reads them), and whether t02's tl.dot became wgmma (HGMMA).

    python benchmarks/attention_sass_evidence.py
"""

from __future__ import annotations

import re
from collections import Counter

from matmul_sass_evidence import instructions, main_loop, serial_round_trips, triton_sass

from hello_gpu.ops import load_op
from hello_gpu.ops.rung import load_module

# (rung, threads a block): the block each launcher uses at D = 128 (launch.py, v05_flash_decoding.py)
HIP = (("v01_materialised_three_kernels", 256), ("v02_fused_block_steps", 128), ("v03_query_rows_per_warp", 128),
       ("v04_causal_block_skipping", 128), ("v05_flash_decoding", 128))
COUNTED = ("FFMA", "LDS", "STS", "SHFL", "MUFU", "BAR", "WARPSYNC", "LDG")


def function_sass(sass: str, name: str) -> str:
    """The part of a module's SASS that belongs to the one kernel whose mangled name contains ``name``."""
    parts = re.split(r"(?=\n\s*Function : )", sass)
    return next(part for part in parts if re.search(r"Function : \S*" + re.escape(name), part))


def loop_line(label: str, sass: str) -> str:
    body = main_loop(instructions(sass))
    kinds = Counter(y["op"].split(".")[0] for y in body)
    counted = ", ".join(f"{kind} {kinds[kind]}" for kind in COUNTED if kinds[kind])
    return (f"  {label}: main loop {len(body)} instructions ({counted}); FFMA share {kinds['FFMA'] / len(body):.2f}; "
            f"serial global round trips {serial_round_trips(body)}")


def hip_rungs() -> None:
    op = load_op("attention")
    for rung_id, threads in HIP:
        kernel = op.rung(rung_id).kernel(dtype="bfloat16")
        sass = kernel.asm("sass")
        print(f"{rung_id}: {kernel.resources.registers_per_thread} registers, "
              f"{kernel.resources.static_shared_bytes} B shared, {threads} threads: {kernel.occupancy(threads)}")
        if rung_id.startswith("v01"):
            scores = function_sass(sass, "attention_scores")
            loads = Counter(y["op"] for y in instructions(scores) if y["op"].startswith("LDG"))
            print(f"  kernel (1) attention_scores, global loads by width: {dict(loads)}")
            print(loop_line("kernel (1)", scores))
        else:
            print(loop_line("entry kernel", function_sass(sass, kernel.signature.function)))


def triton_t02() -> None:
    t02 = load_module(load_op("attention").rung("t02_fused_online_softmax").path, "attention_t02_for_evidence")
    constants = {"CAUSAL": False, "HEAD_DIM": 128, "BLOCK_M": t02.BLOCK_M, "BLOCK_N": t02.BLOCK_N, "PRECISION": "ieee"}
    sass, _, resources = triton_sass(t02.attention_kernel, constants, "bf16", t02.WARPS, 3, types={"scale_log2": "fp32"})
    kinds = Counter(y["op"].split(".")[0] for y in instructions(sass))
    print(f"t02_fused_online_softmax (Triton, sm_90, {t02.BLOCK_M}x{t02.BLOCK_N}, {t02.WARPS} warps, 3 stages): "
          f"{resources}; whole kernel HGMMA (wgmma) {kinds['HGMMA']}, HMMA (mma.sync) {kinds['HMMA']}, "
          f"LDGSTS (cp.async) {kinds['LDGSTS']}, UTMALDG (TMA) {kinds['UTMALDG']}")


if __name__ == "__main__":
    hip_rungs()
    triton_t02()
