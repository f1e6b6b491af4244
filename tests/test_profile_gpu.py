"""GPU tier for profile/ (``pytest -m gpu``): torch.profiler and ncu on the real device (the H200).

Nothing here runs in the CPU tier, which parses files these tools wrote on the H200 (2026-12-03);
``hello-gpu profile ... --save-raw DIR`` saves such files again (tests/fixtures/profile/README.md).
"""

from __future__ import annotations

import pytest
import torch

from hello_gpu.cli import main
from hello_gpu.profile.rung_profile import profile_rung
from hello_gpu.profile.kernel_table import kernel_table

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a GPU")]

SHAPE = 2**24          # 200 MB moved per float32 add: over three times the H200's 60 MB L2


def test_kernel_table_of_a_hip_rung_names_its_own_kernel():
    profile = profile_rung("vector_add", "v01_thread_per_element", SHAPE, counters=False)
    [row] = profile.table.rows
    assert row.source == "hello-gpu" and row.key == "vector_add"
    assert row.grid == (SHAPE // 256, 1, 1) and row.block == (256, 1, 1)
    assert row.launches == profile.table.calls and row.registers_per_thread > 0
    assert len(profile.table.per_call_seconds) == profile.table.calls
    assert all(20e-6 < t < 1e-3 for t in profile.table.per_call_seconds)


def test_kernel_table_of_torch_add_is_a_library_kernel():
    a, b = torch.randn(SHAPE, device="cuda"), torch.randn(SHAPE, device="cuda")
    table = kernel_table(torch.add, a, b, ours=["vector_add"])
    assert {row.source for row in table.rows} == {"library"}
    assert table.fallback_warning() is not None


def test_triton_rung_kernels_are_labelled_triton():
    profile = profile_rung("vector_add", "t01_tile_1024", SHAPE, counters=False)
    assert [row.source for row in profile.table.rows] == ["triton"]


def test_triton_resources_agree_with_the_profiler():
    """The registers Triton's JIT cache reports for a launched rung are the ones CUPTI saw at launch."""
    from hello_gpu.ops.rung import MODULE_PREFIX
    from hello_gpu.runtime.triton_jit import kernel_resources, modules_named
    # Only the modules this profile imports: earlier tests in the process left other rungs (and other
    # specialisations of kernels with the same name) in sys.modules, 12 to 162 registers (run of 0640e65).
    before = {id(module) for module in modules_named(MODULE_PREFIX)}
    profile = profile_rung("vector_add", "t01_tile_1024", SHAPE, counters=False)
    [row] = profile.table.rows
    loaded = [module for module in modules_named(MODULE_PREFIX) if id(module) not in before]
    launched = [k for k in kernel_resources(loaded) if k["name"] == row.key]
    assert launched, kernel_resources(loaded)
    assert {k["registers_per_thread"] for k in launched} == {row.registers_per_thread}
    assert all(k["spill_bytes"] == 0 and k["num_warps"] >= 1 for k in launched)


def test_ncu_sees_the_strided_rung_move_more_sectors_per_request():
    """Issue 6: the uncoalesced rung shows measurably more L1 sectors per request (or DRAM bytes)."""
    coalesced = profile_rung("vector_add", "v01_thread_per_element", SHAPE).table
    strided = profile_rung("vector_add", "v02_strided_chunks", SHAPE).table
    for table in (coalesced, strided):
        assert table.counters is not None and table.counters.available, table.counters.note if table.counters else None
    good, bad = coalesced.counters.summary(), strided.counters.summary()
    assert good["sectors_per_request"] == pytest.approx(4.0, rel=0.05)      # 32 lanes x 4 bytes = 4 sectors
    assert bad["sectors_per_request"] > 2 * good["sectors_per_request"] or \
        bad["dram_bytes_per_call"] > 1.1 * good["dram_bytes_per_call"]
    ratio = coalesced.bytes_comparison()["measured_over_counted"]
    assert 0.9 < ratio < 1.2                       # a coalesced add moves what the work model counts


def test_profile_command_saves_the_raw_files(tmp_path, capsys, monkeypatch):
    # Wide enough that rich does not fold "hello-gpu" in the source column (the H200 runs of 152c451
    # and 0640e65 failed here: outside a TTY the console was 140 columns whatever COLUMNS said).
    monkeypatch.setenv("COLUMNS", "250")
    assert main(["profile", "vector_add", "v01_thread_per_element", "--shape", str(SHAPE),
                 "--save-raw", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "vector_add" in out and "hello-gpu" in out
    stem = "v01_thread_per_element.float32.2^24"
    assert (tmp_path / f"{stem}.trace.json").stat().st_size > 0
    assert (tmp_path / f"{stem}.ncu.csv").read_text().count('"ID"') == 1


GRAPH_AFTER_PROFILE = """
import torch
from hello_gpu.models.profile import profile_steps
from hello_gpu.profile.kernel_table import kernel_table

a = torch.randn(1 << 20, device="cuda")
kernel_table(torch.add, a, a, warmup=1, repeats=2)                    # a profile, then its stop (and teardown)
profile_steps(lambda: a * 2, steps=2, warmup=1)                        # a second start and stop
graph, stream = torch.cuda.CUDAGraph(), torch.cuda.Stream()
stream.wait_stream(torch.cuda.current_stream())
with torch.cuda.stream(stream):
    out = a + 1                                                        # warm-up off the capturing stream
torch.cuda.current_stream().wait_stream(stream)
with torch.cuda.graph(graph):
    out = a + 1
for _ in range(3):
    graph.replay()
torch.cuda.synchronize()
assert torch.equal(out, a + 1)
print("graph after profile: ok")
"""


def test_a_cuda_graph_captured_after_two_profiles_runs():
    """Course chapter 18 profiles a model, then captures CUDA graphs in the same process; in session 21 its
    notebook kernel died there (PyTorch's own comment: graphs do not work well with CUPTI teardown). In a
    fresh process, as the notebook's kernel is: two profiles, then a capture and replays."""
    import os
    import subprocess
    import sys
    environment = {k: v for k, v in os.environ.items() if k not in ("TEARDOWN_CUPTI", "DISABLE_CUPTI_LAZY_REINIT")}
    done = subprocess.run([sys.executable, "-X", "faulthandler", "-c", GRAPH_AFTER_PROFILE], env=environment,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0 and "graph after profile: ok" in done.stdout, done.stderr[-3000:]
