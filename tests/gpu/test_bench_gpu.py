"""GPU tier for measurement (``pytest -m gpu``): measure, compare and ceilings on the real device."""

import time

import pytest
import torch

from hello_gpu.bench import Work, compare, measure
from hello_gpu.bench.ceilings import Ceilings

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a GPU")]

# A measured H200 copy ceiling would do; these tests must not depend on a cached one.
H200_LIKE = Ceilings("test", "test", copy_bytes_per_s=4.3e12, read_bytes_per_s=4.0e12,
                     matmul_flops_per_s={"bfloat16": 7.9e14}, complete=True)


def big_pair(elements=2**26):
    generator = torch.Generator(device="cuda").manual_seed(torch.seed() % 2**31)
    source = torch.randn(elements, device="cuda", generator=generator)
    return source, torch.empty_like(source)


def test_cold_copy_is_below_the_copy_ceiling_and_converges():
    source, target = big_pair()
    result = measure(lambda: target.copy_(source), work=Work(bytes=2 * source.nbytes), ceilings=H200_LIKE)
    assert result.clock == "device-events" and result.cache == "cold"
    assert result.flush_bytes >= 2 * 60 * 2**20 * 0.9          # at least twice the L2
    assert 1.0e12 < result.rates.gb_per_s * 1e9 < 1.05 * 4.3e12
    assert result.suspect is None
    assert result.summary.relative_standard_error < 0.02
    assert torch.equal(target, source)


def test_warm_small_working_set_beats_cold():
    source, target = big_pair(2**20)                              # 4 MB: fits in L2
    cold = measure(lambda: target.copy_(source), cache="cold")
    warm = measure(lambda: target.copy_(source), cache="warm")
    assert warm.median < cold.median


def test_a_clean_flush_leaves_no_dirty_lines_to_write_back():
    # A 16 MB copy allocates 32 MB of L2 lines: after the zeroing flush each evicts a modified line,
    # after the clean flush a clean one. The copy does the same work; only other data's write-back goes.
    source, target = big_pair(2**22)
    dirty = measure(lambda: target.copy_(source), cache="cold", work=Work(bytes=2 * source.nbytes), ceilings=H200_LIKE)
    clean = measure(lambda: target.copy_(source), cache="cold-clean", work=Work(bytes=2 * source.nbytes),
                    ceilings=H200_LIKE)
    assert clean.cache == "cold-clean" and clean.flush_bytes == dirty.flush_bytes
    assert torch.equal(target, source)
    assert clean.median < dirty.median


def test_overstated_work_is_marked_suspect():
    source, target = big_pair()
    result = measure(lambda: target.copy_(source), work=Work(bytes=20 * source.nbytes), ceilings=H200_LIKE)
    assert result.suspect and "copy bandwidth" in result.suspect
    assert "SUSPECT" in str(result)


def test_graph_replay_with_rotating_inputs_cuts_launch_overhead():
    sets = [tuple(torch.randn(1, device="cuda") for _ in range(3)) for _ in range(4)]
    add = lambda a, b, c: torch.add(a, b, out=c)  # noqa: E731
    plain = measure(add, inputs=sets, cache="warm")
    graphed = measure(add, inputs=sets, cache="warm", graph=True)
    assert graphed.graph and "rotating over 4 input sets" in graphed.notes[0]
    assert graphed.median < plain.median
    for a, b, c in sets:
        torch.testing.assert_close(c, a + b)


def test_compare_sees_double_the_bytes_as_slower_and_the_same_as_noise():
    source, target = big_pair()
    double, double_target = big_pair(2 * source.numel())
    one = lambda: target.copy_(source)  # noqa: E731
    two = lambda: double_target.copy_(double)  # noqa: E731
    slower = compare(one, two)
    assert slower.verdict == "slower" and 0.4 < slower.speedup.value < 0.6
    same = compare(one, one, margin=0.03)
    assert same.verdict == "within noise"


def test_quick_ceilings_are_in_the_h200_range(tmp_path, monkeypatch):
    monkeypatch.setenv("HG_CACHE_DIR", str(tmp_path / "kernels"))
    from hello_gpu.bench.ceilings import cached_ceilings, measure_ceilings
    ceilings = measure_ceilings(quick=True, progress=False)
    assert ceilings.complete and cached_ceilings() == ceilings
    name = torch.cuda.get_device_name()
    if "H200" in name:
        assert 3.5e12 < ceilings.copy_bytes_per_s < 4.8e12
        assert 2.0e14 < ceilings.matmul_flops_per_s["bfloat16"] < 1.0e15
        assert 2.0e13 < ceilings.matmul_flops_per_s["float32"] < 7.0e13
    assert ceilings.launch_overhead_s < 50e-6


def busy_wait(seconds: float) -> None:
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        pass


def test_a_callable_slow_on_the_host_is_timed_as_its_kernel():
    """200 us of host work a call, four times the GPU's default spin: without a longer spin each call
    would time as ~200 us of host time; the spin is doubled until the host keeps up, and a note says so."""
    a = torch.randn(2**16, device="cuda")
    out = torch.empty_like(a)
    kernel_only = measure(lambda: torch.add(a, a, out=out), cache="warm", max_seconds=0.5)

    def slow_host():
        busy_wait(200e-6)
        torch.add(a, a, out=out)
    slow = measure(slow_host, cache="warm", max_seconds=1.0)
    assert slow.median < 3 * kernel_only.median + 5e-6, (slow.median, kernel_only.median, slow.notes)
    assert any("spin was doubled" in note for note in slow.notes), slow.notes
    paired = compare(lambda: torch.add(a, a, out=out), slow_host, cache="warm", max_seconds=1.0)
    assert 0.7 < paired.speedup.value < 1.4, (str(paired), paired.notes)


def test_host_times_tells_the_hosts_time_from_the_gpus():
    """A 1 ms spin per call: drained, the batch is timed by the GPU (>= 1 ms a call); enqueue-only, by the
    host's launch path (well under 1 ms a call)."""
    from hello_gpu.bench.timing import host_times
    spin = lambda: torch.cuda._sleep(2_000_000)      # noqa: E731 - ~1 ms at the H200's 1.98 GHz
    drained = host_times({"spin": spin}, rounds=3, calls=20, warmup_calls=2)["spin"]
    enqueued = host_times({"spin": spin}, rounds=3, calls=20, warmup_calls=2, drain=False)["spin"]
    assert min(drained) > 0.5e-3, drained
    assert max(enqueued) < 0.1e-3, enqueued
