"""第 5 章：同一个 kernel，三种计时。

    python examples/course/ch05_timing.py            # 默认 2^24 个 float32
    python examples/course/ch05_timing.py --n 1048576

1. 一对 event 包住一次调用（朴素做法），连做五次：第一次含首次调用的代价，其余的也各不相同；
   另外用主机时钟量一次不同步的 launch，看它量到的是什么。
2. measure()：预热、冷 L2、GPU 上的 spin 挡住主机、重复到中位数稳定，给出中位数、95% 区间与 GB/s。
3. compare()：与 torch.add 成对、交错（ABBA）计时，加速比取每轮比值的中位数，附 bootstrap 区间。

没有 GPU 时：kernel 只为 sm_90 编译作检查；device event、L2 冲刷和 spin 都跳过，
measure() 与 compare() 改用主机时钟量 CPU 上的 torch.add，统计方法不变。
"""

import argparse
import time
from pathlib import Path

import torch

import hello_gpu as hg
from hello_gpu.bench import Work, compare, measure

KERNEL = Path(__file__).resolve().parents[1] / "vector_add.hip"


def one_event_pair(launch) -> float:
    """朴素计时：一对 device event、一次调用、同步，返回秒。"""
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    launch()
    end.record()
    end.synchronize()
    return start.elapsed_time(end) / 1e3


def main(n: int = 2**24, max_seconds: float = 2.0) -> None:
    add = hg.hip(KERNEL.read_text(), entry="vector_add")
    print(add)                                        # 没有 GPU 时：compiled for sm_90 as a check
    work = Work(read_bytes=8 * n, written_bytes=4 * n)   # 读 a、b，写 out：每个元素 12 字节
    if not torch.cuda.is_available():
        print("没有 GPU：跳过 event 计时、L2 冲刷与 spin；下面是主机时钟量的 CPU torch.add，只演示统计。")
        a, b = torch.randn(n), torch.randn(n)
        c = torch.empty_like(a)
        print("measure :", measure(lambda: torch.add(a, b, out=c), max_seconds=max_seconds))
        print("compare :", compare(lambda: torch.add(a, b, out=c), lambda: torch.add(a, b, out=c),
                                   max_seconds=max_seconds))
        return
    a = torch.randn(n, device="cuda")
    b, c = torch.randn_like(a), torch.empty_like(a)
    launch = add.prepare(a, b, c)                     # 检查、打包一次；之后每次调用只剩 launch

    naive = [one_event_pair(launch) for _ in range(5)]
    print("1. 一对 event，五次 (us):", ", ".join(f"{s * 1e6:.1f}" for s in naive))
    torch.cuda.synchronize()
    begin = time.perf_counter()
    launch()                                          # 异步：返回时 kernel 多半还没跑完
    print(f"   主机时钟、不同步 (us): {(time.perf_counter() - begin) * 1e6:.1f}   <- 这是 launch，不是 kernel")
    torch.cuda.synchronize()

    m = measure(launch, work=work, max_seconds=max_seconds)
    spread = (m.summary.p80 - m.summary.p20) / m.median
    print(f"2. measure(): {m}\n   p20–p80 占中位数的 {spread:.1%}，预热 {m.warmup_calls} 次，停止原因：{m.stopped_by}")

    r = compare(lambda: torch.add(a, b, out=c), launch)
    print(f"3. compare(torch.add, kernel): {r}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=2**24, help="元素个数（默认 2^24）")
    main(parser.parse_args().n)
