# %% [markdown]
# # 第 18 章 LLM 解码：用我们的 kernel 加速真实模型
#
# 动手版，配合章节页 `docs/course/part4/ch18-llm-decode.md`。先从 H200 的 ceilings 记录算出 decode 的带宽上限和
# launch 开销，再 profile 一整个模型、用 Amdahl 定律读份额，比较几种后端，并逐步比较 logits。没有 GPU 时，模型换成
# `tiny` 配置在 CPU 上跑（流程都在，时间是主机的，不是 GPU 的）；1B 的 profile、四个后端的计时在 GPU 上才跑。

# %%
from nbsetup import *
import inspect
import json

from rich.console import Console

from hello_gpu.models import build_model, compare_greedy, config_named, make_runner
from hello_gpu.models.run import decode_bound, render_run, run_model
from hello_gpu.models.work import step_work

ceilings = json.loads((REPO / "records" / "nvidia-h200" / "ceilings.json").read_text(encoding="utf-8"))["ceilings"]
COPY, LAUNCH, GRAPH_CALL = ceilings["copy_bytes_per_s"], ceilings["launch_overhead_s"], ceilings["graph_call_s"]
console = Console(width=150, color_system=None, force_jupyter=False)   # plain text in the notebook
print(f"H200 实测：copy {COPY / 1e9:,.0f} GB/s，launch {LAUNCH * 1e6:.2f} us（主机），graph call {GRAPH_CALL * 1e6:.2f} us（设备）")

# %% [markdown]
# ## 解释：带宽上限
#
# batch 1 的 decode 每一步把每个权重读一遍，再读 KV cache 已经写过的部分：tokens/s ≤ batch × copy 带宽 ÷ 每步字节。
# `decode_bound` 数这些字节（它的代码在下面"短代码"里）：

# %%
for name in ("1b", "8b"):
    for batch in (1, 16):
        bound = decode_bound(config_named(name), torch.bfloat16, batch=batch, prompt=512, new=256, copy_bytes_per_s=COPY)
        print(f"{name} batch {batch:>2}：权重 {bound.weight_bytes / 1e9:6.2f} GB + KV cache {bound.kv_bytes / 1e9:5.3f} GB"
              f" -> 每步至少 {bound.bytes_per_step / COPY * 1e3:.3f} ms，上限 {bound.tokens_per_s:,.0f} tokens/s")

# %% [markdown]
# ## 解释：一步有多少次 launch
#
# eager 的每个 aten 调用都要主机 launch 一次。在 meta 设备上跑一步（只有形状，不占内存），数出会 launch kernel 的调用：

# %%
from hello_gpu.course.model_tables import eager_calls

for name in ("1b", "8b"):
    calls = eager_calls(config_named(name))
    total = sum(calls.values())
    floor = decode_bound(config_named(name), torch.bfloat16, batch=1, prompt=512, new=256).bytes_per_step / COPY
    print(f"{name}：{total} 个 aten 调用；读权重 {floor * 1e6:,.0f} us，主机 launch {total * LAUNCH * 1e6:,.0f} us，"
          f"录进 CUDA graph 后的固定开销 {total * GRAPH_CALL * 1e6:,.0f} us")
print("最多的几种（1b）：", eager_calls(config_named("1b")).most_common(6))

# %% [markdown]
# ## 图
#
# ![一个 decode 步：eager、CUDA graph 与带宽下限](../docs/course/figures/part4-decode-timeline.svg)
#
# ![Amdahl：一部分变快，整步快多少](../docs/course/figures/part4-amdahl.svg)
#
# ## 短代码：上限、CUDA graph、换不换一个 kernel
#
# 从仓库里的文件打印（不是复制）：

# %%
from hello_gpu.models import backends, run

print(inspect.getsource(run.decode_bound))
print(inspect.getsource(backends.captured_decode))
print(inspect.getsource(backends._timed_decision))

# %% [markdown]
# ## 观察：整个模型的 profile
#
# GPU 上是 1B、bf16、prompt 512 的 decode；CPU 上是 tiny 模型（份额只说明 CPU，不能搬到 GPU 上用）。

# %%
from hello_gpu.models.profile import profile_llama, profile_table

if gpu_only("1B 的 decode profile（bf16，prompt 512）"):
    model = build_model("1b", device="cuda", dtype=torch.bfloat16, seed=0)
    profile = profile_llama(model, prompt=512, steps=5)
else:
    model = build_model("tiny", dtype=torch.float32, seed=0)
    profile = profile_llama(model, prompt=64, steps=3)
for table in profile_table(profile, top=10):
    console.print(table)

# %% [markdown]
# ## 解释：Amdahl 定律
#
# 份额 s 的一类快 k 倍，整个模型最多快 1 / (1 − s + s/k)：

# %%
for category, seconds in profile.ranked_categories():
    print(f"{category:<18} 份额 {profile.share(category):6.1%}   不花时间：{profile.amdahl(category):5.2f}x   "
          f"快 2 倍：{profile.amdahl(category, 2.0):5.3f}x")

# %% [markdown]
# ## 观察：几种后端，同一次运行
#
# GPU 上是 1B 的四个后端（64 个新 token）；CPU 上是 tiny 的 eager 和 hello-gpu（CPU 上没有可计时的 kernel，
# 所以 hello-gpu 什么都不换，每个替换写明原因）。

# %%
if gpu_only("1B 的四个后端（eager、compile、compile-reduce-overhead、hello-gpu），prompt 512，64 个新 token"):
    result = run_model(model, ["eager", "compile", "compile-reduce-overhead", "hello-gpu"], batch=1,
                       prompt_length=512, new=64)
else:
    result = run_model(model, ["eager", "hello-gpu"], batch=1, prompt_length=16, new=8)
render_run(result, console)

# %% [markdown]
# ## 观察：贪心解码的每一步 logits
#
# 把 RMSNorm 的 kernel 强制换进去（`force`：对 float64 检查过，不计时），和 eager 逐步比较。CPU 上 kernel 在 Triton 的
# 解释器里跑。

# %%
steps, length = (64, 512) if GPU else (16, 8)
prompt = torch.randint(0, model.config.vocab_size, (1, length), generator=torch.Generator().manual_seed(1)).to(model.device)
eager = make_runner(model, "eager", batch=1, max_seq=length + steps)
ours = make_runner(model, "hello-gpu", batch=1, max_seq=length + steps, force=["rms_norm"])
print("换进去的：", ours.used())
print(compare_greedy(eager, ours, prompt, steps).summary())

# %% [markdown]
# ## 练习
#
# 每个练习都在下面有一个检查 cell：把你的答案填进 `None` 的位置再运行，它和项目自己的代码算出的数对照。
#
# 练习 1：8B，batch 1，prompt 4096，256 个新 token，bfloat16：一步读多少字节，上限多少 tokens/s？
# 练习 2：按每个操作都以 copy 带宽运行，8B 一步 decode 里 attention 占多少时间（prompt 512 和 7936；cache 按整个
# 预分配的长度 prompt + 256 读，和模型一样）？

# %%
my_tokens_per_s = None            # 练习 1
_ = check_answer("练习 1", my_tokens_per_s,
             decode_bound(config_named("8b"), torch.bfloat16, batch=1, prompt=4096, new=256, copy_bytes_per_s=COPY).tokens_per_s)


def attention_share(prompt_length: int) -> float:
    work = step_work(config_named("8b"), torch.bfloat16, batch=1, tokens=1, cache_length=prompt_length + 256)
    return work["attention"].bytes / sum(w.bytes for w in work.values())


my_share_512, my_share_7936 = None, None      # 练习 2
_ = check_answer("练习 2，prompt 512", my_share_512, attention_share(512), rel=0.05)
_ = check_answer("练习 2，prompt 7936", my_share_7936, attention_share(7936), rel=0.05)

# %% [markdown]
# 练习 3：用上面的 profile，norm 一类快 2 倍、不花时间时，整个模型最多快多少？
# 练习 4：eager 的 `rms_norm` 一次调用有几个 aten 调用？1B 的一步里 RMSNorm 被调用几次（`rms_norm` 与 `add_rms_norm`
# 两个操作加起来）？每次 RMSNorm 的那一串都换成一个 kernel（残差相加照旧），一步省下多少 us 的主机 launch 时间？
# 先预测，再用下面的计数器。

# %%
my_norm_2x, my_norm_free = None, None         # 练习 3
_ = check_answer("练习 3，快 2 倍", my_norm_2x, profile.amdahl("norm", 2.0), rel=0.01)
_ = check_answer("练习 3，不花时间", my_norm_free, profile.amdahl("norm"), rel=0.01)

from collections import Counter
from torch.utils._python_dispatch import TorchDispatchMode

from hello_gpu.models.llama import rms_norm


class CountCalls(TorchDispatchMode):
    """Every aten call that is not a view, by name."""
    def __init__(self):
        super().__init__()
        self.calls = Counter()

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        if not func.is_view:
            self.calls[str(func.overloadpacket)] += 1
        return func(*args, **(kwargs or {}))


x, weight = torch.randn(1, 1, 2048, dtype=torch.bfloat16), torch.ones(2048, dtype=torch.bfloat16)
with CountCalls() as counter:
    rms_norm(x, weight, 1e-5)
per_call = sum(counter.calls.values())
work = step_work(config_named("1b"), torch.bfloat16, batch=1, tokens=1, cache_length=513)
norms_per_step = work["rms_norm"].calls + work["add_rms_norm"].calls
my_saved_us = None                             # 练习 4：填你的预测，再看下一行的计数
_ = check_answer("练习 4", my_saved_us, norms_per_step * (per_call - 1) * LAUNCH * 1e6, rel=0.05)
print("eager rms_norm 一次调用：", dict(counter.calls))

# %% [markdown]
# 练习 5：一个"忘了乘 weight"的 RMSNorm。先看后端的检查拒绝它；再把容差放宽、强制换进去，看逐步的 logit 比较抓住它。

# %%
from dataclasses import replace

from hello_gpu.models.backends import REPLACEMENTS


def forgot_the_weight(x, weight, eps):
    return rms_norm(x, torch.ones_like(weight), eps)


tiny = build_model("tiny", dtype=torch.float32, seed=5)
wrong = replace(REPLACEMENTS["rms_norm"], load=lambda: forgot_the_weight)
refused = make_runner(tiny, "hello-gpu", batch=1, max_seq=16, force=["rms_norm"], replacements={"rms_norm": wrong})
print("后端的检查：", refused.choices[0].reason)
lax = replace(wrong, tolerance={torch.float32: (1.0, 1.0)})                  # 让它通过第一道检查
broken = make_runner(tiny, "hello-gpu", batch=1, max_seq=16, force=["rms_norm"], replacements={"rms_norm": lax})
prompt = torch.randint(0, tiny.config.vocab_size, (1, 8), generator=torch.Generator().manual_seed(3))
print(compare_greedy(make_runner(tiny, "eager", batch=1, max_seq=16), broken, prompt, 8).summary())

# %% [markdown]
# 练习 6 在 GPU 上：`hello-gpu model run --config 1b --batch 1 --prompt 512 --new 256 --backend
# eager,compile,compile-reduce-overhead,hello-gpu`，和章节页"调用次数与 launch 开销"那张表的预测对照。

# %%
skipped()
