# %% [markdown]
# # 第 13 章 综合实战：RMSNorm
#
# 动手版，配合章节页 `docs/course/part2/ch13-rmsnorm.md`。`y = x * rsqrt(mean(x^2) + eps) * weight`：一次行内归约、
# 一次广播、一次逐元素乘。这一本在 CPU 上看精度（float16 的平方会溢出）和寄存器、驻留的算术，检查 Triton 的两级，
# 在 GPU 上比较，最后把行宽编进你自己的 kernel。

# %%
from nbsetup import *
from hello_gpu.ops import load_op

op = load_op("rms_norm")
print("eps =", op.spec.EPS)

# %% [markdown]
# ## 解释：平方和一律用 float32 累加
#
# float16 的最大值是 65504，|x| 超过 256 时平方就溢出。检查器的 `near_overflow` 输入专门检验这一点：

# %%
(x, weight) = op.spec.make_inputs((4, 1024), "float16", seed=0, distribution="near_overflow")
print("max |x|               :", x.abs().max().item())
print("float16 里的平方和     :", (x * x).sum(dim=1))
print("float32 累加的平方和   :", (x.float() * x.float()).sum(dim=1))
exact = op.spec.reference(x, weight)
print("参考（float64）有限吗？ :", torch.isfinite(exact).all().item())

# %% [markdown]
# ## 解释：字节与驻留
#
# 每个元素读一次、写一次，weight 读一次（`spec.work`）。练习 3 的算术：每个 SM 65536 个寄存器、最多 2048 个线程，
# 256 线程的 block 能驻留几个？

# %%
work = op.spec.work((16384, 8192), "bfloat16")
print(f"16384x8192 bfloat16：{work.bytes / 1e6:.0f} MB，按 4.8 TB/s 至少 {work.bytes / 4.8e12 * 1e6:.0f} us")
for name, registers in (("v02", 28), ("v03", 48)):
    by_registers = 65536 // (registers * 256)
    print(f"{name}: {registers} 个寄存器 -> 每 SM {min(by_registers, 2048 // 256)} 个 block")

# %% [markdown]
# ## 图
#
# ![rms_norm 阶梯，bfloat16，H200](../records/nvidia-h200/rms_norm.bfloat16.svg)
#
# ## 短代码：Triton 的第一级与行宽编进 kernel
#
# `t01` 整行读进寄存器；`t07` 把 `HIDDEN` 作为 `tl.constexpr` 传入，循环次数已知、mask 消失：

# %%
_ = source(OPS / "rms_norm" / "t07_static_width.py")

# %% [markdown]
# 对 float64 参考的检查（CPU 上在解释器里；bfloat16 的算术在解释器里不对，所以 CPU 上只查 float32 与 float16）：

# %%
dtypes = ("float32", "bfloat16") if GPU else ("float32", "float16")
for name in ("t01_row_per_program", "t07_static_width"):
    for dtype in dtypes:
        print(name, dtype)
        assert against_float64(rung("rms_norm", name), "rms_norm", ((1, 1), (7, 127), (3, 4097)), dtype)

# %% [markdown]
# ## 观察：在 GPU 上
#
# 8192x4096 bfloat16（每行 8 KiB）：`t01`、`t07` 与 `F.rms_norm`、torch.compile 的成对计时。

# %%
if gpu_only("t01 / t07 / v00_torch_compile 对 F.rms_norm 的成对计时（8192x4096 bfloat16）"):
    from hello_gpu.bench import compare
    x, weight = op.spec.make_inputs((8192, 4096), "bfloat16", seed=0, device="cuda")
    baseline = rung("rms_norm", "v00_torch")
    for name in ("t01_row_per_program", "t07_static_width", "v00_torch_compile"):
        fn = rung("rms_norm", name)
        print(f"{name} vs F.rms_norm:", compare(lambda: baseline(x, weight), lambda: fn(x, weight), max_seconds=1))

# %% [markdown]
# ## 练习
#
# 练习 1：**行宽作为 `tl.constexpr`**。从 `t01_row_per_program.py` 出发，像 `t07` 那样把行宽作为 `tl.constexpr`
# 传入（改 kernel 的参数和 launch），先写下预测，再交给检查器。下面的 cell 交的是未改的 `t01`：改完再运行。
# 练习 2：把平方和改成 float16 累加，看检查器在 `near_overflow` 上报错。

# %%
mine = (OPS / "rms_norm" / "t01_row_per_program.py").read_text()
report = hg.exercise("rms_norm", mine, route="triton", max_seconds=0.5)
report

# %% [markdown]
# 练习 4、5 见章节页（`hello-gpu ladder rms_norm --route triton --check-only`；
# `records/nvidia-h200/rms_norm.bfloat16.profile.json`）。

# %%
skipped()
