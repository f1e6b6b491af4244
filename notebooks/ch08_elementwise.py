# %% [markdown]
# # 第 8 章 Element-Wise：向量加法
#
# 动手版，配合章节页 `docs/course/part2/ch08-elementwise.md`。阶梯 `src/hello_gpu/ops/vector_add/` 的每一级只比父级
# 多改一件事；这一本把阶梯读出来，在 CPU 上（Triton 解释器）检查 Triton 的一级，在 GPU 上成对计时相邻的两级，
# 最后写你自己的一级交给检查器。

# %%
from nbsetup import *
from hello_gpu.ops import load_op

op = load_op("vector_add")

# %% [markdown]
# ## 解释：字节与 FLOP
#
# 每个元素读 a、b，写 out，1 次加法：float32 每元素 12 字节，算术强度 1/12 FLOP/B，远在 ridge 左边。
# 字节模型就是 `spec.py` 的 `work`：

# %%
for dtype in ("float32", "bfloat16"):
    work = op.spec.work(2**28, dtype)
    print(f"{dtype:>8} 2^28: {work.bytes / 1e9:.2f} GB，{work.flops / work.bytes:.3f} FLOP/B，"
          f"按 datasheet 的 4.8 TB/s 至少 {work.bytes / 4.8e12 * 1e3:.2f} ms")

# %% [markdown]
# ## 图
#
# ![vector_add 阶梯，float32，H200](../records/nvidia-h200/vector_add.float32.svg)
#
# ## 短代码：把阶梯读出来
#
# 每一级的文件头写着父级、改动和事先写下的预测；`outcome` 是实测后补上的。

# %%
for step in op.rungs:
    header = step.metadata
    print(f"{step.id:<24} <- {header.parent:<24} {header.change}")
    if header.prediction:
        print(f"{'':<28}prediction: {header.prediction}")

# %% [markdown]
# Triton 的第一级 `t01_tile_1024`：一个 program 处理 1024 个元素，尾部用 mask。

# %%
_ = source(OPS / "vector_add" / "t01_tile_1024.py")

# %% [markdown]
# 在 float64 参考上检查它（spec 的输入与容差）。没有 GPU 时它在 Triton 解释器里跑 CPU 张量。

# %%
t01 = rung("vector_add", "t01_tile_1024")
assert against_float64(t01, "vector_add", (1, 31, 4097, (33, 65)))

# %% [markdown]
# ## 观察：相邻两级，成对计时
#
# 判断快慢只看同一进程里交错测的配对比值（`compare`）。下面在 2^24 个 float32 上比较章节页逐级读到的几对。

# %%
if gpu_only("相邻 rung 的成对计时（2^24 个 float32）"):
    from hello_gpu.bench import compare
    a, b = op.spec.make_inputs(2**24, "float32", seed=0, device="cuda")
    out = torch.empty_like(a)
    pairs = [("v01_thread_per_element", "v03_grid_stride"), ("v03_grid_stride", "v04_vector_128bit"),
             ("v04_vector_128bit", "v06_tile_per_block"), ("v00_torch", "t01_tile_1024")]
    for parent, child in pairs:
        p, c = rung("vector_add", parent), rung("vector_add", child)
        print(f"{child} vs {parent}:", compare(lambda: p(a, b, out=out), lambda: c(a, b, out=out), max_seconds=2))

# %% [markdown]
# ## 练习
#
# 练习 5：**算空 block**。`v06` 每个 block 处理 256 个线程 × 2 个 16 字节的包。

# %%
n, itemsize = 2**28, 2                                  # bfloat16
by_elements = -(-n // 2048)
by_bytes = -(-(n * itemsize) // 8192)
print(f"按元素：{by_elements:,} 个 block，其中 {by_elements - by_bytes:,} 个找不到 tile；按字节：{by_bytes:,} 个")

# %% [markdown]
# 练习 2：**写一级自己的 Triton rung**。以 `t01_tile_1024.py` 为父级，把 TILE 改成 2048；先在文件头写下预测，
# 再交给检查器（没有 GPU 时在解释器里检查小形状，不计时）。

# %%
mine = (OPS / "vector_add" / "t01_tile_1024.py").read_text()
mine = mine.replace("parent: v00_torch", "parent: t01_tile_1024").replace("TILE = 1024", "TILE = 2048")
mine = mine.replace("prediction: 0.97x to 1.0x torch.add at 2^28", "prediction: 1.0x t01_tile_1024 at 2^28 (写下你的)")
report = hg.exercise("vector_add", mine, route="triton", max_seconds=0.5)
report

# %% [markdown]
# 练习 1、3、4 见章节页（`hello-gpu ladder vector_add --route triton --check-only`；把 `v02` 的错误搬进 Triton；
# Little 定律）。

# %%
skipped()
