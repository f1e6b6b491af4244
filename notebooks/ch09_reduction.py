# %% [markdown]
# # 第 9 章 Reduction：求和归约
#
# 动手版，配合章节页 `docs/course/part2/ch09-reduction.md`。n 个数变成 1 个数，线程之间必须合作：shared memory 里的树、
# warp shuffle、跨 block 的合并。这一本先用 Python 模拟树和 shuffle，再检查 Triton 的两级（CPU 上在解释器里），
# 在 GPU 上成对计时，最后写一级自己的单趟 rung。

# %%
from nbsetup import *
from hello_gpu.ops import load_op

op = load_op("reduce_sum")

# %% [markdown]
# ## 解释与图：一步一步的树
#
# ![shared memory 树归约：交错与顺序寻址](../docs/course/figures/part2-reduction-tree.svg)
#
# 交错写法（`v02`）第 s 步活跃的是 `tid % (2s) == 0` 的线程；顺序寻址（`v03`）活跃的是 `tid < s` 的线程。加法一样多，
# 差别在有几个 warp 要发指令（warp-step）。

# %%
def warp_steps(slots: int, warp: int = 32) -> dict:
    """每一步有几个 warp 里至少有一个活跃线程：交错（v02）与顺序寻址（v03）。"""
    interleaved, sequential = [], []
    s = 1
    while s < slots:
        interleaved.append(len({tid // warp for tid in range(slots) if tid % (2 * s) == 0}))
        s *= 2
    s = slots // 2
    while s > 0:
        sequential.append(len({tid // warp for tid in range(s)}))
        s //= 2
    return {"v02": interleaved, "v03": sequential}


print(warp_steps(8, warp=4))      # 图里的 8 个槽（用 4 个线程一个 warp 画）

# %% [markdown]
# ## 解释：warp shuffle
#
# `__shfl_down(value, offset)` 让 lane i 读到 lane i + offset 的值（越界的 lane 读到自己的值，结果不用）。offset 依次为
# 16、8、4、2、1，五步之后 lane 0 持有整个 warp 的和。用张量模拟一个 warp：

# %%
lane_values = torch.arange(32, dtype=torch.float32)
value = lane_values.clone()
for offset in (16, 8, 4, 2, 1):
    shifted = torch.cat([value[offset:], value[32 - offset:]])   # lane i 读 lane i + offset
    value = value + shifted
print("lane 0:", value[0].item(), "  torch.sum:", lane_values.sum().item())

# %% [markdown]
# ## 短代码：同样的 `warp_sum` / `block_sum`，编译检查
#
# `examples/reduce_warp_shuffle.hip` 可以直接编译（`hg.load` 编译文件里的每个 kernel）：

# %%
shuffle = hg.load(REPO / "examples" / "reduce_warp_shuffle.hip")
print(shuffle)
for name in shuffle.kernels:
    print(name, shuffle[name].resources)

# %% [markdown]
# Triton 的 two-stage（`t01`）与 atomic 单趟（`t03`）对 float64 参考的检查。reduce_sum 的容差随 n 增长
# （`spec.tolerance`：√n · eps · Σ|x| 的两倍）。

# %%
for name in ("t01_two_stage", "t03_single_pass_atomic"):
    print(name)
    assert against_float64(rung("reduce_sum", name), "reduce_sum", (1, 31, 4097, 100_000))

# %% [markdown]
# **确定性**：`t01` 的文件头声明 `deterministic: yes`，两次运行应当逐位相同；`t03` 的 atomic 顺序取决于谁先到
# （解释器里 program 一个接一个跑，所以 CPU 上看不出差别，GPU 上才看得出）。

# %%
(x,) = op.spec.make_inputs(1_000_000, "float32", seed=1, device=DEVICE)
for name in ("t01_two_stage", "t03_single_pass_atomic"):
    fn = rung("reduce_sum", name)
    runs = {fn(x).item() for _ in range(5)}
    print(f"{name}: {len(runs)} 个不同的结果，文件头：{load_op('reduce_sum').rung(name).metadata.deterministic_text}")

# %% [markdown]
# ## 观察：在 GPU 上成对计时
#
# 2^20（一次调用几微秒，launch 的次数就是时间）与 2^24：

# %%
if gpu_only("v03 / v05 / v07 / t01 对 torch.sum 的成对计时"):
    from hello_gpu.bench import compare
    baseline = rung("reduce_sum", "v00_torch")
    for size in (2**20, 2**24):
        (x,) = op.spec.make_inputs(size, "float32", seed=0, device="cuda")
        for name in ("v03_sequential_addressing", "v05_warp_shuffle", "v07_single_pass_last_block", "t01_two_stage"):
            fn = rung("reduce_sum", name)
            print(f"n = {size:>10,} {name} vs torch.sum:", compare(lambda: baseline(x), lambda: fn(x), max_seconds=1))

# %% [markdown]
# ## 练习
#
# 练习 1：**数 warp-step**：256 个槽、每 warp 32 个线程，与 `v03` 文件头的 47 和 12 对照；再试 wave64（CDNA）。

# %%
for warp in (32, 64):
    steps = warp_steps(256, warp)
    print(f"warp = {warp}: v02 {steps['v02']} = {sum(steps['v02'])}，v03 {steps['v03']} = {sum(steps['v03'])}")

# %% [markdown]
# 练习 3：**写一级 Triton 的单趟 rung**。从 `t03_single_pass_atomic.py` 出发（它已经是 atomic 单趟），把每个 program
# 改成 16384 个元素、16 个 warp，文件头写 `deterministic: no`，再交给检查器。

# %%
mine = (OPS / "reduce_sum" / "t03_single_pass_atomic.py").read_text()
mine = mine.replace("BLOCK = 4096", "BLOCK = 16384")   # 还要改 num_warps，并更新文件头的 change 与 prediction
report = hg.exercise("reduce_sum", mine, route="triton", max_seconds=0.5)
report

# %%
skipped()
