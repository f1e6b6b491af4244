"""A rung's metadata, read from the rung file's own header (never from a second list to keep in sync).

In a ``.hip`` or ``.cu`` rung the header is the leading ``/* ... */`` comment; in a ``.py`` rung, the module
docstring. Inside, ``key: value`` lines at the start of a line; a value continues on the following
indented lines; any other line is free prose (kept as ``description``)::

    /*
    Thread per element: the first HIP rung, the simplest thing that can be correct.
    parent: v00_torch
    change: one thread per element, 256 threads per block
    hypothesis: the add is bandwidth-bound (12 bytes per FLOP), so even the simplest kernel
      should reach ~90% of copy bandwidth at 2^28: 1.0x torch.add
    prediction: 1.0x torch.add at 2^28
    outcome: not measured yet
    deterministic: yes, each output element is written once by one thread
    block: 256
    grid: ceil(n / 256)
    */

An unknown key is an error, not prose: a typo (``hypothsis:``) must not hide a required field.

Where a rung runs is its target: ``vendor: nvidia`` or ``amd``, ``arch: sm_90a`` (or ``gfx1201``), or
the older one-line ``requires: nvidia sm_90a``. A ``.cu`` rung (CUDA dialect) is NVIDIA's by its name.
All of them become one requirement (:attr:`Header.requires`, :func:`resolve_target`): a machine that
does not meet it skips the rung with the reason, the rung compiles for its declared arch, and the
compile gate compiles it for that vendor and arch only. Statements that contradict each other (a
``.cu`` rung with ``vendor: amd``; ``vendor: amd`` with ``arch: sm_90a``) and unknown arch strings
are header errors naming the file.

This module is the one home of the rung-file format: besides the header, which files are rungs
(:data:`HIP_RUNG`, :data:`CUDA_RUNG`, :data:`TRITON_RUNG`, :data:`PEER`; a ``vNN_name.py`` beside a
``.hip`` or ``.cu`` rung is its companion), the ``hello-gpu:`` directive comment lines (``// hello-gpu: record NAME`` claims a record;
``// hello-gpu: instantiate name<...>`` names a template instantiation in files that are not rungs),
the template instantiations of a rung (derived from ``entry: name<{T}>`` and ``dtypes``), and the
bytes a record's sha256 covers (:func:`measured_bytes`).
"""

from __future__ import annotations

import ast
import functools
import hashlib
import math
import re
from dataclasses import dataclass
from pathlib import Path

KEYS = ("parent", "change", "hypothesis", "prediction", "outcome", "requires", "vendor", "arch", "deterministic",
        "entry", "block", "grid", "dtypes", "package")
REQUIRED = ("parent", "change", "hypothesis")
# Words about the code, not code: editing them changes nothing a measurement saw, so they are not hashed.
PROSE_KEYS = ("change", "hypothesis", "prediction", "outcome")

# Rung files, told apart by name (hello_gpu.ops.registry). A vNN_name.py beside vNN_name.hip (or .cu) is its
# companion.
HIP_RUNG = re.compile(r"^v(\d{2})_([a-z0-9][a-z0-9_]*)\.hip$")
CUDA_RUNG = re.compile(r"^v(\d{2})_([a-z0-9][a-z0-9_]*)\.cu$")
# The C++ rungs, by suffix: the dialect they are compiled in.
CPP_RUNG_DIALECTS = {".hip": "hip", ".cu": "cuda"}
TRITON_RUNG = re.compile(r"^t(\d{2})_([a-z0-9][a-z0-9_]*)\.py$")
COMPANION = re.compile(r"^v(\d{2})_([a-z0-9][a-z0-9_]*)\.py$")
PEER = re.compile(r"^peer_([a-z0-9][a-z0-9_]*)\.py$")
TORCH_BASELINE_FILE = "v00_torch.py"

# torch dtype name -> the HIP-dialect C type a templated entry is instantiated with (``{T}``).
# hip_bfloat16 rather than __hip_bfloat16: every ROCm since 5 has it (HIP 5.2's headers, which the AMD
# compile gate uses, have only it), and on NVIDIA the prelude makes it __nv_bfloat16.
C_TYPES = {"float32": "float", "float64": "double", "float16": "__half", "bfloat16": "hip_bfloat16"}

# A directive is a comment line of its own, so prose that merely mentions the syntax is none.
DIRECTIVE = re.compile(r"^[ \t]*(?://|#|/\*)[ \t]*hello-gpu:[ \t]*(?P<verb>[a-z]+)\b[^\n]*\n?", re.M)
CLAIM = re.compile(r"^\s*(?://|#|/\*)\s*hello-gpu:\s*record\s+([A-Za-z0-9][A-Za-z0-9._-]*)")

_KEY_LINE = re.compile(r"^([a-z_]+):(?:\s+(.*))?$")

# A target: a vendor, then optionally an arch, then optionally a note ("nvidia sm_90a (wgmma)").
VENDORS = ("nvidia", "amd")
ARCH = re.compile(r"^(?:sm_\d{2,3}a?|gfx[0-9a-f]{3,4})$")
_REQUIRES = re.compile(r"^(nvidia|amd)(?:\s+((?:sm_\d+a?)|(?:gfx[0-9a-f]+)))?(?:$|[\s,;(])", re.IGNORECASE)

# Names a grid expression may use. Nothing else: the header is data, not code to run.
GRID_FUNCTIONS = {"ceil": lambda x: math.ceil(x), "min": min, "max": max}
GRID_NAMES = ("n", "itemsize", "sm_count", *GRID_FUNCTIONS)
_GRID_NODES = (ast.Expression, ast.BinOp, ast.UnaryOp, ast.Call, ast.Name, ast.Load, ast.Constant, ast.Tuple,
               ast.Add, ast.Sub, ast.Mult, ast.Div, ast.FloorDiv, ast.Mod, ast.Pow, ast.USub, ast.UAdd)


class HeaderError(ValueError):
    """A rung header that is missing, incomplete or malformed. The message names the file."""


@dataclass(frozen=True)
class Header:
    """The metadata of one rung. Text fields are stripped strings, None where the header is silent."""

    path: Path
    parent: str
    change: str
    hypothesis: str
    prediction: str | None = None
    outcome: str | None = None
    requires: str | None = None               # the target: requires:, vendor:, arch: and the suffix in one line
    deterministic_text: str | None = None     # "yes, one writer per element" / "no: atomics"
    entry: str | None = None
    block: int | None = None
    grid: str | None = None
    dtypes: tuple[str, ...] | None = None
    package: str | None = None                # a peer's Python package (``liger_kernel``); absent: the peer is skipped
    description: str = ""

    @property
    def deterministic(self) -> bool:
        """Declared bit-for-bit repeatable: the checker then runs it twice and compares every bit."""
        return bool(self.deterministic_text) and self.deterministic_text.lower().startswith("yes")

    @property
    def target(self) -> tuple[str, str | None] | None:
        """(vendor, arch or None) the rung runs on, or None where it runs on both vendors."""
        return parse_requires(self.requires, str(self.path)) if self.requires else None

    @property
    def parent_id(self) -> str | None:
        return None if self.parent.lower() == "none" else self.parent

    def grid_for(self, n: int, sm_count: int | None = None, itemsize: int | None = None) -> tuple[int, ...] | None:
        """The header's grid expression evaluated for ``n`` elements of ``itemsize`` bytes; None when the
        header has none."""
        if self.grid is None:
            return None
        return evaluate_grid(self.grid, n=n, sm_count=sm_count, itemsize=itemsize, where=str(self.path))


def _check_grid(expression: str, where: str) -> ast.Expression:
    """Parse a grid expression and refuse anything but arithmetic on n, itemsize, sm_count, ceil, min and max."""
    try:
        tree = ast.parse(expression, mode="eval")
    except SyntaxError as error:
        raise HeaderError(f"{where}: grid {expression!r} is not an expression: {error.msg}") from None
    for node in ast.walk(tree):
        if not isinstance(node, _GRID_NODES):
            raise HeaderError(f"{where}: grid {expression!r} uses {type(node).__name__}; only arithmetic on "
                              f"{', '.join(GRID_NAMES)} is allowed")
        if isinstance(node, ast.Name) and node.id not in GRID_NAMES:
            raise HeaderError(f"{where}: grid {expression!r} uses the name {node.id!r}; allowed names: "
                              f"{', '.join(GRID_NAMES)}")
        if isinstance(node, ast.Call) and not (isinstance(node.func, ast.Name) and node.func.id in GRID_FUNCTIONS
                                               and not node.keywords):
            raise HeaderError(f"{where}: grid {expression!r}: only ceil(), min() and max() may be called")
        if isinstance(node, ast.Constant) and (type(node.value) not in (int, float)):     # bool, str: refused
            raise HeaderError(f"{where}: grid {expression!r}: constants must be numbers, got {node.value!r}")
    return tree


@functools.lru_cache(maxsize=256)
def _compiled_grid(expression: str, where: str):
    """Checked and compiled once: parsing costs ~60 us, which a timed launch must not pay every call."""
    tree = _check_grid(expression, where)
    needs = {node.id for node in ast.walk(tree) if isinstance(node, ast.Name) and node.id in ("sm_count", "itemsize")}
    return compile(tree, where, "eval"), needs


def evaluate_grid(expression: str, *, n: int, sm_count: int | None = None, itemsize: int | None = None,
                  where: str = "evaluate_grid") -> tuple[int, ...]:
    """``"min(ceil(n / 256), sm_count * 8)"`` -> ``(grid_x,)`` (a tuple expression gives more dimensions).

    ``itemsize``, the bytes of one element of the first input, lets a grid count bytes: a block that
    moves a fixed number of 16-byte packs covers twice the bfloat16 elements it covers in float32
    (vector_add v06's grid counted float32 elements and left half its bfloat16 blocks empty, 9% of the
    time: records/nvidia-h200/vector_add-grid.json)."""
    code, needs = _compiled_grid(expression, where)
    for name, value in (("sm_count", sm_count), ("itemsize", itemsize)):
        if value is None and name in needs:
            raise HeaderError(f"{where}: grid {expression!r} needs {name}, which the caller did not give "
                              f"({'only known on a GPU' if name == 'sm_count' else 'the bytes of one input element'})")
    names = {"n": n, "sm_count": sm_count, "itemsize": itemsize, **GRID_FUNCTIONS}
    value = eval(code, {"__builtins__": {}}, names)   # noqa: S307 - checked in _compiled_grid
    dims = value if isinstance(value, tuple) else (value,)
    for dim in dims:
        # A float grid means a division without ceil(): the last partial block would be dropped.
        if isinstance(dim, bool) or not isinstance(dim, int) or dim < 0:
            raise HeaderError(f"{where}: grid {expression!r} gave {dim!r} for n={n}; grid sizes are whole numbers "
                              f"(wrap a division in ceil())")
    return tuple(dims)


def parse_requires(text: str, where: str) -> tuple[str, str | None]:
    """``"nvidia sm_90a (wgmma)"`` -> ``("nvidia", "sm_90a")``; ``"amd"`` -> ``("amd", None)``."""
    match = _REQUIRES.match(text.strip())
    if not match:
        raise HeaderError(f"{where}: requires {text!r} is not understood; write a vendor and optionally an arch, "
                          f"such as 'nvidia sm_90a' or 'amd gfx1201'")
    return match.group(1).lower(), (match.group(2) or "").lower() or None


def _arch_vendor(arch: str) -> str:
    return "nvidia" if arch.startswith("sm_") else "amd"


def resolve_target(fields: dict[str, str], path: Path) -> str | None:
    """The one requirement a rung's ``vendor:``, ``arch:``, ``requires:`` and file suffix make, or None.

    Each says something about the target; together they must agree: ``vendor: nvidia`` with ``arch:
    sm_90a`` is ``"nvidia sm_90a"``; a ``.cu`` rung with nothing more is ``"nvidia (a .cu rung: CUDA
    dialect)"``. A lone ``requires:`` is kept as written (its note included)."""
    path, where = Path(path), str(path)
    said: list[tuple[str, str, str | None]] = []            # (what said it, vendor, arch)
    if CUDA_RUNG.match(path.name):
        said.append(("the .cu suffix (CUDA dialect, NVIDIA only)", "nvidia", None))
    vendor = fields.get("vendor", "").strip()
    if "vendor" in fields:
        if vendor.lower() not in VENDORS:
            raise HeaderError(f"{where}: vendor {vendor!r} is not one of {', '.join(VENDORS)}")
        said.append((f"vendor: {vendor}", vendor.lower(), None))
    arch = fields.get("arch", "").strip()
    if "arch" in fields:
        if not ARCH.match(arch.lower()):
            raise HeaderError(f"{where}: arch {arch!r} is not an arch this framework knows; write an NVIDIA arch "
                              f"such as sm_90 or sm_90a (Hopper-only instructions: wgmma, setmaxnreg) or an AMD one "
                              f"such as gfx1201")
        said.append((f"arch: {arch}", _arch_vendor(arch.lower()), arch.lower()))
    requires = fields.get("requires")
    if requires:
        said.append((f"requires: {requires}", *parse_requires(requires, where)))
    if not said:
        return None
    for what, wanted_vendor, _ in said[1:]:
        if wanted_vendor != said[0][1]:
            raise HeaderError(f"{where}: {said[0][0]} and {what} contradict each other: one says {said[0][1]}, "
                              f"the other {wanted_vendor}")
    archs = [(what, wanted_arch) for what, _, wanted_arch in said if wanted_arch]
    for what, wanted_arch in archs[1:]:
        if wanted_arch != archs[0][1]:
            raise HeaderError(f"{where}: {archs[0][0]} and {what} name different archs; write the arch once")
    target = (said[0][1], archs[0][1] if archs else None)
    if requires and parse_requires(requires, where) == target:
        return requires
    text = " ".join(part for part in target if part)
    return f"{text} (a .cu rung: CUDA dialect)" if said[0][0].startswith("the .cu") and len(said) == 1 else text


def declared_target(path: Path, source: str | None = None) -> tuple[str, str | None] | None:
    """The (vendor, arch or None) a C++ rung file declares, for the compile gate; None for a file that is
    not a rung or a rung that runs on both vendors. A contradiction raises :class:`HeaderError` (a ValueError)."""
    path = Path(path)
    if not CUDA_RUNG.match(path.name) and not HIP_RUNG.match(path.name):
        return None
    source = path.read_text(encoding="utf-8") if source is None else source
    fields, _ = parse_fields(_leading_comment(source, str(path)), str(path))
    requirement = resolve_target(fields, path)
    return parse_requires(requirement, str(path)) if requirement else None


def header_text(path: Path) -> str:
    """The raw header of a rung file: the leading /* */ comment (.hip, .cu) or the module docstring (.py)."""
    path = Path(path)
    source = path.read_text(encoding="utf-8")
    if path.suffix == ".py":
        try:
            docstring = ast.get_docstring(ast.parse(source, filename=str(path)))
        except SyntaxError as error:
            raise HeaderError(f"{path}: not valid Python ({error.msg}, line {error.lineno})") from None
        if not docstring:
            raise HeaderError(f"{path}: no module docstring; a rung's metadata lives in it ({', '.join(REQUIRED)})")
        return docstring
    return _leading_comment(source, str(path))


def _leading_comment(source: str, where: str) -> str:
    stripped = source.lstrip()
    if not stripped.startswith("/*") or "*/" not in stripped:
        raise HeaderError(f"{where}: must begin with a /* ... */ comment holding the rung's metadata "
                          f"({', '.join(REQUIRED)})")
    return stripped[2:stripped.index("*/")]


def _split_dtypes(text: str | None) -> tuple[str, ...]:
    """``"float32 bfloat16"`` or ``"float32, bfloat16"`` -> ``("float32", "bfloat16")``."""
    return tuple(d for d in re.split(r"[,\s]+", text or "") if d)


def parse_fields(text: str, where: str) -> tuple[dict[str, str], str]:
    """``key: value`` fields (continuations joined with one space) and the remaining prose."""
    fields: dict[str, str] = {}
    prose: list[str] = []
    current: str | None = None
    for line in text.splitlines():
        if current is not None and line[:1].isspace() and line.strip():
            fields[current] = f"{fields[current]} {line.strip()}".strip()
            continue
        current = None
        match = _KEY_LINE.match(line.rstrip())
        if match:
            key, value = match.group(1), (match.group(2) or "").strip()
            if key not in KEYS:
                raise HeaderError(f"{where}: unknown header key {key!r}; known keys: {', '.join(KEYS)}")
            if key in fields:
                raise HeaderError(f"{where}: header key {key!r} appears twice")
            fields[key], current = value, key
        elif line.strip():
            prose.append(line.strip())
    return fields, " ".join(prose)


def parse_header(path: Path) -> Header:
    """Read and check the header of one rung file; every problem names the file."""
    path = Path(path)
    where = str(path)
    fields, description = parse_fields(header_text(path), where)
    missing = [key for key in REQUIRED if not fields.get(key)]
    if missing:
        raise HeaderError(f"{where}: header is missing {', '.join(missing)} (required: {', '.join(REQUIRED)}; "
                          f"parent is a rung id or 'none')")
    block = None
    if fields.get("block"):
        if not fields["block"].isdigit() or int(fields["block"]) <= 0:
            raise HeaderError(f"{where}: block must be a positive whole number of threads, got {fields['block']!r}")
        block = int(fields["block"])
    if fields.get("grid"):
        _check_grid(fields["grid"], where)          # refuse a bad expression now, not at launch
    dtypes = _split_dtypes(fields.get("dtypes")) or None
    deterministic = fields.get("deterministic")
    if deterministic and not re.match(r"(?i)(yes|no)\b", deterministic):
        raise HeaderError(f"{where}: deterministic must start with yes or no (then why), got {deterministic!r}")
    return Header(path=path, parent=fields["parent"], change=fields["change"], hypothesis=fields["hypothesis"],
                  prediction=fields.get("prediction"), outcome=fields.get("outcome"), requires=resolve_target(fields, path),
                  deterministic_text=deterministic, entry=fields.get("entry") or None, block=block,
                  grid=fields.get("grid") or None, dtypes=dtypes, package=fields.get("package") or None,
                  description=description)


# ------------------------------------------------------------------------------------- rung files


def is_rung_file(path: Path) -> bool:
    """A rung by its name: ``vNN_name.hip``, ``vNN_name.cu``, ``tNN_name.py``, ``peer_name.py`` or ``v00_torch.py``."""
    name = Path(path).name
    return (bool(HIP_RUNG.match(name) or CUDA_RUNG.match(name) or TRITON_RUNG.match(name) or PEER.match(name))
            or name == TORCH_BASELINE_FILE)


def companion_of(path: Path) -> Path | None:
    """The ``vNN_name.py`` launcher beside a ``vNN_name.hip`` or ``vNN_name.cu`` rung, when there is one."""
    path = Path(path)
    companion = path.with_suffix(".py")
    return companion if (HIP_RUNG.match(path.name) or CUDA_RUNG.match(path.name)) and companion.is_file() else None


def claims(text: str) -> list[tuple[int, str]]:
    """(line number, record name) of each ``hello-gpu: record NAME`` comment line of a file's text."""
    return [(number, match.group(1)) for number, line in enumerate(text.splitlines(), 1)
            if (match := CLAIM.match(line))]


def instantiate_entry(entry: str, dtype: str, where: str) -> str:
    """``"vector_add<{T}>"`` for ``"bfloat16"`` -> ``"vector_add<hip_bfloat16>"``."""
    if dtype not in C_TYPES:
        raise HeaderError(f"{where}: entry {entry!r} needs a C type for {dtype}; known: {', '.join(C_TYPES)}")
    return entry.replace("{T}", C_TYPES[dtype])


def rung_instantiations(path: Path, source: str | None = None) -> list[str] | None:
    """The template instantiations the compile gate compiles for a rung: ``entry`` for each of ``dtypes``.

    None for a file that is not a rung: its ``// hello-gpu: instantiate`` comment lines say (the gate's
    own rule). A rung states them once, in its header, so such a comment in a rung is an error.
    """
    path = Path(path)
    if path.suffix not in CPP_RUNG_DIALECTS or not is_rung_file(path):
        return None
    source = path.read_text(encoding="utf-8") if source is None else source
    for match in DIRECTIVE.finditer(source):
        if match.group("verb") == "instantiate":
            line = source.count("\n", 0, match.start()) + 1
            raise HeaderError(f"{path}:{line}: a rung's instantiations come from its header's entry and dtypes; "
                              f"remove the '// hello-gpu: instantiate' line")
    fields, _ = parse_fields(_leading_comment(source, str(path)), str(path))
    entry = fields.get("entry")
    if not entry or "{T}" not in entry:
        return []
    dtypes = _split_dtypes(fields.get("dtypes"))
    if not dtypes:
        raise HeaderError(f"{path}: entry {entry!r} is a template; the header's dtypes: says which to instantiate")
    return [instantiate_entry(entry, dtype, str(path)) for dtype in dtypes]


# --------------------------------------------------------------------------------- measured bytes

_DOCSTRING_OPENER = re.compile(r"[rRuU]?(\"\"\"|'''|\"|')")


def _header_body_span(text: str, path: Path) -> tuple[int, int] | None:
    """Where the inside of a rung's leading header lies in ``text`` (start, end), or None without one."""
    if path.suffix in CPP_RUNG_DIALECTS:
        start = len(text) - len(text.lstrip())
        if not text.startswith("/*", start):
            return None
        end = text.find("*/", start + 2)
        return None if end < 0 else (start + 2, end)
    try:
        module = ast.parse(text)
    except SyntaxError:
        return None                      # hashed whole; loading the rung reports the error
    first = module.body[0] if module.body else None
    if not (isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant)
            and isinstance(first.value.value, str)):
        return None
    lines = text.splitlines(keepends=True)
    offsets = [0]
    for line in lines:
        offsets.append(offsets[-1] + len(line))

    def index(line: int, column: int) -> int:           # ast columns count UTF-8 bytes
        return offsets[line - 1] + len(lines[line - 1].encode("utf-8")[:column].decode("utf-8"))

    start, end = index(first.lineno, first.col_offset), index(first.end_lineno, first.end_col_offset)
    opener = _DOCSTRING_OPENER.match(text, start, end)
    if opener is None:
        return None
    return opener.end(), end - len(opener.group(1))


def _code_lines_of_header(body: str) -> list[str]:
    """The lines of a header that hold code-bearing fields (parent, entry, block, grid, dtypes, ...),
    each with its continuation lines, as written; prose and the prose fields are left out."""
    lines = body.splitlines(keepends=True)
    # The margin a docstring's later lines share is no indentation of theirs (as inspect.cleandoc).
    margin = min((len(line) - len(line.lstrip()) for line in lines[1:] if line.strip()), default=0)
    kept, keep, current = [], False, None
    for number, raw in enumerate(lines):
        line = raw if number == 0 else raw[margin:]
        if current is not None and line[:1].isspace() and line.strip():
            if keep:
                kept.append(raw)
            continue
        match = _KEY_LINE.match(line.rstrip())
        current = match.group(1) if match else None
        keep = current is not None and current not in PROSE_KEYS
        if keep:
            kept.append(raw)
    return kept


def measured_bytes(path: Path) -> bytes:
    """The bytes a record's sha256 covers: what the code is, not what is said about it.

    A file's bytes, less (a) in a rung, the prose of its leading header: the description and the
    change, hypothesis, prediction and outcome fields (the outcome is written from the record after
    the measurement; none of them is code), while parent, entry, block, grid, dtypes, requires,
    deterministic and package stay hashed; and (b) in any file, whole ``hello-gpu:`` directive
    comment lines (``// hello-gpu: record NAME``: file-format metadata, not code).
    """
    path = Path(path)
    data = path.read_bytes()
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return data                      # not text: no header, no directive lines
    if is_rung_file(path):
        span = _header_body_span(text, path)
        if span is not None:
            start, end = span
            text = text[:start] + "\n" + "".join(_code_lines_of_header(text[start:end])) + text[end:]
    return DIRECTIVE.sub("", text).encode("utf-8")


def measured_sha256(path: Path) -> str:
    """sha256 of :func:`measured_bytes`: the hasher records use for every file of this repository."""
    return hashlib.sha256(measured_bytes(path)).hexdigest()
