"""Hardware counters (CPU tier): ncu and rocprofv3 output parsed, and both tools run as fake executables on PATH.

The fake tools are small Python scripts that print (ncu) or write (rocprofv3) the fixture files of
tests/fixtures/profile/, so the real child-process code runs: command line, PATH lookup, exit
status, output parsing, and every way of failing without a crash. The ncu files are the real output
of ncu (CUDA 13) on the H200; the rocprofv3 files are hand-made (see the README there).
"""

from __future__ import annotations

import csv
import json
import os
import sqlite3
import stat
import sys
import textwrap
from pathlib import Path

import pytest

from hello_gpu.profile import counters_for_rungs, ncu, rocprof
from hello_gpu.profile.counters import aggregate_launches
from hello_gpu.runtime.device import gpu_vendor

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "profile"
V01 = (FIXTURES / "ncu_raw_vector_add_v01.csv").read_text()             # coalesced: thread i adds element i
V02 = (FIXTURES / "ncu_raw_vector_add_v02.csv").read_text()             # strided: each thread adds a chunk
V04 = (FIXTURES / "ncu_raw_vector_add_v04.csv").read_text()             # 128-bit loads
COMPILED_SUM = (FIXTURES / "ncu_raw_reduce_sum_v00_compile.csv").read_text()   # torch.compile: two Triton kernels
ALL_METRICS = list(ncu.CORE_METRICS) + list(ncu.STALL_METRICS)
DENIED = (FIXTURES / "ncu_permission_error.txt").read_text()


# ------------------------------------------------------------------------------------------ values


@pytest.mark.parametrize("text, value", [("134,217,728", 134217728.0), ("92.41", 92.41), ("1,048,576.50", 1048576.5),
                                         ("n/a", None), ("", None), ("  ", None), ("inf", None), ("nan", None),
                                         ("(!) 12", None), (None, None)])
def test_parse_value(text, value):
    assert ncu.parse_value(text) == value


@pytest.mark.parametrize("value, unit, base", [(65.888, "usecond", 65.888e-6), (65888, "nsecond", 65.888e-6),
                                               (2.5, "msecond", 2.5e-3), (134.2, "Mbyte", 134.2e6),
                                               (4.19, "Msector", 4.19e6), (3, "Kbyte", 3000.0), (92.4, "%", 92.4),
                                               (41.3, "", 41.3), (7, "byte", 7.0), (None, "byte", None)])
def test_units_become_bytes_counts_and_seconds(value, unit, base):
    result = ncu.to_base_unit(value, unit)
    assert result is None if base is None else result == pytest.approx(base)


# ------------------------------------------------------------------------------------------ ncu parsing


def test_ncu_raw_csv_one_dict_per_launch_in_base_units():
    launches = ncu.parse_ncu_csv(V01)
    assert len(launches) == 3                                   # ==PROF== lines and the units row are not launches
    first = launches[0]
    assert first["name"] == "void vector_add<float>(const T1 *, const T1 *, T1 *, long long)"   # ncu's spelling
    assert first["grid"] == "(65536, 1, 1)" and first["block"] == "(256, 1, 1)"
    assert first["dram_read_bytes"] == 134_231_808             # "134,231,808" (unit "byte")
    assert first["dram_write_bytes"] == 55_151_616
    assert first["duration_seconds"] == pytest.approx(58_528e-9)   # "58,528", unit "ns" -> seconds
    assert (first["global_load_sectors"], first["global_load_requests"]) == (4_194_304, 1_048_576)
    assert first["achieved_occupancy_pct"] == pytest.approx(73.93)
    assert first["l2_hit_rate_pct"] == pytest.approx(33.83)
    assert first["stall:long_scoreboard"] == pytest.approx(41.14)


def test_only_the_metrics_asked_for_are_read_from_the_raw_page():
    """The raw page holds 321 columns: ~300 are ncu's own (device__attribute_*, launch__*, profiler__*,
    the .avg/.min/.max of each .sum); none of them may reach a record."""
    header = next(line for line in V01.splitlines() if line.startswith('"ID"'))
    assert header.count('","') + 1 == 321 and '"device__attribute_display_name"' in header
    assert '"dram__bytes_read.avg"' in header and '"launch__registers_per_thread"' in header
    [kernel] = ncu.counters_from_output(V01, 0, calls=3, metrics=ALL_METRICS).kernels
    assert kernel.extra == {}
    assert set(kernel.stalls) == set(ncu.STALL_REASONS)
    asked = ncu.parse_ncu_csv(V01, ["launch__registers_per_thread"])[0]      # another metric, asked for by name
    assert asked["launch__registers_per_thread"] == 16 and "device__attribute_clock_rate" not in asked


def test_ncu_counters_per_kernel_sum_bytes_and_weight_percentages():
    result = ncu.counters_from_output(V01, 0, calls=3, metrics=ALL_METRICS)
    assert result.available and result.tool == "ncu" and result.note is None and result.missing_metrics == []
    [kernel] = result.kernels
    assert kernel.launches == 3 and kernel.key == "vector_add"
    assert kernel.dram_read_bytes == 134_231_808 + 134_226_688 + 134_227_200
    assert kernel.dram_write_bytes == 55_151_616 + 55_452_672 + 55_282_176
    durations = [58_528, 57_344, 58_144]
    occupancy = [73.93, 73.80, 73.95]
    assert kernel.duration_seconds == pytest.approx(sum(durations) * 1e-9)
    assert kernel.achieved_occupancy_pct == pytest.approx(sum(o * d for o, d in zip(occupancy, durations)) / sum(durations))
    assert kernel.top_stalls()[0] == ("long_scoreboard", pytest.approx(40.96, abs=0.01))
    assert [reason for reason, _ in kernel.top_stalls()] == ["long_scoreboard", "wait", "short_scoreboard"]
    assert result.dram_bytes_per_call() == pytest.approx(189_524_053.33)


def test_the_strided_rung_moves_more_dram_bytes_and_sectors_per_request_on_the_h200():
    """Issue 6, part 5: on the H200, the strided vector-add rung (v02_strided_chunks: thread t adds
    elements 16t .. 16t+15, so the lanes of one warp load are 64 bytes apart and touch 32 sectors)
    shows measurably more DRAM traffic and sectors per request than the coalesced one
    (v01_thread_per_element). Real ncu output of 3 calls each at 2^24 float32."""
    coalesced = ncu.counters_from_output(V01, 0, calls=3, metrics=ALL_METRICS)
    strided = ncu.counters_from_output(V02, 0, calls=3, metrics=ALL_METRICS)
    [v01], [v02] = coalesced.kernels, strided.kernels
    assert (v01.key, v02.key) == ("vector_add", "vector_add_chunked")
    # Sectors per request: 4 (32 lanes x 4 bytes = 128 bytes = 4 sectors) against 32 (one sector per lane).
    assert coalesced.summary()["sectors_per_request"] == pytest.approx(4.0)
    assert strided.summary()["sectors_per_request"] == pytest.approx(32.0)
    assert v01.global_load_requests == v02.global_load_requests == 3 * 2**20    # the same loads, 8x the sectors
    # DRAM bytes per call: 190 MB against 255 MB (the work model counts 201 MB): 1.34x.
    assert coalesced.dram_bytes_per_call() == pytest.approx(189_524_053.33)
    assert strided.dram_bytes_per_call() == pytest.approx(254_689_877.33)
    assert strided.dram_bytes_per_call() > 1.3 * coalesced.dram_bytes_per_call()
    assert strided.kernels[0].dram_read_bytes / 3 > 1.3 * coalesced.kernels[0].dram_read_bytes / 3
    # And the warps of the strided rung wait on the load/store queue, not on memory latency.
    assert (coalesced.summary()["top_stall"], strided.summary()["top_stall"]) == ("long_scoreboard", "lg_throttle")


def test_128_bit_loads_read_four_times_the_sectors_per_request_with_a_quarter_of_the_requests():
    v01 = ncu.counters_from_output(V01, 0, calls=3, metrics=ALL_METRICS).kernels[0]
    [v04] = ncu.counters_from_output(V04, 0, calls=3, metrics=ALL_METRICS).kernels
    assert v04.key == "vector_add_vec128"
    assert v04.sectors_per_request == pytest.approx(16.0) and v04.global_load_requests == v01.global_load_requests / 4
    assert v04.global_load_sectors == v01.global_load_sectors                 # the same bytes, in fewer requests
    assert v04.dram_bytes == pytest.approx(v01.dram_bytes, rel=0.05)
    assert v04.duration_seconds < v01.duration_seconds


def test_two_kernels_of_one_call_each_get_their_counters():
    result = ncu.counters_from_output(COMPILED_SUM, 0, calls=3, metrics=ALL_METRICS)
    first, second = result.kernels                            # in order of first launch
    assert (first.name, second.name) == ("triton_red_fused_sum_0", "triton_per_fused_sum_1")
    assert first.launches == second.launches == 3
    assert first.dram_read_bytes == 4_198_144 + 4_197_888 + 4_198_144 and first.dram_write_bytes == 0
    assert first.sectors_per_request == pytest.approx(16.0) and second.sectors_per_request == pytest.approx(8.0)
    assert result.for_kernel("triton_per_fused_sum_1") is second
    assert result.dram_bytes_per_call() == pytest.approx((first.dram_bytes + second.dram_bytes) / 3)
    assert result.dram_bytes_per_call() == pytest.approx(4_201_899, rel=1e-6)   # 4 MB: the 2^20 floats, read once


def test_a_launch_with_n_a_counts_as_the_mean_of_the_others():
    lines = V02.splitlines()
    header = next(csv.reader([next(line for line in lines if line.startswith('"ID"'))]))
    column = header.index("l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum")
    last = next(csv.reader([lines[-1]]))
    last[column] = "n/a"
    text = "\n".join(lines[:-1] + [",".join(f'"{cell}"' for cell in last)]) + "\n"
    result = ncu.counters_from_output(text, 0, calls=3, metrics=ALL_METRICS)
    assert ncu.parse_ncu_csv(text)[-1]["global_load_sectors"] is None
    assert result.summary()["sectors_per_request"] == pytest.approx(32.0)   # not 2/3 of it


def test_a_metric_missing_everywhere_is_named():
    without_write = V01.replace('"dram__bytes_write.sum"', '"dram__bytes_written_typo.sum"', 1)    # the header only
    result = ncu.counters_from_output(without_write, 0, calls=3, metrics=list(ncu.CORE_METRICS))
    assert result.missing_metrics == ["dram__bytes_write.sum"]
    assert result.note == f"ncu gave no value for 1 of {len(ncu.CORE_METRICS)} metrics"
    assert result.kernels[0].dram_bytes is None and result.dram_bytes_per_call() is None
    assert result.kernels[0].extra == {}                 # a column nobody asked for is not kept


@pytest.mark.parametrize("output, returncode, expected", [
    (DENIED, 1, "ERR_NVGPUCTRPERM"),
    ("==PROF== Connected\n==WARNING== No kernels were profiled.\n", 0, "ncu profiled no kernels"),
    ("==ERROR== The application returned an error code (1).\n", 1, "ncu failed: The application returned an error code (1)."),
    ("Traceback (most recent call last):\nRuntimeError: boom\n", 1, "ncu exited with status 1: RuntimeError: boom"),
    ("", 0, "ncu printed no CSV"),
])
def test_no_counters_is_one_line_that_says_why(output, returncode, expected):
    result = ncu.counters_from_output(output, returncode, calls=3, metrics=list(ncu.METRICS))
    assert not result.available and result.kernels == []
    assert expected in result.note and "\n" not in result.note


def test_rejected_metrics_are_found_by_name_or_by_ncu_regex():
    output = ("==ERROR== Failed to find metric regex:^smsp__average_warps_issue_stalled_misc_per_issue_active"
              "\\.ratio$\n==ERROR== Failed to find metric dram__bytes_read.sum\n")
    requested = ["dram__bytes_read.sum", "dram__bytes_write.sum", ncu.STALL_METRIC.format("misc"),
                 ncu.STALL_METRIC.format("membar")]
    assert ncu.rejected_metrics(output, requested) == ["dram__bytes_read.sum", ncu.STALL_METRIC.format("misc")]


# ------------------------------------------------------------------------------------------ fake ncu

FAKE_NCU = """\
#!{python}
# A stand-in for ncu: logs its arguments, rejects one metric if told to, then prints a fixture.
import json, os, sys, time
arguments = sys.argv[1:]
with open(os.environ["FAKE_NCU_LOG"], "a") as log:
    log.write(json.dumps(arguments) + "\\n")
metrics = arguments[arguments.index("--metrics") + 1].split(",") if "--metrics" in arguments else []
reject = os.environ.get("FAKE_NCU_REJECT", "")
if reject and reject in metrics:
    print("==PROF== Connected to process 4242 (/usr/bin/python3.12)")
    print("==ERROR== Failed to find metric " + reject)
    sys.exit(1)
time.sleep(float(os.environ.get("FAKE_NCU_SLEEP", "0")))
sys.stdout.write(open(os.environ["FAKE_NCU_OUTPUT"]).read())
sys.exit(int(os.environ.get("FAKE_NCU_EXIT", "0")))
"""


def _install(folder: Path, name: str, script: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    path.write_text(textwrap.dedent(script).replace("{python}", sys.executable))
    path.chmod(path.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    return path


@pytest.fixture
def fake_ncu(tmp_path, monkeypatch):
    """A fake ``ncu`` first on PATH; returns a function giving the argument lists it was called with."""
    _install(tmp_path / "bin", "ncu", FAKE_NCU)
    log = tmp_path / "ncu-calls.jsonl"
    monkeypatch.setenv("PATH", f"{tmp_path / 'bin'}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.delenv("HG_NCU", raising=False)
    monkeypatch.setenv("FAKE_NCU_LOG", str(log))
    monkeypatch.setenv("FAKE_NCU_OUTPUT", str(FIXTURES / "ncu_raw_vector_add_v01.csv"))
    return lambda: [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []


def test_collect_runs_ncu_on_the_target_and_parses_its_csv(fake_ncu):
    result = ncu.collect("vector_add", "v01_thread_per_element", 2**24, "float32", calls=3)
    assert result.available and result.note is None and result.calls == 3
    assert result.kernels[0].sectors_per_request == pytest.approx(4.0)
    [arguments] = fake_ncu()
    assert arguments[:2] == ["--clock-control", "none"]
    assert arguments[arguments.index("--nvtx-include") + 1] == "hello_gpu_profile/"
    assert set(arguments[arguments.index("--metrics") + 1].split(",")) == set(ncu.CORE_METRICS) | set(ncu.STALL_METRICS)
    assert ["--csv", "--page", "raw", "--print-units", "base"] == arguments[arguments.index("--csv"):arguments.index("--csv") + 5]
    target = arguments[arguments.index(sys.executable):]
    assert target[1:5] == ["-m", "hello_gpu.profile._target", "vector_add", "v01_thread_per_element"]
    assert target[target.index("--shape") + 1] == "2^24" and target[target.index("--calls") + 1] == "3"
    assert "ncu" in result.command[0] and result.raw_output.count('"ID"') == 1


def test_a_rejected_metric_is_dropped_and_the_run_repeated(fake_ncu, monkeypatch):
    stall = ncu.STALL_METRIC.format("misc")
    monkeypatch.setenv("FAKE_NCU_REJECT", stall)
    result = ncu.collect("vector_add", "v01_thread_per_element", 2**24, "float32")
    runs = fake_ncu()
    assert len(runs) == 2
    assert stall in runs[0][runs[0].index("--metrics") + 1] and stall not in runs[1][runs[1].index("--metrics") + 1]
    assert result.available and stall in result.missing_metrics and "rejected 1 metric(s)" in result.note


def test_a_rejected_dram_metric_is_renamed_as_blackwell_spells_it(fake_ncu, monkeypatch):
    monkeypatch.setenv("FAKE_NCU_REJECT", "dram__bytes_read.sum")
    ncu.collect("vector_add", "v01_thread_per_element", 2**24, "float32", stalls=False)
    second = fake_ncu()[1]
    metrics = second[second.index("--metrics") + 1].split(",")
    assert "dram__bytes_op_read.sum" in metrics and "dram__bytes_read.sum" not in metrics


def test_no_permission_is_a_note_not_a_crash(fake_ncu, monkeypatch):
    monkeypatch.setenv("FAKE_NCU_OUTPUT", str(FIXTURES / "ncu_permission_error.txt"))
    monkeypatch.setenv("FAKE_NCU_EXIT", "1")
    result = ncu.collect("vector_add", "v01_thread_per_element", 2**24, "float32")
    assert not result.available and "ERR_NVGPUCTRPERM" in result.note
    assert len(fake_ncu()) == 1                       # no retries: a permission problem is not a metric problem


def test_a_hung_ncu_is_stopped_at_the_time_limit(fake_ncu, monkeypatch):
    monkeypatch.setenv("FAKE_NCU_SLEEP", "30")
    result = ncu.collect("vector_add", "v01_thread_per_element", 2**24, "float32", timeout=1)
    assert not result.available and "did not finish within 1 s" in result.note


def test_no_ncu_anywhere(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.delenv("HG_NCU", raising=False)
    if ncu.ncu_executable() is not None:
        pytest.skip("an ncu is installed outside PATH here")
    result = ncu.collect("vector_add", "v01_thread_per_element", 2**24, "float32")
    assert not result.available and result.note.startswith("ncu not found")


def test_hg_ncu_names_the_executable(tmp_path, monkeypatch, fake_ncu):
    other = _install(tmp_path / "elsewhere", "my-ncu", FAKE_NCU)
    monkeypatch.setenv("HG_NCU", str(other))
    assert ncu.ncu_executable() == str(other)


def test_the_target_module_accepts_what_the_parent_sends():
    from hello_gpu.ops.shapes import parse_shape
    from hello_gpu.profile._target import target_arguments
    arguments = target_arguments("softmax", "v01_row", (1823, 781), "bfloat16", calls=2, warmup=1, root="/x")
    assert parse_shape(arguments[arguments.index("--shape") + 1]) == (1823, 781)
    assert arguments[-2:] == ["--root", "/x"]
    arguments = target_arguments("vector_add", "v01_thread_per_element", 2**24, "float32", calls=2, warmup=1)
    assert parse_shape(arguments[arguments.index("--shape") + 1]) == 2**24
    assert target_arguments("softmax", "v01_row", [7, 1025], "float32", calls=1, warmup=0)[5] == "7x1025"
    with pytest.raises(ValueError, match="cannot be passed"):
        target_arguments("softmax", "v01_row", (4097,), "float32", calls=1, warmup=0)


# ------------------------------------------------------------------------------------------ rocprofv3

ROCPROF = FIXTURES / "rocprofv3_vector_add_v01"
VADD = "void vector_add<float>(float const*, float const*, float*, long)"


def test_kernel_trace_rows_grid_in_workgroups():
    dispatches = rocprof.parse_kernel_trace((ROCPROF / "trace" / "trace_kernel_trace.csv").read_text())
    assert len(dispatches) == 8                        # 2 randn + 3 warm-up + 3 profiled
    last = dispatches[-1]
    assert last["name"] == VADD and last["block"] == (256, 1, 1)
    assert last["grid"] == (65536, 1, 1)               # 16777216 work-items / 256
    assert (last["vgpr"], last["sgpr"], last["lds_bytes"]) == (8, 16, 0)


def test_kernel_trace_of_older_rocprofv3_columns():
    older = ('"Kind","Agent_Id","Queue_Id","Stream_Id","Thread_Id","Dispatch_Id","Kernel_Id","Kernel_Name",'
             '"Correlation_Id","Start_Timestamp","End_Timestamp","Private_Segment_Size","Group_Segment_Size",'
             '"Workgroup_Size_X","Workgroup_Size_Y","Workgroup_Size_Z","Grid_Size_X","Grid_Size_Y","Grid_Size_Z"\n'
             '"KERNEL_DISPATCH",2,1,1,21228,1,11,"void addition_kernel<float>(float*, float const*, float const*, '
             'int, int)",1937,2414192765353337,2414192765369494,0,2048,64,1,1,1024,1024,1\n')
    [dispatch] = rocprof.parse_kernel_trace(older)
    assert dispatch["grid"] == (16, 1024, 1) and dispatch["lds_bytes"] == 2048 and dispatch["vgpr"] is None


def test_counter_collection_rows_fold_into_dispatches():
    dispatches = rocprof.parse_counter_collection((ROCPROF / "pmc0" / "pmc0_counter_collection.csv").read_text())
    assert len(dispatches) == 8
    assert dispatches[-1]["counters"] == {"FETCH_SIZE": pytest.approx(131_104.25), "WRITE_SIZE": pytest.approx(65_552.5)}
    assert dispatches[-1]["grid"] == 65536


def test_rocprofv3_folder_only_the_marked_calls_count():
    result = rocprof.counters_from_files(ROCPROF, calls=3)
    assert result.available and result.note is None
    [kernel] = result.kernels                          # the randn kernels and warm-up calls lie outside the range
    assert kernel.name == VADD and kernel.launches == 3
    assert kernel.dram_read_bytes == pytest.approx(3 * 131_104.25 * 1024)
    assert kernel.l2_hit_rate_pct == pytest.approx(100 * 1_572_864 / (1_572_864 + 3_146_240))
    assert kernel.achieved_occupancy_pct == pytest.approx(83.417969)
    assert kernel.duration_seconds == pytest.approx((314_660 + 314_900 + 315_140) * 1e-9)
    assert result.dram_bytes_per_call() == pytest.approx((131_104.25 + 65_552.5) * 1024)


def test_rocprofv3_without_markers_counts_everything_and_says_so(tmp_path):
    for path in ROCPROF.rglob("*.csv"):
        if "marker" not in path.name:
            target = tmp_path / path.relative_to(ROCPROF)
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(path.read_text())
    result = rocprof.counters_from_files(tmp_path, calls=3)
    assert {k.key for k in result.kernels} == {"vector_add", "distribution_elementwise_grid_stride_kernel"}
    assert "no roctx range 'hello_gpu_profile'" in result.note


ROCPD = FIXTURES / "rocpd_vector_add_v01"


def _rocpd_folder(folder: Path) -> Path:
    """The rocpd fixture's runs built into databases, laid out as ``rocprofv3 -d RUN -o RUN`` writes them."""
    schema = (ROCPD / "schema.sql").read_text()
    for script in sorted(ROCPD.glob("*.sql")):
        if script.name == "schema.sql":
            continue
        (folder / script.stem).mkdir(parents=True)
        with sqlite3.connect(folder / script.stem / f"{script.stem}_results.db") as database:
            database.executescript(schema + script.read_text())
        database.close()
    return folder


def test_rocpd_databases_fold_into_the_same_table_as_the_csv_files(tmp_path):
    from_csv = rocprof.counters_from_files(ROCPROF, calls=3)
    from_rocpd = rocprof.counters_from_files(_rocpd_folder(tmp_path), calls=3)
    assert from_rocpd.available and from_rocpd.note is None
    assert [k.to_dict() for k in from_rocpd.kernels] == [k.to_dict() for k in from_csv.kernels]
    [kernel] = from_rocpd.kernels
    assert kernel.name == VADD and kernel.launches == 3
    assert kernel.dram_read_bytes == pytest.approx(3 * 131_104.25 * 1024)


def test_rocpd_database_rows(tmp_path):
    folder = _rocpd_folder(tmp_path)
    trace = rocprof.read_rocpd(folder / "trace" / "trace_results.db")
    assert trace["counted"] == [] and len(trace["trace"]) == 8
    assert trace["trace"] == rocprof.parse_kernel_trace((ROCPROF / "trace" / "trace_kernel_trace.csv").read_text())
    assert trace["window"] == (1814202332519115, 1814202333525615)
    pmc0 = rocprof.read_rocpd(folder / "pmc0" / "pmc0_results.db")
    assert pmc0["trace"] == [] and pmc0["counted"][-1]["grid"] == 65536
    assert pmc0["counted"][-1]["counters"] == {"FETCH_SIZE": pytest.approx(131_104.25),
                                               "WRITE_SIZE": pytest.approx(65_552.5)}


def test_rocpd_kernels_view_without_register_columns(tmp_path):
    # schema 3.0.x views before vgpr_count/accum_vgpr_count/sgpr_count were added to `kernels`
    folder = _rocpd_folder(tmp_path)
    with sqlite3.connect(folder / "trace" / "trace_results.db") as database:
        kept = [c[1] for c in database.execute("PRAGMA table_info(kernels)") if "gpr" not in c[1]]
        database.executescript(f"CREATE TABLE k AS SELECT {', '.join(kept)} FROM kernels; DROP TABLE kernels; "
                               "ALTER TABLE k RENAME TO kernels;")
    database.close()
    trace = rocprof.read_rocpd(folder / "trace" / "trace_results.db")
    assert len(trace["trace"]) == 8 and trace["window"] == (1814202332519115, 1814202333525615)
    assert (trace["trace"][-1]["vgpr"], trace["trace"][-1]["sgpr"], trace["trace"][-1]["grid"]) == (None, None,
                                                                                                    (65536, 1, 1))


def test_rocpd_views_of_the_tracks_based_schema(tmp_path):
    # kernel_pmc_events (pmc_name, pmc_value), markers (name = the roctx message), arch_vgpr_count,
    # lds_block_size, and grid_size_x in workgroups beside grid_x in work-items
    path = tmp_path / "run_results.db"
    with sqlite3.connect(path) as database:
        database.executescript(f"""
            CREATE TABLE kernels (id, name, dispatch_id, start, end, grid_x, grid_y, grid_z, workgroup_x,
                workgroup_y, workgroup_z, grid_size_x, grid_size_y, grid_size_z, lds_block_size, scratch_size,
                sgpr_count, arch_vgpr_count, accum_vgpr_count, correlation_id);
            CREATE TABLE kernel_pmc_events (dispatch_id, name, pmc_name, pmc_value);
            CREATE TABLE markers (category, name, start, end, operation);
            INSERT INTO kernels VALUES (1, '{VADD}', 6, 1050, 1900, 16777216, 1, 1, 256, 1, 1, 65536, 1, 1, 512, 0,
                16, 8, 0, 212);
            INSERT INTO kernel_pmc_events VALUES (6, '{VADD}', 'FETCH_SIZE', 131104.25),
                (6, '{VADD}', 'WRITE_SIZE', 65552.5);
            INSERT INTO markers VALUES ('MARKER_CORE_API', 'hello_gpu_profile', 1000, 2000, 'roctxRangePushA'),
                ('MARKER_CORE_API', 'other', 1000, 3000, 'roctxRangePushA');
        """)
    database.close()
    run = rocprof.read_rocpd(path)
    assert run["window"] == (1000, 2000) and run["trace"] == []
    [dispatch] = run["counted"]
    assert (dispatch["grid"], dispatch["lds_bytes"], dispatch["vgpr"], dispatch["sgpr"]) == (65536, 512, 8, 16)
    assert dispatch["counters"] == {"FETCH_SIZE": 131104.25, "WRITE_SIZE": 65552.5}


def test_marker_window_whatever_the_marker_domain():
    for domain in ("MARKER_CORE_API", "MARKER_CORE_RANGE_API"):          # ROCm 6.x, ROCm 7.x
        text = ('"Domain","Function","Process_Id","Thread_Id","Correlation_Id","Start_Timestamp","End_Timestamp"\n'
                f'"{domain}","hello_gpu_profile",73416,73416,7,100,200\n')
        assert rocprof.marker_window(text) == (100, 200)


def test_a_file_that_is_not_a_rocpd_database_is_named_not_a_crash(tmp_path):
    folder = _rocpd_folder(tmp_path / "runs")
    (folder / "pmc1" / "pmc1_results.db").write_text("not sqlite at all")
    with sqlite3.connect(folder / "pmc2" / "pmc2_results.db") as database:
        database.executescript("DROP TABLE kernels;")
    database.close()
    with pytest.raises(ValueError, match="pmc2_results.db: not a rocpd database"):
        rocprof.read_rocpd(folder / "pmc2" / "pmc2_results.db")
    result = rocprof.counters_from_files(folder, calls=3)
    [kernel] = result.kernels
    assert kernel.dram_read_bytes == pytest.approx(3 * 131_104.25 * 1024) and kernel.l2_hit_rate_pct is None
    assert "pmc1_results.db: not a rocpd database" in result.note and "pmc2_results.db" in result.note
    assert "no roctx range" not in result.note


def test_kernel_trace_as_rocpd_convert_writes_it():
    converted = ('"Guid","Kind","Agent_Id","Queue_Id","Stream_Id","Thread_Id","Dispatch_Id","Kernel_Id","Kernel_Name",'
                 '"Correlation_Id","Start_Timestamp","End_Timestamp","Lds_Block_Size","Scratch_Size","Vgpr_Count",'
                 '"Accum_Vgpr_Count","Sgpr_Count","Workgroup_Size_X","Workgroup_Size_Y","Workgroup_Size_Z",'
                 '"Grid_Size_X","Grid_Size_Y","Grid_Size_Z"\n'
                 '"00006a1b-3c2d-7e4f-8a90-b1c2d3e4f5a6","KERNEL_DISPATCH","Agent 1",1,0,73417,6,11,'
                 '"void vector_add<float>(float const*, float const*, float*, long)",212,1814202332521615,'
                 '1814202332836275,512,0,8,0,16,256,1,1,16777216,1,1\n')
    [dispatch] = rocprof.parse_kernel_trace(converted)
    assert dispatch["grid"] == (65536, 1, 1) and (dispatch["lds_bytes"], dispatch["vgpr"], dispatch["sgpr"]) == (512, 8, 16)


FAKE_ROCPROFV3 = """\
#!{python}
# A stand-in for rocprofv3: copies the fixture run matching its options into the -d folder.
import os, shutil, sys
arguments = sys.argv[1:]
folder = arguments[arguments.index("-d") + 1]
name = arguments[arguments.index("-o") + 1]
source = os.path.join(os.environ["FAKE_ROCPROF_FIXTURE"], name)
if os.environ.get("FAKE_ROCPROF_FAIL") == name:
    sys.exit(3)
shutil.copytree(source, folder)
"""


def test_collect_runs_rocprofv3_per_counter_group(tmp_path, monkeypatch):
    _install(tmp_path / "bin", "rocprofv3", FAKE_ROCPROFV3)
    monkeypatch.setenv("PATH", f"{tmp_path / 'bin'}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("FAKE_ROCPROF_FIXTURE", str(ROCPROF))
    monkeypatch.setenv("FAKE_ROCPROF_FAIL", "pmc1")            # the L2 group is not available on this GPU
    result = rocprof.collect("vector_add", "v01_thread_per_element", 2**24, "float32", calls=3)
    [kernel] = result.kernels
    assert kernel.dram_read_bytes == pytest.approx(3 * 131_104.25 * 1024)
    assert kernel.l2_hit_rate_pct is None and kernel.achieved_occupancy_pct == pytest.approx(83.417969)
    assert result.note == "rocprofv3 failed for pmc1: status 3"


def test_no_rocprofv3_anywhere(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))
    if Path("/opt/rocm/bin/rocprofv3").is_file():
        pytest.skip("a real rocprofv3 is installed here")
    result = rocprof.collect("vector_add", "v01_thread_per_element", 2**24, "float32")
    assert not result.available and "rocprofv3 not found" in result.note


# ------------------------------------------------------------------------------------------ aggregation, hook


def test_aggregation_weights_percentages_by_duration_and_keeps_others():
    launches = [{"name": "k", "duration_seconds": 1e-3, "achieved_occupancy_pct": 50.0, "dram_read_bytes": 10.0,
                 "SQ_WAVES": 4.0},
                {"name": "k", "duration_seconds": 3e-3, "achieved_occupancy_pct": 90.0, "dram_read_bytes": None,
                 "SQ_WAVES": 8.0},
                {"name": "j", "duration_seconds": None, "sm_throughput_pct": 20.0}]
    k, j = aggregate_launches(launches)
    assert k.launches == 2 and k.achieved_occupancy_pct == pytest.approx(80.0)    # (50*1 + 90*3) / 4
    assert k.dram_read_bytes == pytest.approx(20.0)        # the n/a launch counts as the mean of the others
    assert k.extra == {"SQ_WAVES": pytest.approx((4 * 1 + 8 * 3) / 4)}
    assert j.sm_throughput_pct == 20.0 and j.dram_bytes is None and j.sectors_per_request is None


@pytest.mark.skipif(gpu_vendor() is not None, reason="this machine has a GPU: the hook runs the real tool there")
def test_the_ladder_hook_without_a_gpu_says_so_per_rung():
    results = counters_for_rungs("vector_add", ["v01_thread_per_element", "v02_strided_chunks"], 2**24, "float32")
    assert set(results) == {"v01_thread_per_element", "v02_strided_chunks"}
    for result in results.values():
        assert not result.available and result.note.startswith("no GPU here")
        assert result.summary()["dram_bytes_per_call"] is None
