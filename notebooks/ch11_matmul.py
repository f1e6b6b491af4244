# %% [markdown]
# # 第 11 章 GEMM-Like：矩阵乘
#
# 动手版，配合章节页 `docs/course/part2/ch11-matmul.md`。`C = A @ B`：本课程第一个计算受限的算子。这一本先从实测的
# 上限算出 matmul 什么时候受算力限制、decode 的 GEMV 为什么受带宽限制，再看每一级 rung 编译出的指令（不用 GPU），
# 在解释器里检查 Triton 的两级，在 GPU 上成对计时，最后让检查器抓住一个少算一块 K 的 kernel。

# %%
from nbsetup import *
import json
from hello_gpu.ops import load_op

op = load_op("matmul")
ceilings = json.loads((REPO / "records" / "nvidia-h200" / "ceilings.json").read_text())
print("matmul 的 rung：", ", ".join(r.id for r in op.rungs))

# %% [markdown]
# ## 解释：算术强度随边长增长，decode 的却只有 M 左右
#
# 强度 = 2MNK / ((MK + KN + MN) × 每元素字节)（`spec.work_for`），ridge = 这个 dtype 的 matmul 峰值 / copy 带宽，
# 都来自 `records/nvidia-h200/ceilings.json`。第二张表是每一级的 block tile 每读一个字节做几次运算。

# %%
bounds = example("ch11_gemm_bounds")
print(bounds.render(ceilings))

# %% [markdown]
# 方阵 n³ 的强度是 2n / (3 × 每元素字节)。自己换几个 n 和 dtype 看它什么时候越过 ridge：

# %%
copy = ceilings["ceilings"]["copy_bytes_per_s"]
for dtype in ("float32", "bfloat16"):
    ridge = ceilings["ceilings"]["matmul_flops_per_s"][dtype] / copy
    for n in (64, 256, 1024, 4096):
        work = op.spec.work((n, n, n), dtype)
        print(f"{dtype:>8} n={n:>5}: {work.flops / work.bytes:8.1f} FLOP/B（ridge {ridge:.1f}）")

# %% [markdown]
# ## 图
#
# ![matmul 的三级分块](../docs/course/figures/part2-gemm-tiles.svg)
#
# ![tile 的执行顺序](../docs/course/figures/part2-gemm-order.svg)
#
# ![Hopper 的生产者 / 消费者流水线](../docs/course/figures/part2-hopper-pipeline.svg)
#
# ## 短代码：shared memory 分块与寄存器分块
#
# `v03` 每个元素从 global 读一次、在 shared memory 里用 32 次；`v05` 每个线程在寄存器里算 8 × 8：

# %%
_ = source(OPS / "matmul" / "v05_register_blocking_2d.hip")

# %% [markdown]
# 不用 GPU 也能看它们编译出来的样子：寄存器数（ptxas）与 SASS 里的指令。SIMT rung 是 `FFMA`，`v09` 起是 tensor core 的
# `HMMA`，`v12` 起是 Hopper 的 `HGMMA`、TMA（`UTMALDG`）与 mbarrier（`SYNCS`）：

# %%
example("ch11_tensor_core_sass").main()

# %% [markdown]
# ## 短代码：Triton 的两级
#
# `t01` 一个 program 一个 64 × 64 的 tile，按行主序；`t02` 按 8 个 tile 行一组排 program（K 循环是 `t01` 的）。
# 对 float64 参考的检查（CPU 上在解释器里跑小形状；bfloat16 的算术在解释器里不对，CPU 上查 float32 与 float16）：

# %%
dtypes = ("float32", "bfloat16") if GPU else ("float32", "float16")
for name in ("t01_block_tile", "t02_grouped_order"):
    for dtype in dtypes:
        print(name, dtype)
        assert against_float64(rung("matmul", name), "matmul", ((1, 1025, 16), (39, 41, 37), (3, 5, 517)), dtype)

# %% [markdown]
# ## 观察：在 GPU 上
#
# bfloat16 4096³：`t02`、`t04`、`v13`、`v14` 对 `torch.mm`（cuBLAS）的成对计时；decode：`linear` 的两级对 `F.linear`，
# 以及它们读权重的带宽占实测 copy 带宽的比例。

# %%
if gpu_only("matmul 4096³ bfloat16 对 torch.mm、decode GEMV 对 F.linear 的成对计时"):
    from hello_gpu.bench import compare, measure
    a, b = op.spec.make_inputs((4096, 4096, 4096), "bfloat16", seed=0, device="cuda")
    baseline = rung("matmul", "v00_torch")
    for name in ("t02_grouped_order", "t04_autotuned", "v13_warp_specialized", "v14_persistent_grouped"):
        fn = rung("matmul", name)
        print(f"{name} vs torch.mm:", compare(lambda: baseline(a, b), lambda: fn(a, b), max_seconds=1))
    linear = load_op("linear")
    x, weight = linear.spec.make_inputs((1, 14336, 4096), "bfloat16", seed=0, device="cuda")
    reference = rung("linear", "v00_torch")
    for name in ("v01_warp_per_row", "t01_row_block"):
        fn = rung("linear", name)
        seconds = measure(lambda: fn(x, weight), max_seconds=1).summary.median
        print(f"{name}: {weight.numel() * 2 / seconds / copy:.2f} x copy 带宽；vs F.linear:",
              compare(lambda: reference(x, weight), lambda: fn(x, weight), max_seconds=1))

# %% [markdown]
# ## 练习
#
# 练习 2：**让检查器抓住少算的一块 K**。把 `t01_block_tile.py` 的 K 循环改成 `range(0, K - BLOCK_K, BLOCK_K)`，
# 交给检查器：它应当失败（`1x1x1` 只有一块 K，一块都不算）。

# %%
t01 = (OPS / "matmul" / "t01_block_tile.py").read_text()
short = t01.replace("range(0, K, BLOCK_K)", "range(0, K - BLOCK_K, BLOCK_K)")
assert short != t01
report = hg.exercise("matmul", short, route="triton", dtype="float32", max_seconds=0.5)
report

# %% [markdown]
# 然后只做一处真正的改动：这里把 tile 放大到 128 × 128（先在文件头写下预测），再检查一次。练习 3–5 见章节页。

# %%
mine = t01.replace("BLOCK_M, BLOCK_N, BLOCK_K = 64, 64, 32", "BLOCK_M, BLOCK_N, BLOCK_K = 128, 128, 32")
assert mine != t01
report = hg.exercise("matmul", mine, route="triton", dtype="float32", max_seconds=0.5)
report

# %%
skipped()
