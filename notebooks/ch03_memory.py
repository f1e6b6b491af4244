# %% [markdown]
# # 第 3 章 GPU 体系结构（下）：数据存储与访问
#
# 动手版，配合章节页 `docs/course/part0/ch03-memory.md`。本章只问一件事：一个 warp 的 32 个地址落在多少个
# 32 字节的 sector 上，在途的字节够不够。前半本在任何机器上都能跑（算 sector、读 PTX、Little 定律），
# 计时的 cell 需要 GPU。

# %%
from nbsetup import *

# %% [markdown]
# ## 解释：一个 warp 要碰几个 sector
#
# 数据以 32 字节的 sector 为单位在 HBM、L2、L1 之间搬运。给出一个 warp 里每个 lane 的字节地址，就能数出 sector 数
# 和有用字节的比例。

# %%
SECTOR = 32


def sectors(byte_addresses, bytes_per_lane: int) -> tuple[int, float]:
    """一个 warp 的一次 load：涉及几个 sector，其中有用的字节占多少。"""
    touched = {(address + k) // SECTOR for address in byte_addresses for k in range(bytes_per_lane)}
    return len(touched), len(byte_addresses) * bytes_per_lane / (len(touched) * SECTOR)


lanes = range(32)
print("合并，float32，lane k 读 a[k]       :", sectors([4 * k for k in lanes], 4))
print("不合并，v02，lane k 读 a[16k]        :", sectors([4 * 16 * k for k in lanes], 4))

# %% [markdown]
# ## 图
#
# ![存储层级](../docs/course/figures/part0-memory-hierarchy.svg)
#
# ![合并与不合并的访存](../docs/course/figures/part0-coalescing.svg)

# %% [markdown]
# ## 短代码：在 PTX 里看到 128 位 load
#
# `v04_vector_128bit` 把 16 字节打成一个 `Pack`，一条指令读 16 字节。PTX 不需要 GPU：NVRTC 为 sm_90 编译就能取出。

# %%
def ptx_loads(rung_file: str, entry: str) -> dict:
    kernel = hg.hip((OPS / "vector_add" / rung_file).read_text(), entry=entry)
    ptx = kernel.asm("ptx")
    return {kind: ptx.count(kind + " ") + ptx.count(kind + "\t")
            for kind in ("ld.global.nc.v4.f32", "ld.global.nc.f32")}


print("v01:", ptx_loads("v01_thread_per_element.hip", "vector_add<float>"))
print("v04:", ptx_loads("v04_vector_128bit.hip", "vector_add_vec128<float>"))

# %% [markdown]
# ## 解释：Little 定律
#
# 要维持带宽 B，在延迟 L 内必须有 B × L 字节在路上。按 H200 datasheet 的 4.8 TB/s 和约 600 ns 估算，再和 `v04`
# 实际能驻留的线程数乘以每线程在途的字节比较（驻留的线程数来自编译器的寄存器数，不需要 GPU）。

# %%
needed = 4.8e12 * 600e-9
v04 = hg.hip((OPS / "vector_add" / "v04_vector_128bit.hip").read_text(), entry="vector_add_vec128<float>")
occupancy = v04.occupancy(256)
print(occupancy)
threads_per_sm = occupancy.blocks_per_sm * occupancy.block_threads
in_flight = 132 * threads_per_sm * 32          # 每个线程 a、b 各一个 16 字节的 pack
print(f"需要在途：{needed / 1e6:.1f} MB；v04 在途：{in_flight / 1e6:.1f} MB（{in_flight / needed:.1f} 倍）")

# %% [markdown]
# ## 观察：合并与不合并，在 GPU 上
#
# 同样的 DRAM 字节，`v02_strided_chunks` 多付的是 L1/L2 的 sector 事务。成对计时（2^24 个 float32）：

# %%
if gpu_only("v01 对 v02（不合并）与 v03 对 v04（128 位）的成对计时"):
    from hello_gpu.bench import compare
    a = torch.randn(2**24, device="cuda")
    b, out = torch.randn_like(a), torch.empty_like(a)
    ladder = {name: rung("vector_add", name) for name in
              ("v01_thread_per_element", "v02_strided_chunks", "v03_grid_stride", "v04_vector_128bit")}
    call = lambda name: (lambda: ladder[name](a, b, out=out))   # noqa: E731
    print("v02 vs v01:", compare(call("v01_thread_per_element"), call("v02_strided_chunks"), max_seconds=2))
    print("v04 vs v03:", compare(call("v03_grid_stride"), call("v04_vector_128bit"), max_seconds=2))

# %% [markdown]
# ## 短代码：shared memory 与 `__syncthreads()`
#
# reduce_sum 阶梯的 `v03`：block 内的树状求和。注意第二个 `__syncthreads()` 在 `if` 之外（练习 5）。

# %%
_ = source(OPS / "reduce_sum" / "v03_sequential_addressing.hip")

# %% [markdown]
# ## 练习
#
# 1. **数 sector**：用上面的 `sectors` 算 bfloat16 的 `a[k]` 与 `v04` 的 float32 `Pack`（lane k 读 16 字节），
#    对照章节页的答案。
# 2. **PTX**：`ptx_loads` 已经做了；说出 `.nc` 的意思。
# 3. **Little 定律**：上面的 cell 就是这道题的算式，换成 `v01`（`vector_add<float>`，每线程 8 字节）再算一次。
# 4. **写一个不合并的 kernel**：改下面的 `mine`，让线程 t 处理打乱的下标，然后交给检查器。

# %%
print("bfloat16 a[k]:", sectors([2 * k for k in lanes], 2))
print("v04 Pack     :", sectors([16 * k for k in lanes], 16))

# %%
mine = (OPS / "vector_add" / "v01_thread_per_element.hip").read_text()
# 在这里改 mine 的下标计算，例如 (t % 32) * (n / 32) + t / 32，并处理尾巴
report = hg.exercise("vector_add", mine, route="hip", max_seconds=0.5)
report

# %%
skipped()
