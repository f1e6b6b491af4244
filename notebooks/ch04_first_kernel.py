# %% [markdown]
# # 第 4 章 第一个程序 + 性能分析
#
# 动手版，配合章节页 `docs/course/part0/ch04-first-kernel.md`：**编译 → 检查 → 计时**，顺序不能颠倒。
# 检查器和 kernel 来自章节的脚本 `examples/course/ch04_first_kernel.py`（这里加载它，而不是复制一份）。

# %%
from nbsetup import *
from hello_gpu.bench import Work, compare, measure

ch04 = example("ch04_first_kernel")   # SOURCE、check、grid_rounded_down 都来自章节的脚本

# %% [markdown]
# ## 编译：在 notebook 里内联写 kernel
#
# `%load_ext hello_gpu` 之后，`%%hip NAME` 把 cell 的内容编译成 kernel 并绑定到 `NAME`。编译错误指向 cell 里的行号
# （`%%hip` 那一行是第 1 行）。没有 GPU 时为 sm_90 编译作检查。

# %%
# %load_ext hello_gpu

# %%
# %%hip vector_add
__global__ void vector_add(const float* a, const float* b, float* out, int n) {
  int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) out[i] = a[i] + b[i];
}

# %%
print(vector_add)
print(vector_add.resources)
print(vector_add.occupancy(256))
assert vector_add.resources == hg.hip(ch04.SOURCE, entry="vector_add").resources   # 与章节脚本的 SOURCE 同一个 kernel

# %% [markdown]
# ## 检查：float64 参考、由舍入推出的容差、刁钻的长度
#
# `ch04.check` 用 NaN 预填输出，在 1、31、255、257、4097、1000003 上与 `a.double() + b.double()` 比较，打印
# 「最坏元素的误差 ÷ 允许值」（≤ 1 为通过）。先在 CPU 上检查两个 CPU 函数：正确的 `torch.add`，和模仿
# 「grid 向下取整」的错误版本。

# %%
print("torch.add:")
right = ch04.check(lambda a, b, out: torch.add(a, b, out=out), "cpu")
print("grid = n // 256:")
wrong = ch04.check(ch04.grid_rounded_down, "cpu")
assert right and not wrong

# %%
if gpu_only("vector_add 在 GPU 上对 float64 的检查"):
    assert ch04.check(lambda a, b, out: vector_add(a, b, out=out, block=256), "cuda")

# %% [markdown]
# ## 图：`compare` 的 ABBA 轮次
#
# ![compare 的 ABBA 轮次](../docs/course/figures/part0-abba.svg)
#
# ## 计时：`measure` 与 `compare`
#
# launch 是异步的，所以不用 `time.time()`。`prepare` 把参数检查和打包只做一次，计时循环里只剩 launch。
# `Work` 给出字节模型（读 a、b，写 out：每元素 12 字节），结果就换算成 GB/s。

# %%
if gpu_only("measure() 与 compare()：vector_add 对 torch.add，2^24 个 float32"):
    n = 2**24
    a, b = torch.randn(n, device="cuda"), torch.randn(n, device="cuda")
    ours, theirs = torch.empty_like(a), torch.empty_like(a)
    launch = vector_add.prepare(a, b, out=ours, block=256)
    reference = lambda: torch.add(a, b, out=theirs)   # noqa: E731
    work = Work(bytes=12 * n, flops=n, dtype="float32")
    print("torch.add  :", measure(reference, work=work))
    print("vector_add :", measure(launch, work=work))
    print("vector_add vs torch.add:", compare(reference, launch))

# %% [markdown]
# ## 观察
#
# 有 GPU 时，`compare` 给出的比值应当和章节页表里 `v01_thread_per_element` 对 `v00_torch` 的 speedup 相近（同样的
# cold L2、device event）。差距从哪里来，是第 8 章的内容。
#
# ## 练习
#
# 练习 3：**block 大小与 occupancy**。occupancy 在哪里都能算；GB/s 要 GPU。

# %%
rows = []
for threads in (32, 64, 128, 256, 1024):
    occupancy = vector_add.occupancy(threads)
    row = [threads, f"{occupancy.fraction:.0%}", occupancy.limited_by]
    if GPU:
        row.append(f"{measure(lambda: vector_add(a, b, out=ours, block=threads), work=work).rates.gb_per_s:,.0f} GB/s")
    rows.append(row)
for row in rows:
    print(*row, sep="\t")
if not GPU:
    gpu_only("练习 3 的 GB/s 一列")

# %% [markdown]
# 练习 4：**交给检查器**。`v01_thread_per_element.hip` 原样交上去应当全部通过；然后只改一件事（例如每个线程处理两个
# 相邻元素），先写下预测，再运行。

# %%
mine = (OPS / "vector_add" / "v01_thread_per_element.hip").read_text()
report = hg.exercise("vector_add", mine, route="hip", max_seconds=0.5)
report

# %% [markdown]
# 练习 5：**手算有效带宽**：12 × 2^24 字节除以章节页表里 `v00_torch` 的中位数，与表中 GB/s 列比较。

# %%
skipped()
