# %% [markdown]
# # 第 12 章 Fusion：Attention
#
# 动手版，配合章节页 `docs/course/part2/ch12-attention.md`。`softmax(Q K^T × scale [+ causal mask]) V`：把三步并成
# 一个 kernel。这一本先数 FLOP 和字节（causal 精确地数），在 CPU 上用 float64 走一遍在线 softmax 和 flash-decoding
# 的合并，在解释器里检查 Triton 的几级，在 GPU 上与 SDPA 的后端成对计时，最后让检查器抓住一个忘了缩放的 kernel。

# %%
from nbsetup import *
import json
import math
from hello_gpu.ops import load_op

op = load_op("attention")
spec = op.spec
ceilings = json.loads((REPO / "records" / "nvidia-h200" / "ceilings.json").read_text())
print("attention 的 rung：", ", ".join(r.id for r in op.rungs))

# %% [markdown]
# ## 解释：FLOP 与字节
#
# FLOP = 4 × B × H × D × 可见的 (query, key) 对数；causal 时逐行数（`spec.visible_keys`）。字节：Q、K、V 读一次，O 写一次。
# 下表从实测的上限算出下限，最后两列是物化（把 float32 分数写进显存、来回四次）的代价：

# %%
print(example("ch12_attention_bounds").render(ceilings))

# %%
for shape in ((1, 1, 1, 4096, 4096, 128, 1), (1, 1, 1, 100, 300, 64, 1), (1, 1, 1, 1000, 127, 64, 1)):
    d = spec.dims(shape)
    print(f"{d.label}: 可见对 {spec.visible_keys(d):>9,} / {d.q_len * d.kv_len:>10,}，"
          f"一个 key 都看不见的行 {spec.first_visible_rows(d)}")

# %% [markdown]
# ## 解释：在线 softmax，用 float64 走一遍
#
# 一行带着 (m, l, a) 走过一块块 key：m' = max(m, 块内最大值)，α = e^(m − m')，l' = α·l + Σ e^(s − m')，
# a' = α·a + Σ e^(s − m')·v。`t02` 文件头的例子：8 个分数、两块，V 取一列 1..8：

# %%
def online(scores, values, tile):
    m, l, a = -math.inf, 0.0, torch.zeros_like(values[0])
    for start in range(0, len(scores), tile):
        s, v = scores[start:start + tile], values[start:start + tile]
        new = max(m, s.max().item())
        alpha = math.exp(m - new) if m != -math.inf else 0.0
        p = torch.exp(s - new)
        l, a, m = l * alpha + p.sum().item(), a * alpha + p @ v, new
        print(f"  keys {start}..{start + len(s) - 1}: m={m:.3f} alpha={alpha:.3f} l={l:.3f} a={a.tolist()}")
    return a / l


scores = torch.tensor([1, 3, 2, 0, 4, 1, 1, 2], dtype=torch.float64)
values = torch.arange(1, 9, dtype=torch.float64)[:, None]
print("online   :", online(scores, values, 4).item())
print("三遍公式 :", (torch.softmax(scores, 0) @ values).item())

# %% [markdown]
# ## 解释：两段部分结果的合并（flash-decoding）
#
# 各段算出 (m_i, l_i, a_i)，令 m = max m_i：l = Σ l_i e^(m_i − m)，a = Σ a_i e^(m_i − m)，o = a / l（练习 5）：

# %%
row = torch.randn(1000, dtype=torch.float64) * 4
v = torch.randn(1000, 8, dtype=torch.float64)
parts = []
for chunk in (slice(0, 300), slice(300, 700), slice(700, 1000)):
    m = row[chunk].max()
    p = torch.exp(row[chunk] - m)
    parts.append((m, p.sum(), p @ v[chunk]))
m = max(part[0] for part in parts)
l = sum(part[1] * torch.exp(part[0] - m) for part in parts)
a = sum(part[2] * torch.exp(part[0] - m) for part in parts)
print("合并后与整行的最大差：", (a / l - torch.softmax(row, 0) @ v).abs().max().item())

# %% [markdown]
# ## 图
#
# ![物化与融合](../docs/course/figures/part2-attention-fusion.svg)
#
# ![一个 block 内部的分工](../docs/course/figures/part2-attention-split.svg)
#
# ![causal 的块跳过](../docs/course/figures/part2-causal-skip.svg)
#
# ![flash-decoding](../docs/course/figures/part2-flash-decoding.svg)
#
# ## 短代码：融合版的 Triton kernel
#
# `t02` 的循环体里 `alpha`、`row_sum`、`acc` 三行就是上面的公式：

# %%
_ = source(OPS / "attention" / "t02_fused_online_softmax.py")

# %% [markdown]
# 物化（`t01`）、融合（`t02`）、跳过 causal 的块（`t04`）与 flash-decoding（`t06`）对 float64 参考的检查
# （CPU 上在解释器里跑小形状：一个 decode 步跨两块 key、causal 且 S_q > S_kv、causal 方阵）：

# %%
dtypes = ("float32", "bfloat16") if GPU else ("float32", "float16")
shapes = ((2, 2, 1, 1, 127, 64), (1, 1, 1, 33, 31, 64, 1), (1, 2, 2, 127, 127, 64, 1))
for name in ("t01_materialised_scores", "t02_fused_online_softmax", "t04_causal_block_skipping", "t06_flash_decoding"):
    for dtype in dtypes:
        print(name, dtype)
        assert against_float64(rung("attention", name), "attention", shapes, dtype)

# %% [markdown]
# ## 观察：在 GPU 上
#
# prefill 4x32x32x4096x4096x128 bfloat16（causal 与非 causal）：`t04` 对 SDPA 默认后端与 flash 后端的成对计时；
# decode 1x32x8x1x32768x128：`t05` 与 `t06` 读 KV cache 的带宽占实测 copy 带宽的比例。

# %%
if gpu_only("attention prefill 对 SDPA 后端、decode 的 t05 / t06 带宽"):
    from hello_gpu.bench import compare, measure
    fn = rung("attention", "t04_causal_block_skipping")
    for shape in ((4, 32, 32, 4096, 4096, 128), (4, 32, 32, 4096, 4096, 128, 1)):
        q, k, v, causal = spec.make_inputs(shape, "bfloat16", seed=0, device="cuda")
        for base in ("v00_torch", "peer_sdpa_flash"):
            other = rung("attention", base)
            print(spec.dims(shape).label, f"t04 vs {base}:",
                  compare(lambda: other(q, k, v, causal), lambda: fn(q, k, v, causal), max_seconds=1))
    shape = (1, 32, 8, 1, 32768, 128)
    q, k, v, causal = spec.make_inputs(shape, "bfloat16", seed=0, device="cuda")
    copy = ceilings["ceilings"]["copy_bytes_per_s"]
    for name in ("t05_gqa_shared_kv_tiles", "t06_flash_decoding"):
        decode = rung("attention", name)
        seconds = measure(lambda: decode(q, k, v, causal), max_seconds=1).summary.median
        print(f"{name}: {spec.work(shape, 'bfloat16').bytes / seconds / copy:.2f} x copy 带宽")

# %% [markdown]
# 没有 GPU 也能对照：H200 上的 record `records/nvidia-h200/attention.bfloat16.json`（每一级在四个形状上的成对计时）
# 里的同样几个比较。`v00_torch` 是 SDPA 自己挑的后端（record 不记是哪一个），`peer_sdpa_flash` 固定在 flash 后端上：
#
# ![attention 阶梯，bfloat16，H200](../records/nvidia-h200/attention.bfloat16.svg)

# %%
record = json.loads((REPO / "records" / "nvidia-h200" / "attention.bfloat16.json").read_text())
entries = {(entry["variant"], entry["shape"]): entry for entry in record["entries"]}
for shape in ("4x32x32x4096x4096x128", "4x32x32x4096x4096x128x1"):
    for base in ("v00_torch", "peer_sdpa_flash"):
        pair = entries[("t04_causal_block_skipping", shape)]["speedups"][base]
        print(f"{shape} t04 vs {base}: {pair['value']:.3f}x [{pair['ci95'][0]:.3f}, {pair['ci95'][1]:.3f}]")
for name in ("t05_gqa_shared_kv_tiles", "t06_flash_decoding"):
    read = entries[(name, "1x32x8x1x32768x128")]["derived"]["gb_per_s"] * 1e9
    print(f"{name}: {read / ceilings['ceilings']['copy_bytes_per_s']:.2f} x copy 带宽（record）")

# %% [markdown]
# ## 练习
#
# 练习 3：**去掉缩放**。把 `t02` 里 `acc = acc * alpha[:, None] + tl.dot(` 改成 `acc = acc + tl.dot(`，交给检查器：
# 没有 GPU 时只有 `2x2x1x1x127x64`（两块 key）失败，一块之内的形状仍然通过。

# %%
t02 = (OPS / "attention" / "t02_fused_online_softmax.py").read_text()
broken = t02.replace("acc = acc * alpha[:, None] + tl.dot(", "acc = acc + tl.dot(")
assert broken != t02
report = hg.exercise("attention", broken, route="triton", dtype="float32", max_seconds=0.5)
report

# %% [markdown]
# 练习 4：只改一处，把 `BLOCK_N` 从 64 改成 32（先写下预测）。练习 1、2、5、6 见章节页。

# %%
mine = t02.replace("BLOCK_N = 64            # keys per step", "BLOCK_N = 32            # keys per step")
assert mine != t02
report = hg.exercise("attention", mine, route="triton", dtype="float32", max_seconds=0.5)
report

# %%
skipped()
