# %% [markdown]
# # 第 2 章 GPU 体系结构（上）：编程模型与 SIMT 执行
#
# 动手版。概念、图和 H200 上的记录在章节页 `docs/course/part0/ch02-execution-model.md`；这里把它们变成可以改、可以跑的
# cell。没有 GPU 也能从头跑到尾：kernel 为 sm_90 编译作检查，需要 GPU 的 cell 会说明自己被跳过。

# %%
from nbsetup import *   # GPU、DEVICE、hg、torch 与几个小工具（notebooks/nbsetup.py）

print("GPU:", torch.cuda.get_device_name() if GPU else "没有（kernel 只编译，不运行）")

# %% [markdown]
# ## 解释：我是第几个线程，处理哪个元素？
#
# 全局编号 `i = blockIdx.x * blockDim.x + threadIdx.x`；grid 向上取整 `ceil(n / blockDim.x)`，多出来的线程被
# `if (i < n)` 挡住。硬件再把 block 里每 32 个线程分成一个 warp（AMD：wavefront）。下面用 Python 把这套编号算一遍。

# %%
WARP = 32


def where(i: int, block: int = 256) -> dict:
    """元素 i 由哪个 block 的哪个线程计算，在哪个 warp、第几个 lane。"""
    thread = i % block
    return {"block": i // block, "thread": thread, "warp": thread // WARP, "lane": thread % WARP}


def launch_shape(n: int, block: int = 256) -> dict:
    grid = -(-n // block)                     # 向上取整
    return {"grid": grid, "threads": grid * block, "idle threads": grid * block - n,
            "active in last block": n - (grid - 1) * block}


print(launch_shape(4097))
print("元素 4096:", where(4096))

# %% [markdown]
# ## 图：grid 怎样覆盖数组
#
# ![线程层级映射到数组](../docs/course/figures/part0-thread-hierarchy.svg)
#
# 同一张图用张量画出来：`blockDim.x = 8`、`n = 20`，每一行是一个 block，`-1` 是被 `if (i < n)` 挡住的线程。

# %%
n, block = 20, 8
grid = -(-n // block)
index = torch.arange(grid)[:, None] * block + torch.arange(block)[None, :]
print(torch.where(index < n, index, -1))

# %% [markdown]
# ## 短代码：README 的 kernel
#
# 一个线程一个元素。`hg.hip` 在有 GPU 时为它编译；没有 GPU 时为 sm_90 编译作检查，仍然能看寄存器和 occupancy。

# %%
vector_add = hg.hip(source("examples/vector_add.hip"), entry="vector_add")
print(vector_add)
print(vector_add.resources)

# %% [markdown]
# occupancy：每个 SM 能驻留几个 block、哪一项资源先用完。block 太小先撞到「每个 SM 最多 32 个 block」，
# 寄存器多的 kernel 先撞到寄存器。

# %%
for threads in (32, 64, 128, 256, 512, 1024):
    print(f"block = {threads:>4}: {vector_add.occupancy(threads)}")

# %% [markdown]
# 阶梯上的第一级 `v01_thread_per_element` 是同一个 kernel 的正式版本（模板 `T`、`int64_t n`、`__restrict__`），
# 文件头的 `block: 256` 与 `grid: ceil(n / 256)` 就是它的 launch 配置。

# %%
v01_text = (OPS / "vector_add" / "v01_thread_per_element.hip").read_text()
print("\n".join(line for line in v01_text.splitlines() if line.startswith(("block:", "grid:", "entry:"))))

# %% [markdown]
# 在 GPU 上运行它，并在不是 256 倍数的长度上和 float64 的精确和比较（输出先填 NaN，漏写的元素必然失败）。

# %%
if gpu_only("vector_add 在长度 1、31、4097、1000003 上对 float64 的检查"):
    for size in (1, 31, 4097, 1_000_003):
        a, b = torch.randn(size, device="cuda"), torch.randn(size, device="cuda")
        out = torch.full_like(a, float("nan"))
        vector_add(a, b, out=out, block=256)
        exact = a.double() + b.double()
        worst = torch.nan_to_num((out.double() - exact).abs() / (2**-23 * exact.abs() + 1.2e-38), nan=float("inf")).max()
        print(f"n = {size:>9,}: worst error / allowed = {worst.item():.3g}")

# %% [markdown]
# ## 观察：block 的数量与寿命
#
# `v01` 每 256 个元素一个短命的 block；`v03_grid_stride` 只 launch 一个 wave（132 个 SM × 每 SM 8 个 block），每个线程
# 以整个 grid 为步长循环。先数 wave，再在 GPU 上成对计时（`compare`：同一进程、ABBA 交错）。章节页的表是 H200 上的记录。

# %%
SMS = torch.cuda.get_device_properties(0).multi_processor_count if GPU else 132   # H200：132 个 SM
for size in (2**20, 2**28):
    blocks = launch_shape(size)["grid"]
    print(f"n = 2^{size.bit_length() - 1}: v01 launch {blocks:,} 个 block，约 {blocks / (SMS * 8):.1f} 个 wave（每 SM 8 个）")

# %%
if gpu_only("v01_thread_per_element 对 v03_grid_stride 的成对计时（2^24 个 float32）"):
    from hello_gpu.bench import compare
    a = torch.randn(2**24, device="cuda")
    b, out = torch.randn_like(a), torch.empty_like(a)
    v01, v03 = rung("vector_add", "v01_thread_per_element"), rung("vector_add", "v03_grid_stride")
    print("v03 vs v01:", compare(lambda: v01(a, b, out=out), lambda: v03(a, b, out=out), max_seconds=2))

# %% [markdown]
# ## 练习
#
# 章节页的练习 1、3、4 是手算（可以用上面的 `where` 和 `launch_shape` 核对答案）；练习 5 在终端里运行
# `hello-gpu ladder vector_add --check-only --route triton`。这里做练习 2：**把 grid 写错**，交给检查器。
# 改下面的 `mine`（已经把 `ceil(n / 256)` 换成了不取整的 `n / 256`），运行，看检查器怎么说；再换成向下取整的
# `n // 256`（最后那个不满的 block 被丢掉），看哪些形状失败；最后改回来。

# %%
mine = v01_text.replace("grid: ceil(n / 256)", "grid: n / 256")
report = hg.exercise("vector_add", mine, route="hip", max_seconds=0.5)
report   # 没有 GPU 时只编译：这种错误只有运行才看得出来

# %%
skipped()
