# %% [markdown]
# # 第 10 章 Normalization：行级 Softmax
#
# 动手版，配合章节页 `docs/course/part2/ch10-softmax.md`。一行里两次归约（最大值、指数和），再逐元素写回。这一本
# 先在 CPU 上看数值稳定性和 online softmax 的合并，再检查 Triton 的两级，在 GPU 上比较不同的执行配置，
# 最后写一级一个 warp 一行的 rung。

# %%
from nbsetup import *
from hello_gpu.ops import load_op

op = load_op("softmax")

# %% [markdown]
# ## 解释：为什么减去最大值
#
# float32 的 `exp(x)` 在 x 大于约 88.7 时溢出成 inf，inf / inf 是 NaN。减去行最大值后每个指数的参数都不大于 0。（练习 1）

# %%
x = torch.tensor([100.0, 101.0, 102.0])
print("直接算     :", torch.exp(x) / torch.exp(x).sum())
shifted = torch.exp(x - x.max())
print("减去最大值 :", shifted / shifted.sum())
print("torch      :", torch.softmax(x, dim=0))
print("float32 exp 溢出的起点约为", torch.log(torch.tensor(torch.finfo(torch.float32).max)).item())

# %% [markdown]
# ## 解释：online softmax 的合并
#
# 一对 (m, s) 代表「最大值，以及以它为基准的指数和」。两对可以合并：`m = max(m1, m2)`，
# `s = s1 * exp(m1 - m) + s2 * exp(m2 - m)`。把一行分成两半各算一对，合并后与整行直接算的相同（练习 2）：

# %%
def pair(values):
    m = values.max()
    return m, torch.exp(values - m).sum()


def merge(a, b):
    m = torch.maximum(a[0], b[0])
    return m, a[1] * torch.exp(a[0] - m) + b[1] * torch.exp(b[0] - m)


row = torch.randn(1000, dtype=torch.float64) * 10
print("合并 :", [v.item() for v in merge(pair(row[:400]), pair(row[400:]))])
print("整行 :", [v.item() for v in pair(row)])

# %% [markdown]
# ## 图
#
# ![softmax 阶梯，float32，H200](../records/nvidia-h200/softmax.float32.svg)
#
# ## 短代码：Triton 的第一级与 online 分块
#
# `t01`：一个 program 一行，整行一次 `tl.load`；`t02`：按 4096 列一块走一行，维护 running max 与 running sum。
# 两者对 float64 参考的检查（spec 的边界形状里挑几个小的）：

# %%
_ = source(OPS / "softmax" / "t02_online_tiles.py")

# %%
for name in ("t01_row_per_program", "t02_online_tiles"):
    print(name)
    assert against_float64(rung("softmax", name), "softmax", ((5, 1), (31, 1023), (7, 1025), (2, 4097)))

# %% [markdown]
# ## 观察：同一个 kernel，不同的执行配置
#
# `t08` 把列数编进 kernel（`tl.constexpr`），`t10` 只改 launch：一个 program 一行、一个 warp。短行（4096x1024）上
# 考的是延迟，长行（8192x8192）上考的是带宽。成对计时：

# %%
if gpu_only("t01 / t08 / t10 对 torch.softmax 的成对计时（4096x1024 与 8192x8192，float32）"):
    from hello_gpu.bench import compare
    baseline = rung("softmax", "v00_torch")
    for shape in ((4096, 1024), (8192, 8192)):
        (x,) = op.spec.make_inputs(shape, "float32", seed=0, device="cuda")
        for name in ("t01_row_per_program", "t08_static_width", "t10_one_warp_per_row"):
            fn = rung("softmax", name)
            print(f"{shape} {name} vs torch.softmax:", compare(lambda: baseline(x), lambda: fn(x), max_seconds=1))

# %% [markdown]
# ## 练习
#
# 练习 3：**一个 warp 一行**。以 `t01_row_per_program.py` 为父级，把 `num_warps` 固定为 1，先在文件头写下你对
# 4096x1024 与 8192x8192 的预测，再交给检查器（含 `(5, 1)`、`(7, 1025)`、`(2, 4097)` 这些边界形状）。

# %%
mine = (OPS / "softmax" / "t01_row_per_program.py").read_text()
mine = mine.replace("num_warps = 8 if block >= 2048 else 4", "num_warps = 1")
report = hg.exercise("softmax", mine, route="triton", max_seconds=0.5)
report

# %% [markdown]
# 练习 4、5 在终端里：`hello-gpu ladder softmax --route triton --check-only`；有 GPU 时
# `hello-gpu profile softmax v09_half_packs_bf16 --dtype bfloat16` 与 `v10_exp2` 对照。

# %%
skipped()
