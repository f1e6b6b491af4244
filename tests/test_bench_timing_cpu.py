"""measure() and compare() without a GPU: wall clock, said so; bad input refused."""

import time

import pytest

from hello_gpu.bench import Work, compare, measure


def busy(seconds):
    def spin():
        end = time.perf_counter() + seconds
        while time.perf_counter() < end:
            pass
    return spin


def test_measure_on_cpu_uses_the_wall_clock_and_says_so():
    result = measure(busy(200e-6), work=Work(bytes=1e6), device="cpu", max_seconds=0.5)
    assert result.clock == "wall" and "wall clock" in result.notes[0]
    assert 150e-6 < result.median < 2e-3
    assert len(result.samples) == result.summary.count >= 10
    assert result.rates.gb_per_s == pytest.approx(1e6 / result.median / 1e9)
    assert "median" in str(result)


def test_measure_rotates_inputs():
    seen = []
    measure(lambda x: seen.append(x), inputs=[(1,), (2,), (3,)], device="cpu", max_seconds=0.1)
    assert set(seen) == {1, 2, 3}


def test_measure_refuses_bad_input():
    with pytest.raises(TypeError, match="needs a callable"):
        measure(42)
    with pytest.raises(ValueError, match="cache must be one of cold, cold-clean, warm; got 'lukewarm'"):
        measure(lambda: None, cache="lukewarm")
    with pytest.raises(TypeError, match="hello_gpu.bench.Work"):
        measure(lambda: None, work={"bytes": 1})
    with pytest.raises(ValueError, match="non-empty list of argument tuples"):
        measure(lambda x: None, inputs=[1, 2])


def test_an_error_in_the_function_propagates_and_nothing_is_measured():
    def broken():
        raise RuntimeError("kernel exploded")
    with pytest.raises(RuntimeError, match="kernel exploded"):
        measure(broken, device="cpu")


def test_compare_on_cpu_finds_the_faster_one():
    result = compare(busy(400e-6), busy(200e-6), max_seconds=1.0, min_rounds=10)
    assert result.verdict == "faster" and 1.5 < result.speedup.value < 2.5
    assert result.rounds >= 10 and "ABBA" in str(result)
    same = compare(busy(200e-6), busy(200e-6), max_seconds=1.0, margin=0.1)
    assert same.verdict == "within noise"
    with pytest.raises(TypeError, match="candidate must be callable"):
        compare(busy(1e-6), None)


class _FakeCuda:
    """torch.cuda's spin, events and synchronize, with the spin's end reported as passed `behind` times."""

    def __init__(self, behind: int):
        self.behind, self.spins = behind, []
        fake = self

        class Event:
            def record(self):
                pass

            def query(self):
                fake.behind -= 1
                return fake.behind >= 0

        self.Event = Event

    def _sleep(self, cycles):
        self.spins.append(cycles)

    def synchronize(self):
        pass


def _hold_with(monkeypatch, behind: int):
    import torch
    from hello_gpu.bench import timing
    fake = _FakeCuda(behind)
    for name in ("_sleep", "Event", "synchronize"):
        monkeypatch.setattr(torch.cuda, name, getattr(fake, name), raising=False)
    queued = []
    hold = timing.Hold()
    hold.timed(lambda: queued.append(1), calls=10)
    return timing, fake, hold, queued


def test_a_host_slower_than_the_spin_gets_the_batch_timed_again_with_twice_the_spin(monkeypatch):
    timing, fake, hold, queued = _hold_with(monkeypatch, behind=2)
    base = timing.HOLD_CYCLES_PER_CALL * 10
    assert fake.spins == [base, 2 * base, 4 * base] and len(queued) == 3
    assert hold.doublings == 2 and hold.behind == 0
    [note] = hold.notes()
    assert "doubled 2 time(s), to ~200 us a call" in note


def test_the_spin_stops_growing_at_its_cap_and_the_notes_say_host_time_is_in(monkeypatch):
    timing, fake, hold, queued = _hold_with(monkeypatch, behind=100)
    assert hold.cycles_per_call == timing.MAX_HOLD_CYCLES_PER_CALL and len(queued) == hold.doublings + 1
    assert hold.behind == 1
    assert any("include host time" in note for note in hold.notes())


def test_a_host_that_keeps_up_is_timed_once_with_no_notes(monkeypatch):
    _, fake, hold, queued = _hold_with(monkeypatch, behind=0)
    assert len(queued) == 1 and hold.doublings == 0 and hold.notes() == []


def test_the_flush_follows_the_cache_setting():
    from hello_gpu.bench.timing import _Flusher
    assert _Flusher.for_cache("warm", 60 * 2**20) is None           # no buffer is made for a warm run
    with pytest.raises(ValueError, match="cache must be one of cold, cold-clean, warm; got 'tepid'"):
        _Flusher.for_cache("tepid", 60 * 2**20)


def test_an_enqueue_only_host_timing_refuses_a_batch_that_could_fill_the_launch_queue():
    from hello_gpu.bench.timing import ENQUEUE_MAX_CALLS, host_times
    with pytest.raises(ValueError, match="launch queue"):
        host_times({"f": lambda: None}, rounds=1, calls=ENQUEUE_MAX_CALLS + 1, drain=False)
