# %% [markdown]
# # 第 19 章 视觉模型的 profiling
#
# 动手版，配合章节页 `docs/course/part4/ch19-vision.md`。数出每个卷积的 FLOP 和强度、放到 H200 的 roofline 上，
# profile 整个网络，用 Amdahl 定律读份额，再亲手把 BatchNorm 折进卷积。装了 torchvision 时网络是 ResNet-50（随机权重），
# 否则是我们自己的 `SmallCNN`；没有 GPU 时在 CPU 上跑（时间是主机的，不是 GPU 的）。

# %%
from nbsetup import *
import copy
import json
from collections import Counter

from rich.console import Console

from hello_gpu.models.profile import REPLACEABLE, profile_steps, profile_table, profile_vision, vision_model

ceilings = json.loads((REPO / "records" / "nvidia-h200" / "ceilings.json").read_text(encoding="utf-8"))["ceilings"]
RIDGE = ceilings["matmul_flops_per_s"]["bfloat16"] / ceilings["copy_bytes_per_s"]
console = Console(width=150, color_system=None, force_jupyter=False)   # plain text in the notebook
print(f"H200 的 bf16 ridge（实测）：{RIDGE:.0f} FLOP/B")

# %% [markdown]
# ## 解释：网络里有什么

# %%
net, name = vision_model("cpu", torch.float32)
leaves = Counter(type(m).__name__ for m in net.modules() if not list(m.children()))
print(f"{name}：{sum(p.numel() for p in net.parameters()) / 1e6:.2f} M 个参数")
print("叶子模块：", dict(leaves))

# %% [markdown]
# ## 解释：卷积是一个隐式 GEMM
#
# 每个卷积的 FLOP 由 PyTorch 的 `FlopCounterMode` 数；字节按 bf16 的输入、权重、输出各一次算（GPU 上跑的 dtype）；
# 强度和 H200 的 ridge 比较：

# %%
from torch.utils.flop_counter import FlopCounterMode

images = torch.randn(2, 3, 224, 224, generator=torch.Generator().manual_seed(1))
convs = [(layer, m) for layer, m in net.named_modules() if isinstance(m, torch.nn.Conv2d)]
seen = {}
hooks = [m.register_forward_hook(lambda mod, inputs, out, layer=layer: seen.__setitem__(layer, (inputs[0], out.shape)))
         for layer, m in convs]
with torch.no_grad():
    net(images)
for hook in hooks:
    hook.remove()
torch_flops = {}
for layer, conv in convs:
    x, out_shape = seen[layer]
    with FlopCounterMode(display=False) as counter, torch.no_grad():
        conv(x)
    torch_flops[layer] = counter.get_total_flops()
    moved = 2 * (x.numel() + conv.weight.numel() + out_shape.numel())
    intensity = torch_flops[layer] / moved
    print(f"{layer:<22} {tuple(conv.weight.shape)!s:<18} {torch_flops[layer] / 1e9:7.3f} GFLOP  {intensity:7.1f} FLOP/B  "
          f"{'compute' if intensity > RIDGE else 'memory'}-bound")

# %% [markdown]
# ## 图
#
# ![ResNet-50 的一个 bottleneck block](../docs/course/figures/part4-resnet-block.svg)
#
# ## 短代码：每一类能拿什么替换
#
# `REPLACEABLE`（`models/profile.py`），也是 `hello-gpu model profile` 表的最后一列：

# %%
for category, what in REPLACEABLE.items():
    print(f"{category:<18} {what}")

# %% [markdown]
# ## 观察：整个网络的 profile
#
# GPU 上：bf16，batch 8，224x224（kernel 按名字归类）；CPU 上：batch 2，64x64（每个叶子模块的主机时间）。

# %%
if gpu_only("视觉模型的 profile（bf16，batch 8，224x224）"):
    profile = profile_vision(device="cuda", dtype=torch.bfloat16, batch=8, size=224, steps=5)
else:
    profile = profile_vision(batch=2, size=64, steps=2)
for table in profile_table(profile, top=12):
    console.print(table)

# %% [markdown]
# ## 解释：Amdahl 再来一次
#
# 卷积不花时间时整个网络最多快多少，norm 和 elementwise 都不花时间时又是多少：

# %%
conv_share = profile.share("convolution")
ours_share = profile.share("norm") + profile.share("elementwise")
print(f"convolution {conv_share:.1%}：它不花时间时最多 {1 / (1 - conv_share):.2f}x")
print(f"norm + elementwise {ours_share:.1%}：它们不花时间时最多 {1 / (1 - ours_share):.2f}x")

# %% [markdown]
# ## 观察：channels_last（GPU）
#
# tensor core 卷积偏好 NHWC 的内存布局；NCHW 的输入可能要先转置。同一个网络换成 channels_last 再 profile 一次：

# %%
if gpu_only("NCHW 与 channels_last 的 profile 对比（bf16，batch 8，224x224）"):
    net_gpu, title = vision_model("cuda", torch.bfloat16)
    batch = torch.randn(8, 3, 224, 224, device="cuda", dtype=torch.bfloat16)
    with torch.no_grad():
        before = profile_steps(lambda: net_gpu(batch), steps=5, title=title)
        net_gpu = net_gpu.to(memory_format=torch.channels_last)
        batch_nhwc = batch.contiguous(memory_format=torch.channels_last)
        after = profile_steps(lambda: net_gpu(batch_nhwc), steps=5, title=f"{title}, channels_last")
    for result in (before, after):
        print(f"{result.title}: {result.wall_seconds / result.steps * 1e3:.3f} ms 一次 forward，"
              f"convolution {result.share('convolution'):.1%}，前三个 kernel：{[row.name for row in result.rows[:3]]}")

# %% [markdown]
# ## 练习
#
# 练习 1：补全 `conv_flops(conv, output_shape)`（一个卷积的 FLOP，2·M·N·K，见章节页），和 PyTorch 数的对照。

# %%
def conv_flops(conv: torch.nn.Conv2d, output_shape: torch.Size):
    """练习 1：返回这个卷积一次 forward 的 FLOP。"""
    return None


mine = [conv_flops(conv, seen[layer][1]) for layer, conv in convs]
_ = check_answer("练习 1", None if None in mine else sum(mine), sum(torch_flops.values()), rel=1e-6)

# %% [markdown]
# 练习 2：补全 `fold(conv, bn)`：返回一个带偏置的新 `Conv2d`，输出与 `bn(conv(x))` 相同（`bn` 在 eval 模式）。
# 检查在 float64 下做，BN 的统计量和参数先换成随机数（初始的 0 和 1 会让错误的折叠也碰巧对）。

# %%
def fold(conv: torch.nn.Conv2d, bn: torch.nn.BatchNorm2d):
    """练习 2：返回折叠了 bn 的卷积。"""
    return None


pair = copy.deepcopy(torch.nn.Sequential(*[m for m in net.modules() if isinstance(m, (torch.nn.Conv2d, torch.nn.BatchNorm2d))][:2]))
conv, bn = pair[0].double().eval(), pair[1].double().eval()
with torch.no_grad():
    generator = torch.Generator().manual_seed(2)
    for tensor in (bn.running_mean, bn.weight, bn.bias):
        tensor.copy_(torch.randn(tensor.shape, generator=generator, dtype=torch.float64))
    bn.running_var.copy_(torch.rand(bn.running_var.shape, generator=generator, dtype=torch.float64) + 0.5)
    folded = fold(copy.deepcopy(conv), copy.deepcopy(bn))
    x = torch.randn(2, conv.in_channels, 32, 32, generator=generator, dtype=torch.float64)
    gap = None if folded is None else (folded.double()(x) - bn(conv(x))).abs().max().item()
print("练习 2：还没有答案" if gap is None else f"练习 2：{'对' if gap < 1e-9 else '不对'}（最大误差 {gap:.3g}）")

# %% [markdown]
# 练习 3：用上面的 profile，"norm 和 elementwise 都不花时间"与"卷积不花时间"时，整个网络最多各快多少？

# %%
my_others_free, my_conv_free = None, None
_ = check_answer("练习 3，norm + elementwise", my_others_free, 1 / (1 - ours_share), rel=0.01)
_ = check_answer("练习 3，convolution", my_conv_free, 1 / (1 - conv_share), rel=0.01)

# %% [markdown]
# 练习 4、5 见章节页（GPU 上读 kernel 名与 channels_last；一张诚实的替换表）。

# %%
skipped()
