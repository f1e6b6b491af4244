"""``hello-gpu doctor``: is this machine ready to run kernels? Three gates, each PASS, FAIL or SKIP.

1. the platform sees a GPU (driver level: ``nvidia-smi -L`` or the CUDA driver; ``rocm-smi``/``amd-smi``
   or ``/dev/kfd`` on AMD);
2. PyTorch sees it and a tensor op on it matches the CPU;
3. a minimal kernel (``vector_add``) compiles, runs on 4097 random floats and matches ``a + b``.

A failed gate says why and what to try. Without a GPU, the doctor says so and checks what still works
here: NVRTC compiles for sm_90, clang compiles for AMD (if installed), and Triton's interpreter runs.

Every gate and probe is wrapped: an exception becomes a FAIL (or an "unavailable" value) with its
message, never a crash.
"""

from __future__ import annotations

import os
import platform
import re
import shutil
import subprocess
import time
from dataclasses import asdict, dataclass, field

PASS, FAIL, SKIP = "PASS", "FAIL", "SKIP"

GATE_NAMES = ("platform sees a GPU", "PyTorch sees it and a tensor op runs",
              "a minimal kernel compiles, runs and matches")

# The README kernel (examples/vector_add.hip holds the same text; a test checks it).
VECTOR_ADD = """\
__global__ void vector_add(const float* a, const float* b, float* out, int n) {
  int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) out[i] = a[i] + b[i];
}
"""


@dataclass
class Check:
    name: str
    status: str = SKIP
    detail: str = ""
    hint: str = ""
    seconds: float = 0.0
    data: dict = field(default_factory=dict)


@dataclass
class DoctorReport:
    gates: list[Check]
    cpu_checks: list[Check]          # only when no GPU is here
    environment: dict[str, str]
    cpu_ok: bool

    @property
    def gpu_visible(self) -> bool:
        return self.gates[0].status == PASS

    @property
    def first_failed_gate(self) -> int | None:
        """1-based index of the first gate that failed, or None."""
        return next((index for index, gate in enumerate(self.gates, 1) if gate.status == FAIL), None)

    @property
    def exit_code(self) -> int:
        """0 when all gates pass (or, with --cpu-ok and no GPU, when the CPU-side checks pass);
        else 1 + the index of the first failed gate; 1 when only a CPU-side check failed."""
        if not self.gpu_visible and self.cpu_ok:
            return 1 if any(c.status == FAIL for c in self.cpu_checks) else 0
        failed = self.first_failed_gate
        if failed is not None:
            return 1 + failed
        return 0 if all(gate.status == PASS for gate in self.gates) else 1

    @property
    def summary(self) -> str:
        """The final line: says what passed, or names the first failed gate."""
        failed_cpu = [c.name for c in self.cpu_checks if c.status == FAIL]
        if not self.gpu_visible and self.cpu_ok:
            if failed_cpu:
                return f"doctor: FAIL: no GPU here (--cpu-ok), and CPU-side check(s) failed: {', '.join(failed_cpu)}"
            return "doctor: OK for CPU-only work: no GPU here (--cpu-ok); the CPU-side checks passed"
        failed = self.first_failed_gate
        if failed is not None:
            gate = self.gates[failed - 1]
            return f"doctor: FAIL at gate {failed} ({gate.name}): {_first_line(gate.detail)}"
        if all(gate.status == PASS for gate in self.gates):
            return f"doctor: all 3 gates passed ({self.environment.get('GPU', 'GPU')})"
        return "doctor: FAIL: a gate did not run"

    def to_dict(self) -> dict:
        return {
            "gpu_visible": self.gpu_visible,
            "vendor": self.gates[0].data.get("vendor"),
            "cpu_ok": self.cpu_ok,
            "gates": [dict(asdict(gate), index=index) for index, gate in enumerate(self.gates, 1)],
            "cpu_checks": [asdict(check) for check in self.cpu_checks],
            "environment": self.environment,
            "exit_code": self.exit_code,
            "summary": self.summary,
        }


def _first_line(text: str) -> str:
    return text.strip().splitlines()[0] if text.strip() else ""


def _run(name: str, function, *args) -> Check:
    """Run one gate/check; whatever it raises becomes a FAIL carrying the message."""
    started = time.perf_counter()
    try:
        check = function(*args)
    except Exception as error:  # noqa: BLE001 - the doctor reports every failure, it never crashes
        check = Check(name, FAIL, f"{type(error).__name__}: {error}".strip())
    check.name = name
    check.seconds = round(time.perf_counter() - started, 4)
    return check


def _command(*argv: str, timeout: float = 30) -> subprocess.CompletedProcess:
    return subprocess.run(list(argv), capture_output=True, text=True, timeout=timeout, check=False)


# --------------------------------------------------------------------------------------- gate 1


def _nvidia_devices(evidence: list[str]) -> list[str]:
    """GPU names from ``nvidia-smi -L``, else from the CUDA driver; reasons for none go to ``evidence``."""
    smi = shutil.which("nvidia-smi")
    if smi:
        done = _command(smi, "-L")
        names = [line.split(":", 1)[1].split("(UUID")[0].strip()
                 for line in done.stdout.splitlines() if line.startswith("GPU ")]
        if names:
            return names
        evidence.append(f"nvidia-smi -L: {_first_line(done.stderr or done.stdout) or 'lists no GPU'}")
    else:
        evidence.append("nvidia-smi not found")
    try:
        from cuda.bindings import driver
        status, = driver.cuInit(0)
        if int(status) != 0:
            evidence.append(f"CUDA driver: cuInit failed with {status.name if hasattr(status, 'name') else status}")
            return []
        _, count = driver.cuDeviceGetCount()
        names = []
        for index in range(int(count)):
            _, device = driver.cuDeviceGet(index)
            _, raw = driver.cuDeviceGetName(256, device)
            names.append(raw.split(b"\0")[0].decode(errors="replace"))
        if not names:
            evidence.append("CUDA driver: 0 devices")
        return names
    except Exception as error:  # noqa: BLE001 - no libcuda is the usual case on a CPU machine
        if "NotFound" in type(error).__name__:
            evidence.append("no CUDA driver (libcuda not found)")
        else:
            evidence.append(f"CUDA driver: {type(error).__name__}: {_first_line(str(error))}")
        return []


def _amd_devices(evidence: list[str]) -> list[str]:
    """AMD GPUs: ``/dev/kfd`` (the ROCm kernel driver) plus names from rocm-smi or amd-smi when present."""
    if not os.path.exists("/dev/kfd"):
        evidence.append("no /dev/kfd (no AMD ROCm driver)")
        return []
    smi = shutil.which("rocm-smi")
    if smi:
        done = _command(smi, "--showproductname")
        names = re.findall(r"GPU\[\d+\].*Card (?:Series|Model)\s*:\s*(.+)", done.stdout)
        if names:
            return [name.strip() for name in names]
    smi = shutil.which("amd-smi")
    if smi:
        done = _command(smi, "list")
        count = len(re.findall(r"^GPU:\s*\d+", done.stdout, flags=re.M))
        if count:
            return [f"AMD GPU {index}" for index in range(count)]
    if shutil.which("rocm-smi") or shutil.which("amd-smi"):
        evidence.append("/dev/kfd exists but rocm-smi/amd-smi list no GPU")
        return []
    return ["AMD GPU (/dev/kfd present; rocm-smi/amd-smi not installed)"]


def gate_platform() -> Check:
    evidence: list[str] = []
    nvidia = _nvidia_devices(evidence)
    if nvidia:
        return Check("", PASS, f"NVIDIA: {', '.join(nvidia)}", data={"vendor": "nvidia", "devices": nvidia})
    amd = _amd_devices(evidence)
    if amd:
        return Check("", PASS, f"AMD: {', '.join(amd)}", data={"vendor": "amd", "devices": amd})
    return Check("", FAIL, "no GPU on this machine: " + "; ".join(evidence),
                 hint="On a GPU machine: install the GPU driver (NVIDIA: nvidia-smi must list the GPU; AMD: "
                      "ROCm, /dev/kfd must exist). In a container: start it with the GPUs passed in "
                      "(docker --gpus all; AMD: --device /dev/kfd --device /dev/dri). On a CPU-only "
                      "machine this is expected: use --cpu-ok.",
                 data={"vendor": None})


# --------------------------------------------------------------------------------------- gate 2


def _torch_build(torch) -> str:
    if getattr(torch.version, "cuda", None):
        return f"CUDA {torch.version.cuda}"
    if getattr(torch.version, "hip", None):
        return f"ROCm/HIP {torch.version.hip}"
    return "CPU only"


def gate_torch(vendor: str | None) -> Check:
    import torch

    build = _torch_build(torch)
    if not torch.cuda.is_available():
        if build == "CPU only":
            wheel = "rocm6.4" if vendor == "amd" else "cu130"
            hint = (f"this torch ({torch.__version__}) is a CPU-only build; install a GPU build, e.g. "
                    f"pip install torch --index-url https://download.pytorch.org/whl/{wheel}")
        else:
            hint = (f"torch is built for {build} but sees no device: check CUDA_VISIBLE_DEVICES / "
                    f"HIP_VISIBLE_DEVICES, and that the driver is new enough for {build}")
        return Check("", FAIL, f"torch.cuda.is_available() is False (torch {torch.__version__}, {build})", hint)
    torch_vendor = "amd" if getattr(torch.version, "hip", None) else "nvidia"
    if vendor is not None and torch_vendor != vendor:
        return Check("", FAIL, f"the GPU is {vendor} but torch is built for {build}",
                     f"install the torch build for {vendor.upper()} GPUs")
    x = torch.randn(4096)
    y = torch.randn(4096)
    expected = x * y + torch.sin(x)
    got = (x.cuda() * y.cuda() + torch.sin(x.cuda())).cpu()
    torch.testing.assert_close(got, expected)
    torch.testing.assert_close(got.sum(), expected.sum(), rtol=1e-4, atol=1e-3)
    name = torch.cuda.get_device_name()
    return Check("", PASS, f"torch {torch.__version__} ({build}) on {name}: x*y + sin(x) matches the CPU")


# --------------------------------------------------------------------------------------- gate 3


def gate_kernel() -> Check:
    import torch

    from .kernel import hip

    kernel = hip(VECTOR_ADD, entry="vector_add")
    binary = kernel.compile()
    a = torch.rand(4097, device="cuda")
    b = torch.rand(4097, device="cuda")
    out = kernel(a, b)
    torch.cuda.synchronize()
    torch.testing.assert_close(out, a + b)
    compiled = "from the cache" if binary.cache_hit else f"in {binary.seconds * 1000:.0f} ms"
    return Check("", PASS, f"vector_add compiled for {binary.arch} by {binary.compiler_version} {compiled}, "
                           f"ran on 4097 floats, matches a + b")


_GATE3_HINT = ("if it is a compile error, `hello-gpu compile-check examples/` shows it without a GPU; if the "
               "load or launch fails, the driver may be older than the compiler (NVIDIA: the driver's CUDA "
               "version must be >= NVRTC's major version)")


# --------------------------------------------------------------------------------- CPU-side checks


def check_nvrtc() -> Check:
    from .compiler import nvrtc_version
    from .kernel import Kernel

    kernel = Kernel(VECTOR_ADD, "vector_add", arch="sm_90", use_cache=False)
    binary = kernel.compile()
    resources = kernel.resources
    return Check("", PASS, f"{nvrtc_version()} compiled vector_add to an sm_90 cubin in {binary.seconds * 1000:.0f} ms "
                           f"({resources.registers_per_thread} registers, {resources.spill_store_bytes} B spilled)")


def check_clang() -> Check:
    from .clang_hip import INSTALL_HINT, compile_for_amd, find_clang

    if find_clang() is None:
        return Check("", SKIP, "no clang found, so no AMD compile gate here", INSTALL_HINT)
    result = compile_for_amd(VECTOR_ADD, name="vector_add.hip", arch="gfx1201")
    if not result.ok:
        return Check("", FAIL, f"clang could not compile vector_add for gfx1201:\n{result.log.strip()}", INSTALL_HINT)
    return Check("", PASS, f"clang compiled vector_add to gfx1201 assembly in {result.seconds:.2f} s")


def check_triton_interpreter() -> Check:
    try:
        import torch
        import triton
        import triton.language as tl
    except ImportError as error:
        return Check("", SKIP, f"triton is not installed ({error})", "pip install triton")
    previous = os.environ.get("TRITON_INTERPRET")
    os.environ["TRITON_INTERPRET"] = "1"   # read when the kernel is decorated
    try:
        @triton.jit
        def add_kernel(a, b, out, n, BLOCK: tl.constexpr):
            offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
            mask = offsets < n
            tl.store(out + offsets, tl.load(a + offsets, mask=mask) + tl.load(b + offsets, mask=mask), mask=mask)
    finally:
        if previous is None:
            os.environ.pop("TRITON_INTERPRET", None)
        else:
            os.environ["TRITON_INTERPRET"] = previous
    a, b = torch.rand(1000), torch.rand(1000)
    out = torch.empty_like(a)
    add_kernel[(triton.cdiv(1000, 256),)](a, b, out, 1000, BLOCK=256)
    torch.testing.assert_close(out, a + b)
    return Check("", PASS, f"triton {triton.__version__} ran an add kernel on CPU tensors with TRITON_INTERPRET=1")


# ------------------------------------------------------------------------------------ environment


def _probe(function) -> str:
    try:
        return str(function())
    except Exception as error:  # noqa: BLE001 - a probe that fails shows why, in its row
        return f"unavailable ({type(error).__name__}: {_first_line(str(error))})"


def _torch_version() -> str:
    import torch
    return f"{torch.__version__} ({_torch_build(torch)})"


def _triton_version() -> str:
    try:
        import triton
    except ImportError:
        return "not installed"
    return triton.__version__


def _nvidia_driver() -> str:
    parts = []
    smi = shutil.which("nvidia-smi")
    if smi:
        done = _command(smi, "--query-gpu=driver_version", "--format=csv,noheader")
        if done.returncode == 0 and done.stdout.strip():
            parts.append(done.stdout.splitlines()[0].strip())
    try:
        from cuda.bindings import driver
        status, version = driver.cuDriverGetVersion()
        if int(status) == 0:
            parts.append(f"CUDA {version // 1000}.{version % 1000 // 10}")
    except Exception:  # noqa: BLE001 - no driver library
        pass
    return ", ".join(parts) or "not found"


def _amd_driver() -> str:
    try:
        with open("/sys/module/amdgpu/version") as file:
            return f"amdgpu {file.read().strip()}"
    except OSError:
        return "amdgpu (version not readable)" if os.path.exists("/dev/kfd") else "not found"


def _clang() -> str:
    from .clang_hip import INSTALL_HINT, find_clang
    clang = find_clang()
    if clang is None:
        return f"not found ({INSTALL_HINT})"
    first = _command(clang, "--version").stdout.splitlines()
    found = os.path.isfile("/usr/include/hip/hip_runtime.h")
    headers = "HIP headers found" if found else "HIP headers: not in /usr/include"
    return f"{clang}: {first[0].strip() if first else '?'}; {headers}"


def environment(vendor: str | None, version: str | None = None) -> dict[str, str]:
    """What the machine has, one string per row; a probe that fails says so in its value. ``version``:
    hello-gpu's own, passed down by the command line (runtime/ imports nothing above itself)."""
    from .compiler import nvrtc_version
    from .device import device_info, gpu_vendor

    rows: dict[str, str] = {}
    torch_vendor = None
    try:
        torch_vendor = gpu_vendor()
    except Exception:  # noqa: BLE001
        pass
    if torch_vendor is not None:
        try:
            import torch
            info = device_info()
            rows["GPU"] = f"{info.name} (device {info.index} of {torch.cuda.device_count()})"
            rows["arch"] = info.arch
            rows["SMs" if info.vendor == "nvidia" else "CUs"] = str(info.multiprocessors)
            rows["memory"] = f"{info.memory_bytes / 2**30:.1f} GiB"
            rows["L2 cache"] = f"{info.l2_bytes / 2**20:.1f} MiB"
        except Exception as error:  # noqa: BLE001
            rows["GPU"] = f"unavailable ({type(error).__name__}: {_first_line(str(error))})"
    else:
        rows["GPU"] = "none visible to PyTorch"
    rows["driver"] = _probe(_amd_driver if vendor == "amd" else _nvidia_driver)
    rows["CUDA runtime (torch)"] = _probe(lambda: __import__("torch").version.cuda or "-")
    rows["HIP runtime (torch)"] = _probe(lambda: __import__("torch").version.hip or "-")
    rows["torch"] = _probe(_torch_version)
    rows["triton"] = _probe(_triton_version)
    rows["python"] = f"{platform.python_version()} ({platform.python_implementation()}, {platform.machine()})"
    rows["NVRTC"] = _probe(nvrtc_version)
    rows["clang (AMD gate)"] = _probe(_clang)
    rows["hello-gpu"] = version or "-"
    return rows


# ------------------------------------------------------------------------------------------ run


def run_doctor(cpu_ok: bool = False, *, version: str | None = None) -> DoctorReport:
    """The three gates (or, without a GPU, the CPU-side checks) and the environment table."""
    platform_gate = _run(GATE_NAMES[0], gate_platform)
    vendor = platform_gate.data.get("vendor")
    if platform_gate.status == PASS:
        torch_gate = _run(GATE_NAMES[1], gate_torch, vendor)
        if torch_gate.status == PASS:
            kernel_gate = _run(GATE_NAMES[2], gate_kernel)
            if kernel_gate.status == FAIL:
                kernel_gate.hint = kernel_gate.hint or _GATE3_HINT
        else:
            kernel_gate = Check(GATE_NAMES[2], SKIP, "needs gate 2")
        cpu_checks = []
    else:
        if cpu_ok:
            platform_gate.status = SKIP   # no GPU is expected here
            platform_gate.detail += " (expected: --cpu-ok)"
        torch_gate = Check(GATE_NAMES[1], SKIP, "no GPU")
        kernel_gate = Check(GATE_NAMES[2], SKIP, "no GPU")
        cpu_checks = [_run("NVRTC compiles for sm_90", check_nvrtc),
                      _run("clang compiles for AMD gfx1201", check_clang),
                      _run("Triton interpreter (TRITON_INTERPRET=1)", check_triton_interpreter)]
    env = {}
    try:
        env = environment(vendor, version)
    except Exception as error:  # noqa: BLE001
        env = {"error": f"{type(error).__name__}: {error}"}
    return DoctorReport([platform_gate, torch_gate, kernel_gate], cpu_checks, env, cpu_ok)


# ------------------------------------------------------------------------------------------ output


def render(report: DoctorReport, console) -> None:
    from rich import box
    from rich.table import Table
    from rich.text import Text

    table_box = box.SIMPLE_HEAD if console.is_terminal else box.ASCII2
    styles = {PASS: "bold green", FAIL: "bold red", SKIP: "yellow"}

    env = Table(title="environment", box=table_box, title_justify="left", show_header=False)
    env.add_column("what", style="bold")
    env.add_column("value", overflow="fold")
    for key, value in report.environment.items():
        env.add_row(Text(key), Text(value))
    console.print(env)

    def checks_table(title: str, checks: list[Check], numbered: bool) -> Table:
        table = Table(title=title, box=table_box, title_justify="left")
        if numbered:
            table.add_column("#", justify="right")
        for column in ("check" if not numbered else "gate", "status", "detail", "s"):
            table.add_column(column, justify="right" if column == "s" else "left",
                             overflow="fold", no_wrap=column == "status")
        for index, check in enumerate(checks, 1):
            cells = [Text(check.name), Text(check.status, style=styles[check.status]), Text(check.detail),
                     Text(f"{check.seconds:.2f}" if check.seconds else "")]
            table.add_row(*([Text(str(index))] if numbered else []), *cells)
        return table

    console.print(checks_table("gates", report.gates, True))
    if not report.gpu_visible:
        console.print(Text("No GPU on this machine, so gates 2 and 3 were skipped."))
        console.print(Text("What still works here:"))
        console.print(checks_table("CPU-side checks", report.cpu_checks, False))
    for index, gate in enumerate(report.gates, 1):
        if gate.status == FAIL and gate.hint:
            console.print(Text(f"hint (gate {index}): {gate.hint}"), soft_wrap=True)
    for check in report.cpu_checks:
        if check.status != PASS and check.hint:
            console.print(Text(f"hint ({check.name}): {check.hint}"), soft_wrap=True)
    console.print(Text(report.summary, style="bold green" if report.exit_code == 0 else "bold red"), soft_wrap=True)
