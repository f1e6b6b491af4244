"""第 11 章：不用 GPU，看每一级 matmul rung 编译出来的指令——乘加落在哪种单元上，tile 怎么搬进 shared memory。

    python examples/course/ch11_tensor_core_sass.py

每个 C++ rung 按它头部声明的目标编译（SIMT rung 是 sm_90，mma.sync rung 是 sm_80 的 PTX 在 sm_90 上，
Hopper rung 是 sm_90a），数 SASS 里几类指令各出现几次（静态的指令条数，不是执行次数），再列出 ptxas 报告的
每线程寄存器数。要看的几类：

- FFMA：float32 的乘加（CUDA core）；HMMA：mma.sync（tensor core，一个 warp 一条）；
  HGMMA：wgmma（Hopper，一个 warpgroup 一条，操作数直接从 shared memory 读）；
- LDS / LDSM：从 shared memory 读（LDSM 是 ldmatrix）；LDGSTS：cp.async，global 直接到 shared；
- UTMALDG：TMA 的整块拷贝；SYNCS：mbarrier 的到达与等待。
"""

import re

from hello_gpu.ops import load_op

RUNGS = ("v05_register_blocking_2d", "v08_tuned_tiles", "v09_mma_sync", "v10_cp_async_pipeline", "v12_wgmma_tma",
         "v13_warp_specialized")
KINDS = {"FFMA": r"FFMA", "HMMA": r"HMMA\.", "HGMMA": r"HGMMA\.", "LDS": r"LDS(?:\.|\s)", "LDSM": r"LDSM\.",
         "LDGSTS": r"LDGSTS", "UTMALDG": r"UTMALDG", "SYNCS": r"SYNCS\."}


def instruction_counts(sass: str) -> dict[str, int]:
    """How many SASS lines carry each kind of instruction (a static count over the kernel's code). Lines
    predicated on ``@!PT`` (never true) are left out: ptxas pads with them, e.g. ``@!PT LDS RZ, [RZ]``."""
    live = "\n".join(line for line in sass.splitlines() if "@!PT" not in line)
    return {kind: len(re.findall(rf"\b{pattern}", live)) for kind, pattern in KINDS.items()}


def main() -> None:
    op = load_op("matmul")
    print(f"{'rung':<26} {'registers':>9}  " + "  ".join(f"{kind:>7}" for kind in KINDS))
    for rung_id in RUNGS:
        rung = op.rung(rung_id)
        dtype = "float32" if rung.path.suffix == ".hip" else "bfloat16"
        kernel = rung.kernel(dtype=dtype)        # compiled for the arch the header declares; no GPU needed
        counts = instruction_counts(kernel.asm("sass"))
        print(f"{rung_id:<26} {kernel.resources.registers_per_thread:>9}  "
              + "  ".join(f"{counts[kind]:>7}" for kind in KINDS))


if __name__ == "__main__":
    main()
