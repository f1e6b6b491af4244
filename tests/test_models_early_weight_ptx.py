"""The two decode kernels that load weights before the dependent-launch wait (hello_gpu.models.linear_pdl_kernel
and gate_up_swiglu_kernel), read in their PTX for sm_90: compiled here, no GPU needed."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

_COMPILE_SCRIPT = r"""
import importlib, json, re, sys
module = importlib.import_module("hello_gpu.models." + sys.argv[1])
from hello_gpu.runtime.kernel import triton_for_sm90
ops, ptx = triton_for_sm90(getattr(module, sys.argv[2]), {"BLOCK_N": module.BLOCK_N, "BLOCK_K": module.BLOCK_K,
                           "PDL": True}, "bf16", num_warps=module.WARPS, num_stages=1)
loads = [(m.start(), "evict_first" in m.group(0)) for m in re.finditer(r"ld\.global[.\w:]*", ptx)]
print(json.dumps({"wait": ptx.find("griddepcontrol.wait"), "release": ptx.find("griddepcontrol.launch_dependents"),
                  "loads": loads, "local": sum(op.startswith(("LDL", "STL")) for op in ops)}))
"""


@pytest.mark.parametrize("module,kernel", [("linear_pdl_kernel", "early_weight_gemv_kernel"),
                                           ("gate_up_swiglu_kernel", "gate_up_swiglu_kernel")])
def test_the_first_weight_loads_come_before_the_wait_and_x_after_it(module, kernel):
    """Weight loads (evict-first) are issued before griddepcontrol.wait, x's loads only after it, the release
    follows the wait, and nothing spills to local memory."""
    from hello_gpu.runtime.kernel import _tool
    if _tool("cuobjdump") is None and _tool("nvdisasm") is None:
        pytest.skip("no cuobjdump or nvdisasm here to read the SASS")
    environment = {key: value for key, value in os.environ.items() if key != "TRITON_INTERPRET"}
    environment.update(PYTHONPATH=str(Path(__file__).resolve().parents[1] / "src"))
    done = subprocess.run([sys.executable, "-c", _COMPILE_SCRIPT, module, kernel], capture_output=True, text=True,
                          timeout=600, env=environment)
    assert done.returncode == 0, done.stderr[-3000:]
    found = json.loads(done.stdout.strip().splitlines()[-1])
    wait, release, loads = found["wait"], found["release"], found["loads"]
    assert 0 <= wait < release, found
    before = [evict for position, evict in loads if position < wait]
    after = [evict for position, evict in loads if position > wait]
    assert before and all(before), f"before the wait, only weight (evict-first) loads: {found}"
    assert after and not all(after), f"x is loaded after the wait: {found}"
    assert found["local"] == 0, found
