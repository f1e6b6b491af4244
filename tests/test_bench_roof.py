"""The roof (issue 17, part 5): always armed, comparing like with like, never flagging an honest kernel.

The figures are the H200's (records/nvidia-h200/ceilings.json and issue 17): a 1 GiB copy at 4.25 TB/s,
torch.sum reading 4.15 TB/s, a quick (128 MiB) copy at 3.95 TB/s, and an honest two-stage reduce_sum
reading 4.28 TB/s that the old rule marked suspect.
"""

import pytest

from hello_gpu.bench.ceilings import Ceilings
from hello_gpu.bench.roof import DATASHEET_MARGIN, current_roof, mixed_bandwidth, roof_for
from hello_gpu.bench.specs import lookup
from hello_gpu.bench.work import Roof, Work, WorkModelError, rates

H200 = lookup("NVIDIA H200")
N = 2**28
REDUCE_SUM = Work(read_bytes=4 * N, written_bytes=4, flops=N, dtype="float32")
REDUCE_SUM_UNSPLIT = Work(bytes=4 * N + 4, flops=N, dtype="float32")      # as reduce_sum's spec states it
VECTOR_ADD = Work(read_bytes=8 * N, written_bytes=4 * N, flops=N, dtype="float32")
HONEST_READ = 4.28e12


def full():
    return Ceilings("NVIDIA H200", "cuda-driver-13000", copy_bytes_per_s=4.25e12, read_bytes_per_s=4.15e12,
                    matmul_flops_per_s={"float32": 51.3e12, "bfloat16": 767e12}, complete=True)


def quick():
    return Ceilings("NVIDIA H200", "cuda-driver-13000", copy_bytes_per_s=3.95e12, read_bytes_per_s=3.9e12,
                    matmul_flops_per_s={"float32": 50e12}, complete=True, quick=True)


def seconds_at(work: Work, bytes_per_s: float) -> float:
    return work.bytes / bytes_per_s


@pytest.mark.parametrize("ceilings", [full(), quick(), None], ids=["full ceilings", "quick ceilings", "datasheet only"])
@pytest.mark.parametrize("work", [REDUCE_SUM, REDUCE_SUM_UNSPLIT], ids=["split stated", "split unknown"])
def test_the_honest_reduce_sum_of_issue_17_is_never_suspect(ceilings, work):
    result = rates(work, seconds_at(work, HONEST_READ), roof=roof_for(work, ceilings, H200))
    assert result.suspect is None, result.suspect
    assert result.bound and "GB/s" in result.bound


@pytest.mark.parametrize("ceilings", [full(), quick(), None], ids=["full ceilings", "quick ceilings", "datasheet only"])
def test_a_kernel_that_moved_half_its_bytes_is_suspect_under_every_roof(ceilings):
    claimed = rates(VECTOR_ADD, seconds_at(VECTOR_ADD, 2 * 4.25e12), roof=roof_for(VECTOR_ADD, ceilings, H200))
    assert claimed.suspect and "cold cache" in claimed.suspect


def test_without_measured_ceilings_the_datasheet_is_the_roof_never_nothing():
    roof = roof_for(VECTOR_ADD, None, H200)
    assert roof.bandwidth == pytest.approx(4.8e12 * DATASHEET_MARGIN)
    assert "datasheet" in roof.bandwidth_source and roof.copy_bandwidth is None
    flagged = rates(VECTOR_ADD, seconds_at(VECTOR_ADD, 5.2e12), roof=roof)
    assert flagged.suspect and "datasheet 4800 GB/s" in flagged.suspect
    # The compute side too: a float32 rate above the CUDA-core peak.
    matmul = Work(flops=2 * 4096**3, dtype="float32", read_bytes=3 * 4096**2 * 4, written_bytes=0)
    fast = rates(matmul, 2 * 4096**3 / 80e12, roof=roof_for(matmul, None, H200), cold=False)
    assert fast.suspect and "TFLOP/s" in fast.suspect


def test_where_both_are_known_the_lower_bound_counts_and_says_so():
    ceilings = Ceilings("x", "y", copy_bytes_per_s=4.6e12, read_bytes_per_s=4.7e12)     # measured x 1.10 > datasheet
    roof = roof_for(REDUCE_SUM, ceilings, H200)
    assert roof.bandwidth == pytest.approx(4.8e12 * DATASHEET_MARGIN)
    assert "datasheet 4800 GB/s of NVIDIA H200 SXM x 1.02 (the bound)" in roof.bandwidth_source
    assert "measured read" in roof.bandwidth_source
    measured = roof_for(REDUCE_SUM, full(), H200)
    assert measured.bandwidth == pytest.approx(4.25e12 * 1.10)    # read 4.15 < copy 4.25: the copy's, x 1.10


def test_the_mix_runs_from_the_read_ceiling_to_the_copy_ceiling():
    read, copy = 4.6e12, 4.2e12
    assert mixed_bandwidth(read, copy, 0.0) == pytest.approx(read)
    assert mixed_bandwidth(read, copy, 0.5) == pytest.approx(copy)
    thirds = mixed_bandwidth(read, copy, 1 / 3)
    assert copy < thirds < read
    assert mixed_bandwidth(read, copy, None) == read                    # unknown split: the most lenient
    # A read ceiling below the copy's (torch.sum on the H200) is the copy's: reads are never slower.
    assert mixed_bandwidth(4.15e12, 4.25e12, 0.0) == pytest.approx(4.25e12)


def test_quick_ceilings_get_a_wider_margin():
    full_roof, quick_roof = roof_for(REDUCE_SUM, full(), None), roof_for(REDUCE_SUM, quick(), None)
    assert quick_roof.bandwidth / 3.95e12 > full_roof.bandwidth / 4.25e12
    assert "(quick)" in quick_roof.bandwidth_source


def test_a_partial_set_without_the_read_ceiling_does_not_bound_reads_by_the_copy():
    partial = Ceilings("x", "y", copy_bytes_per_s=3.95e12)
    assert roof_for(REDUCE_SUM, partial, None).bandwidth is None          # nothing honest to say: no bound
    assert roof_for(REDUCE_SUM, partial, H200).bandwidth == pytest.approx(4.8e12 * DATASHEET_MARGIN)
    half = Work(read_bytes=4e9, written_bytes=4e9)
    assert roof_for(half, partial, None).bandwidth == pytest.approx(3.95e12 * 1.10)


def test_rates_keep_their_old_arguments_and_refuse_both_ways_at_once():
    old = rates(REDUCE_SUM, 1e-3, bandwidth_ceiling=4.3e12, compute_ceiling=51e12)
    assert old.bandwidth_fraction == pytest.approx(REDUCE_SUM.bytes / 1e-3 / 4.3e12)
    with pytest.raises(ValueError, match="not both"):
        rates(REDUCE_SUM, 1e-3, bandwidth_ceiling=4.3e12, roof=Roof())
    assert rates(REDUCE_SUM, 1e-6, roof=Roof()).suspect is None          # an empty roof: nothing to hold against


def test_on_a_machine_without_a_gpu_the_roof_is_empty():
    from hello_gpu.runtime.device import gpu_vendor
    if gpu_vendor() is not None:
        pytest.skip("this machine has a GPU: the roof is the device's (tests/gpu)")
    assert current_roof(VECTOR_ADD) == Roof()


def test_the_work_split_must_add_up_and_records_stay_as_they_were():
    assert Work(read_bytes=8, written_bytes=4).bytes == 12
    assert Work(bytes=12, written_bytes=4).read_bytes == 8
    assert Work(bytes=12, read_bytes=12).written_fraction == 0
    with pytest.raises(WorkModelError, match="must add up"):
        Work(bytes=10, read_bytes=8, written_bytes=4)
    with pytest.raises(WorkModelError, match="more than bytes"):
        Work(bytes=4, written_bytes=8)
    with pytest.raises(WorkModelError, match="must not be negative"):
        Work(read_bytes=-1, written_bytes=4)
    assert Work(bytes=12, flops=3).to_dict() == {"bytes": 12, "flops": 3, "dtype": None}   # the record schema's keys
    stated = REDUCE_SUM_UNSPLIT.with_written(4)
    assert stated.read_bytes == 4 * N and stated.to_dict()["written_bytes"] == 4


def test_a_record_with_a_split_work_model_validates():
    from hello_gpu.bench.records import new_record
    from hello_gpu.bench.records.schema import validate_record
    from hello_gpu.bench.records.store import timing_from_summary
    from hello_gpu.bench.stats import summarize
    entry = {"variant": "t01", "role": "candidate", "source": None, "shape": "(268435456,)", "dtype": "float32",
             "correctness": None, "timing": timing_from_summary(summarize([1e-3, 1.01e-3, 0.99e-3]), cache="cold",
                                                                 graph=False, clock="device-events"),
             "work": REDUCE_SUM.to_dict(), "derived": rates(REDUCE_SUM, 1e-3, roof=roof_for(REDUCE_SUM, full(), H200)).to_dict()}
    record = new_record("reduce_sum", "benchmark", device={"slug": "nvidia-h200", "name": "NVIDIA H200", "arch": "sm_90"},
                        environment={"git": {"commit": "0123456789abcdef", "dirty": False}}, entries=[entry],
                        created="2025-06-01T12:00:00Z")
    assert validate_record(record) == []
    record["entries"][0]["work"]["read_bytes"] = -1
    assert any("read_bytes" in problem for problem in validate_record(record))
