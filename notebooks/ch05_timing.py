# %% [markdown]
# # 第 5 章 benchmark 与可信计时
#
# 动手版，配合章节页 `docs/course/part1/ch05-timing.md`。同一个 kernel 连量五次，五个数各不相同；这一本让你亲手
# 看到一次计时在哪里撒谎，以及 `hello_gpu.bench` 的统计是怎样得出中位数、区间和「faster / slower / within noise」的。
# 统计部分在 CPU 上也能跑（主机时钟、CPU 张量）；device event、冷 L2 与 spin 需要 GPU。

# %%
from nbsetup import *
from hello_gpu.bench import Work, compare, measure, summarize

ch05 = example("ch05_timing")   # 章节的脚本：one_event_pair 与 main
kernel = hg.hip(source("examples/vector_add.hip"), entry="vector_add")
print(kernel)

# %% [markdown]
# ## 解释：中位数与 bootstrap 区间
#
# kernel 时间的分布有长长的右尾，均值会被拖走，中位数不会。bootstrap：有放回地重抽样本、每次算中位数，取 2.5% 与
# 97.5% 分位。下面用一组带尾巴的假样本看 `summarize` 做了什么。

# %%
generator = torch.Generator().manual_seed(0)
samples = (10e-6 + 0.2e-6 * torch.randn(200, generator=generator)).tolist()
samples += [30e-6, 45e-6, 80e-6]                       # 三次被打断的调用
summary = summarize(samples)
print(f"均值   {sum(samples) / len(samples) * 1e6:.2f} us")
print(f"中位数 {summary.median * 1e6:.2f} us，95% 区间 [{summary.ci95[0] * 1e6:.2f}, {summary.ci95[1] * 1e6:.2f}] us")

# %% [markdown]
# ## 图：计时区间里装了什么
#
# ![device time 与 call time 的时间线](../docs/course/figures/part1-timing-timeline.svg)
#
# ## 短代码：朴素计时，五次
#
# 一对 device event 包住一次调用（`ch05.one_event_pair`），连做五次；再用主机时钟量一次不同步的 launch。

# %%
if gpu_only("一对 event 的朴素计时与不同步的主机时钟"):
    import time
    n = 2**24
    a = torch.randn(n, device="cuda")
    b, c = torch.randn_like(a), torch.empty_like(a)
    launch = kernel.prepare(a, b, c)
    print("一对 event，五次 (us):", ", ".join(f"{ch05.one_event_pair(launch) * 1e6:.1f}" for _ in range(5)))
    torch.cuda.synchronize()
    begin = time.perf_counter()
    launch()
    print(f"主机时钟、不同步 (us): {(time.perf_counter() - begin) * 1e6:.1f}   <- 这是 launch，不是 kernel")
    torch.cuda.synchronize()

# %% [markdown]
# ## 短代码：`measure()`
#
# 预热、冷 L2、spin 挡住主机、重复到中位数稳定。没有 GPU 时它改用主机时钟量 CPU 上的 `torch.add`：统计方法不变。

# %%
if GPU:
    work = Work(read_bytes=8 * n, written_bytes=4 * n)
    m = measure(launch, work=work)
else:
    a, b = torch.randn(4096), torch.randn(4096)
    c = torch.empty_like(a)
    m = measure(lambda: torch.add(a, b, out=c), max_seconds=0.2)
print(m)
print(f"p20–p80 占中位数的 {(m.summary.p80 - m.summary.p20) / m.median:.1%}，预热 {m.warmup_calls} 次，停止原因：{m.stopped_by}")

# %% [markdown]
# ## 观察：冷 L2 的两种做法，device time 与 call time
#
# `cache="cold"` 清零一块 4 倍 L2 的缓冲区（留下脏行），`cold-clean` 再读一遍只留干净的行；`mode="call"` 把主机的
# launch 路径也算进来。在 2^24 上比较这几种量法。

# %%
if gpu_only("cold / cold-clean / call 三种量法（2^24 个 float32）"):
    for options in ({"cache": "cold"}, {"cache": "cold-clean"}, {"mode": "call"}):
        print(options, measure(launch, work=work, **options))

# %% [markdown]
# ## 练习
#
# 练习 3：**A/A 测试**。同一个函数和自己比：结论应当是 `within noise`。再把 `margin=0` 跑几次，看为什么需要那 2% 的带。

# %%
f = (lambda: torch.add(a, b, out=c))
print("margin=0.02:", compare(f, f, max_seconds=0.5 if not GPU else 4.0))
print("margin=0   :", compare(f, f, margin=0, max_seconds=0.5 if not GPU else 4.0))

# %% [markdown]
# 练习 4：**手算有效带宽**。softmax 的 work model 是 2 × 行 × 列 × 4 字节（`src/hello_gpu/ops/softmax/spec.py`）。
# 下面从已提交的记录 `records/nvidia-h200/softmax.float32.json` 读出 4096x1024 每一行的中位数，用字节模型换算：
# 和章节页表里的 GB/s 列对照。

# %%
import json

from hello_gpu.ops import load_op

softmax_work = load_op("softmax").spec.work((4096, 1024), "float32")
record = json.loads((REPO / "records" / "nvidia-h200" / "softmax.float32.json").read_text())
for entry in record["entries"]:
    if entry["shape"] == "4096x1024" and entry["variant"] in ("v00_torch", "t10_one_warp_per_row"):
        median = entry["timing"]["median"]
        print(f"{entry['variant']:>22}: {median * 1e6:.1f} us -> {softmax_work.bytes / median / 1e9:,.0f} GB/s")

# %% [markdown]
# 练习 2 在终端里运行（GPU）：`hello-gpu run vector_add v01_thread_per_element --shape 2^20` 与加上 `--cache cold-clean`
# 的同一条命令。

# %%
skipped()
