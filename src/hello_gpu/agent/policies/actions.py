"""Concrete, deterministic source edits: the moves the scripted policy makes, found by parsing the source.

Every action is read off the code, never guessed. A HIP rung's parameters are ``constexpr int`` lines
(comments masked first), the header's ``block:`` and ``grid:`` lines and ``__launch_bounds__``; its
companion launcher's are module-level ``NAME = 123`` assignments (Python ``ast``). A Triton rung's are
module-level constants, ``num_warps=`` / ``num_stages=`` keywords of ``kernel[grid](...)`` launches and
the integer leaves of the expressions they name. Where the values an edit must move together disagree
(a kernel's ``kBlock = 256`` and its launcher's ``BLOCK = 128``), the action does not apply.

Each action has ``applies(source, companion) -> bool`` and ``apply(source, companion) -> (new_source,
new_companion, description)``; ``apply`` raises :class:`ActionError` where ``applies`` is False. Values
move along ladders of powers of two inside limits (threads per block 64..1024, num_warps 1..32 ...),
one step per action, so a search can walk back when a step loses.

Two things move together with a work size, because the launch depends on them:

- the ``n / D`` divisor of a header ``grid:`` (``ceil(n / 256)`` covers the elements one block handles);
  doubling the threads per block or the elements per thread doubles ``D`` too, else half the blocks
  would be idle (up) or half the elements never written (down);
- a companion's ``ELEMENTS_PER_BLOCK`` / ``MIN_ELEMENTS_PER_BLOCK``, which mean the same.

Structural edits come from the ladders themselves (:class:`LadderStep`): where the current source has
the same structure as a hand-written rung (the same code once comments and integer literals are set
aside), a descendant of that rung in the ladder is a candidate, and so is a rung on another branch of
its ancestors (a sibling's change tried instead), never an ancestor; the target rung's header (change,
hypothesis, prediction) is the hypothesis. Negative examples (headers that say so) and rungs that load
sibling files by path (they cannot stand alone as one candidate file) are left out.
"""

from __future__ import annotations

import ast
import io
import re
import tokenize
from dataclasses import dataclass
from pathlib import Path

from ...ops.registry import load_op

# --------------------------------------------------------------------------------------------- ladders
# Threads per block: 64 is two warps (the least a block-wide tree treats as a block), 1024 the hardware
# limit on NVIDIA and AMD.
BLOCK_LADDER = (64, 128, 256, 512, 1024)
# num_warps of a Triton program: 1..32 warps is 32..1024 threads, the same hardware limit.
WARPS_LADDER = (1, 2, 4, 8, 16, 32)
# Software pipelining depth of Triton loops; Triton's default on NVIDIA is 3. Beyond 5 the shared
# memory of the stages rarely fits with a useful tile.
STAGES_LADDER = (1, 2, 3, 4, 5)
DEFAULT_NUM_WARPS = 4
DEFAULT_NUM_STAGES = 3
# 128 bits is the widest single load on the H200 (sm_90) and on RDNA/CDNA; 4 bytes is a scalar float.
PACK_BYTES_LADDER = (4, 8, 16)


def powers_of_two(low: int, high: int) -> tuple[int, ...]:
    values, value = [], 1
    while value <= high:
        if value >= low:
            values.append(value)
        value *= 2
    return tuple(values)


def step_along(ladder: tuple[int, ...], value: int, direction: int) -> int | None:
    """The next value of ``ladder`` after ``value`` in ``direction`` (+1 / -1), None past either end."""
    if value in ladder:
        index = ladder.index(value) + direction
        return ladder[index] if 0 <= index < len(ladder) else None
    bigger = [v for v in ladder if v > value]
    smaller = [v for v in ladder if v < value]
    if direction > 0:
        return bigger[0] if bigger else None
    return smaller[-1] if smaller else None


class ActionError(ValueError):
    """An action applied where it does not apply; the message says what was looked for."""


# --------------------------------------------------------------------------------------------- text edits
@dataclass(frozen=True)
class Edit:
    """Replace ``text[start:end]`` (character offsets) with ``new``."""

    start: int
    end: int
    new: str


def apply_edits(text: str, edits: list[Edit]) -> str:
    ordered = sorted(set(edits), key=lambda e: e.start)
    for first, second in zip(ordered, ordered[1:]):
        if second.start < first.end:
            raise ActionError(f"overlapping edits at characters {first.start} and {second.start}")
    for edit in reversed(ordered):
        text = text[:edit.start] + edit.new + text[edit.end:]
    return text


@dataclass(frozen=True)
class Site:
    """An integer literal in a file: its value and where it is (``file`` is "source" or "companion")."""

    file: str
    start: int
    end: int
    value: int
    label: str

    def to(self, value: int) -> Edit:
        return Edit(self.start, self.end, str(value))


def _line_offsets(text: str) -> list[int]:
    offsets, total = [0], 0
    for line in text.splitlines(keepends=True):
        total += len(line)
        offsets.append(total)
    return offsets


def _node_span(text: str, lines: list[int], node: ast.AST) -> tuple[int, int]:
    """Character offsets of an AST node (``col_offset`` counts UTF-8 bytes, so convert per line)."""
    def offset(lineno: int, col: int) -> int:
        line = text[lines[lineno - 1]:lines[lineno] if lineno < len(lines) else len(text)]
        return lines[lineno - 1] + len(line.encode("utf-8")[:col].decode("utf-8", errors="ignore"))
    return offset(node.lineno, node.col_offset), offset(node.end_lineno, node.end_col_offset)


# --------------------------------------------------------------------------------------------- Python parsing
def _is_int(node: ast.AST) -> bool:
    return isinstance(node, ast.Constant) and type(node.value) is int


class PythonFile:
    """A parsed Python file (a Triton rung or a HIP companion) and the integer sites in it."""

    def __init__(self, text: str, file: str):
        self.text, self.file = text, file
        self.tree = ast.parse(text)
        self.lines = _line_offsets(text)

    def site(self, node: ast.Constant, label: str) -> Site:
        start, end = _node_span(self.text, self.lines, node)
        return Site(self.file, start, end, node.value, label)

    def constants(self) -> dict[str, Site]:
        """Module-level ``NAME = <int>`` (the last assignment wins, as at import)."""
        found: dict[str, Site] = {}
        for statement in self.tree.body:
            if isinstance(statement, ast.Assign) and len(statement.targets) == 1:
                target, value = statement.targets[0], statement.value
            elif isinstance(statement, ast.AnnAssign) and statement.value is not None:
                target, value = statement.target, statement.value
            else:
                continue
            if isinstance(target, ast.Name) and _is_int(value):
                found[target.id] = self.site(value, target.id)
        return found

    def imported_names(self) -> set[str]:
        names = set()
        for node in ast.walk(self.tree):
            if isinstance(node, ast.ImportFrom):
                names.update(alias.asname or alias.name for alias in node.names)
        return names

    def borrows_from_rungs(self) -> bool:
        """Imports another rung's module (``from hello_gpu.ops.x.v05_... import``) or loads one by path."""
        for node in ast.walk(self.tree):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("hello_gpu.ops.") \
                    and re.search(r"\.[vt]\d\d_", node.module or ""):
                return True
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "load_module":
                return True
        return False

    def borrowed_constants(self) -> dict[str, int] | None:
        """Module-level integer constants of the rung modules this file imports from (read, not run);
        None where one cannot be found or this file loads a rung by path."""
        found: dict[str, int] = {}
        for node in ast.walk(self.tree):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "load_module":
                return None
            if isinstance(node, ast.ImportFrom) and re.search(r"^hello_gpu\.ops\..*\.[vt]\d\d_", node.module or ""):
                try:
                    import importlib.util
                    spec = importlib.util.find_spec(node.module)
                    text = Path(spec.origin).read_text(encoding="utf-8")
                except (ImportError, AttributeError, TypeError, OSError, ValueError):
                    return None
                found.update({name: site.value for name, site in PythonFile(text, "borrowed").constants().items()})
        return found

    def functions(self) -> dict[str, ast.FunctionDef]:
        return {node.name: node for node in self.tree.body if isinstance(node, ast.FunctionDef)}

    def jit_kernels(self) -> dict[str, ast.FunctionDef]:
        """``@triton.jit`` (or ``@jit``) functions."""
        kernels = {}
        for name, function in self.functions().items():
            for decorator in function.decorator_list:
                target = decorator.func if isinstance(decorator, ast.Call) else decorator
                text = ast.unparse(target)
                if text in ("triton.jit", "jit"):
                    kernels[name] = function
        return kernels

    def launches(self) -> list[tuple[ast.Call, str, ast.FunctionDef]]:
        """``kernel[grid](...)`` calls of this file's jit kernels: (call, kernel name, enclosing function)."""
        kernels = self.jit_kernels()
        found = []
        for function in self.functions().values():
            if function.name in kernels:
                continue
            for node in ast.walk(function):
                if isinstance(node, ast.Call) and isinstance(node.func, ast.Subscript) \
                        and isinstance(node.func.value, ast.Name) and node.func.value.id in kernels:
                    found.append((node, node.func.value.id, function))
        return found

    def leaves(self, node: ast.AST, function: ast.FunctionDef | None, label: str, depth: int = 0) -> tuple[list[Site], bool]:
        """The integer literals a value can take (through names, ``a if c else b`` and helper functions'
        returns), and whether every path was understood."""
        if depth > 4:
            return [], False
        if _is_int(node):
            return [self.site(node, label)], True
        if isinstance(node, ast.IfExp):
            body, body_ok = self.leaves(node.body, function, label, depth + 1)
            other, other_ok = self.leaves(node.orelse, function, label, depth + 1)
            return body + other, body_ok and other_ok
        if isinstance(node, ast.Name):
            if function is not None:
                local = [s for s in ast.walk(function) if isinstance(s, ast.Assign) and len(s.targets) == 1
                         and isinstance(s.targets[0], ast.Name) and s.targets[0].id == node.id]
                if len(local) == 1:
                    return self.leaves(local[0].value, function, label, depth + 1)
                if local:
                    return [], False
            constant = self.constants().get(node.id)
            return ([Site(constant.file, constant.start, constant.end, constant.value, node.id)], True) \
                if constant else ([], False)
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
            helper = self.functions().get(node.func.id)
            if helper is not None:
                sites, ok = [], True
                for statement in ast.walk(helper):
                    if isinstance(statement, ast.Return) and statement.value is not None:
                        more, more_ok = self.leaves(statement.value, helper, label, depth + 1)
                        sites += more
                        ok = ok and more_ok
                return sites, ok
        return [], False

    def keyword_sites(self, keyword: str) -> tuple[list[Site], list[ast.Call]]:
        """Integer sites behind ``keyword=`` of every launch, and the launches that lack the keyword."""
        sites, missing = [], []
        for call, _, function in self.launches():
            values = [k.value for k in call.keywords if k.arg == keyword]
            if not values:
                missing.append(call)
                continue
            found, _ = self.leaves(values[0], function, keyword)
            sites += found
        unique = {(s.start, s.end): s for s in sites}
        return sorted(unique.values(), key=lambda s: s.start), missing

    def insert_keyword(self, call: ast.Call, text: str) -> Edit:
        """An edit adding ``, text`` before the launch's closing parenthesis."""
        _, end = _node_span(self.text, self.lines, call)
        close = end - 1
        assert self.text[close] == ")"
        before = self.text[:close].rstrip()
        separator = "" if before.endswith(("(", ",")) else ", "
        if before.endswith(","):
            separator = " "
        return Edit(close, close, separator + text)


# --------------------------------------------------------------------------------------------- HIP parsing
_CONSTEXPR = re.compile(r"\bconstexpr\s+(?:int|int64_t|unsigned|size_t|long)\s+(\w+)\s*=\s*(\d+)\s*;")
_LAUNCH_BOUNDS = re.compile(r"__launch_bounds__\(\s*(\w+)\s*(?:,\s*(\d+)\s*)?\)")


def mask_c_comments(text: str) -> str:
    """``text`` with every comment and string literal replaced by spaces (same length, newlines kept)."""
    out, i, n = list(text), 0, len(text)
    while i < n:
        two = text[i:i + 2]
        if two == "//":
            j = text.find("\n", i)
            j = n if j < 0 else j
        elif two == "/*":
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
        elif text[i] == '"':
            j = i + 1
            while j < n and text[j] != '"':
                j += 2 if text[j] == "\\" else 1
            j = min(n, j + 1)
        else:
            i += 1
            continue
        for k in range(i, j):
            if out[k] != "\n":
                out[k] = " "
        i = j
    return "".join(out)


class HipFile:
    """A HIP rung: its ``constexpr int`` constants, ``__launch_bounds__``, and header ``block:`` / ``grid:``."""

    def __init__(self, text: str):
        self.text = text
        self.code = mask_c_comments(text)
        stripped = text.lstrip()
        self.header_span = (len(text) - len(stripped), len(text) - len(stripped) + stripped.index("*/")) \
            if stripped.startswith("/*") and "*/" in stripped else (0, 0)

    def constants(self) -> dict[str, Site]:
        found = {}
        for match in _CONSTEXPR.finditer(self.code):
            found[match.group(1)] = Site("source", match.start(2), match.end(2), int(match.group(2)), match.group(1))
        return found

    def launch_bounds(self) -> list[re.Match]:
        return list(_LAUNCH_BOUNDS.finditer(self.code))

    def header_field(self, key: str) -> tuple[int, int, str] | None:
        """(start, end, value) of a ``key: value`` line of the header (one line only)."""
        start, end = self.header_span
        match = re.compile(rf"^{key}:[ \t]*(.+?)[ \t]*$", re.MULTILINE).search(self.text, start, end)
        return (match.start(1), match.end(1), match.group(1)) if match else None

    def header_block(self) -> Site | None:
        found = self.header_field("block")
        if found and found[2].isdigit():
            return Site("source", found[0], found[1], int(found[2]), "block:")
        return None


# --------------------------------------------------------------------------------------------- grid expressions
def _grid_nodes(expression: str):
    try:
        return ast.parse(expression, mode="eval")
    except SyntaxError:
        return None


def _counts_n(node) -> bool:
    """``n``, or ``n * itemsize`` (either order): what a grid divides by the work of one block, in
    elements or in bytes (vector_add v06: ``ceil(n * itemsize / 8192)``)."""
    def name(part):
        return part.id if isinstance(part, ast.Name) else None
    if name(node) == "n":
        return True
    return isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mult) and \
        {name(node.left), name(node.right)} == {"n", "itemsize"}


def grid_divisor_edits(text: str, offset: int, expression: str, factor_num: int, factor_den: int,
                       prefer: int | None) -> list[Edit] | None:
    """Scale every ``n / D`` (or ``n * itemsize / D``) divisor of a header grid expression by num/den (``D`` a literal or a product
    of literals: the factor equal to ``prefer`` moves, else the first). None where it cannot be done
    exactly (a divisor not made of literals, or not divisible)."""
    tree = _grid_nodes(expression)
    if tree is None:
        return None
    edits = []
    for node in ast.walk(tree):
        if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Div, ast.FloorDiv)) and _counts_n(node.left):
            factors, stack = [], [node.right]
            while stack:
                part = stack.pop()
                if _is_int(part):
                    factors.append(part)
                elif isinstance(part, ast.BinOp) and isinstance(part.op, ast.Mult):
                    stack += [part.right, part.left]
                else:
                    return None
            if not factors:
                return None
            factors.sort(key=lambda f: f.col_offset)
            chosen = next((f for f in factors if f.value == prefer), factors[0])
            scaled = chosen.value * factor_num
            if scaled % factor_den:
                return None
            edits.append(Edit(offset + chosen.col_offset, offset + chosen.end_col_offset, str(scaled // factor_den)))
    return edits


def grid_per_sm_sites(expression: str, offset: int) -> list[Site]:
    """``sm_count * K`` (or ``K * sm_count``) in a grid expression: the K literals."""
    tree = _grid_nodes(expression)
    sites = []
    if tree is None:
        return sites
    for node in ast.walk(tree):
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mult):
            pair = (node.left, node.right)
            for name, literal in (pair, pair[::-1]):
                if isinstance(name, ast.Name) and name.id == "sm_count" and _is_int(literal):
                    sites.append(Site("source", offset + literal.col_offset, offset + literal.end_col_offset,
                                      literal.value, "sm_count *"))
    return sites


# --------------------------------------------------------------------------------------------- actions
# What each action is for: the scripted policy's rule table picks actions by these kinds.
KINDS = ("vectorise", "bytes_in_flight", "fewer_passes", "work_per_thread", "fewer_programs", "tile",
         "pipelining", "block_size", "num_warps", "registers", "restructure", "l2_reuse", "split_k")


@dataclass
class Action:
    """One move. ``kind`` places it in the rule table; ``direction`` +1 grows the parameter, -1 shrinks it."""

    name: str
    route: str
    kind: str
    direction: int = +1
    reason: str = ""            # why this move can make the kernel faster, with numbers where known
    # An operator's own moves (matmul_actions: "matmul") stand in for the generic parameter moves where
    # they apply: the generic ones would edit the same numbers without the operator's budgets.
    family = ""

    def preference(self, analysis: dict, source: str, companion: str | None = None) -> float | None:
        """None where the analysis says this move does not fit (the policy skips it); else a rank inside
        its kind, lower first."""
        return 0.0

    def applies(self, source: str, companion: str | None = None) -> bool:
        try:
            return self._plan(source, companion) is not None
        except (SyntaxError, ValueError):
            return False

    def apply(self, source: str, companion: str | None = None) -> tuple[str, str | None, str]:
        plan = self._plan(source, companion)
        if plan is None:
            raise ActionError(f"{self.name} does not apply to this source: {self.reason or self.kind}")
        source_edits, companion_edits, description = plan
        new_source = apply_edits(source, source_edits)
        new_companion = apply_edits(companion, companion_edits) if companion is not None else None
        if new_source == source and new_companion == companion:
            raise ActionError(f"{self.name} changed nothing")
        return new_source, new_companion, description

    def hypothesis(self, description: str) -> str:
        return f"{description}: {self.reason}" if self.reason else description

    def _plan(self, source: str, companion: str | None):   # -> (source edits, companion edits, text) | None
        raise NotImplementedError


def _split(sites: list[Site]) -> tuple[list[Site], list[Site]]:
    return [s for s in sites if s.file == "source"], [s for s in sites if s.file == "companion"]


def _changes_text(name: str, pairs: list[tuple[int, int]]) -> str:
    unique = list(dict.fromkeys(pairs))
    if len(unique) == 1:
        return f"{name} {unique[0][0]} -> {unique[0][1]}"
    return f"{name} " + ", ".join(f"{old} -> {new}" for old, new in unique)


# ---------------------------------------------------------------- Triton
@dataclass
class TritonConstant(Action):
    """A module-level constant of a Triton rung (``TILE = 1024``), moved one step along its ladder."""

    names: tuple[str, ...] = ()
    ladder: tuple[int, ...] = ()

    def _plan(self, source, companion):
        constants = PythonFile(source, "source").constants()
        for name in self.names:
            site = constants.get(name)
            if site is None:
                continue
            new = step_along(self.ladder, site.value, self.direction)
            if new is None or site.value not in self.ladder:
                return None
            return [site.to(new)], [], f"{name} {site.value} -> {new}"
        return None


@dataclass
class TritonLaunchKeyword(Action):
    """``num_warps=`` or ``num_stages=`` of the launches: every integer it can take moves one step; a
    launch without the keyword gets one (Triton's default, one step on)."""

    keyword: str = "num_warps"
    ladder: tuple[int, ...] = WARPS_LADDER
    default: int = DEFAULT_NUM_WARPS
    needs_loop: bool = False        # num_stages only matters for a kernel with a loop to pipeline

    def _plan(self, source, companion):
        parsed = PythonFile(source, "source")
        launches = parsed.launches()
        if not launches:
            return None
        if self.needs_loop:
            kernels = parsed.jit_kernels()
            looping = {name for name, fn in kernels.items() if any(isinstance(n, ast.For) for n in ast.walk(fn))}
            if not any(name in looping for _, name, _ in launches):
                return None
        sites, missing = parsed.keyword_sites(self.keyword)
        edits, pairs = [], []
        for site in sites:
            new = step_along(self.ladder, site.value, self.direction)
            if new is not None and site.value in self.ladder:
                edits.append(site.to(new))
                pairs.append((site.value, new))
        new_default = step_along(self.ladder, self.default, self.direction)
        for call in missing:
            if new_default is not None:
                edits.append(parsed.insert_keyword(call, f"{self.keyword}={new_default}"))
                pairs.append((self.default, new_default))
        if not edits:
            return None
        return edits, [], _changes_text(self.keyword, pairs)


# ---------------------------------------------------------------- HIP
def _mirror_name(kernel_name: str) -> str:
    """``kPacksPerThread`` -> ``PACKS_PER_THREAD``; ``BLOCK`` stays ``BLOCK``."""
    name = kernel_name[1:] if re.match(r"^k[A-Z]", kernel_name) else kernel_name
    return re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "_", name).upper()


# Companion constants that count the elements one block covers: they scale with threads per block
# and with elements per thread.
ELEMENTS_PER_BLOCK_NAMES = ("ELEMENTS_PER_BLOCK", "MIN_ELEMENTS_PER_BLOCK")


def _scale_sites(sites: list[Site], num: int, den: int) -> list[Edit] | None:
    edits = []
    for site in sites:
        if (site.value * num) % den:
            return None
        edits.append(site.to(site.value * num // den))
    return edits


@dataclass
class HipScaled(Action):
    """A HIP rung's work size: threads per block (``kBlock``, ``block:``, ``__launch_bounds__(256)``,
    the launcher's ``BLOCK``) or elements per thread (``kPerThread``, ``kPacksPerThread``, ``kUnroll``
    ...), in the kernel and its launcher together, with the grid divisor and the launcher's elements
    per block scaled by the same factor."""

    kernel_names: tuple[str, ...] = ()
    companion_names: tuple[str, ...] = ()
    use_header_block: bool = False
    use_launch_bounds: bool = False
    ladder: tuple[int, ...] = BLOCK_LADDER
    label: str = "threads per block"

    def _sites(self, source: str, companion: str | None) -> list[Site] | None:
        hip = HipFile(source)
        constants = hip.constants()
        sites = [constants[name] for name in self.kernel_names if name in constants]
        kernel_names = [s.label for s in sites]
        if self.use_header_block and hip.header_block() is not None:
            sites.append(hip.header_block())
        value_hint = sites[0].value if sites else None
        if self.use_launch_bounds:
            for match in hip.launch_bounds():
                if match.group(1).isdigit():
                    sites.append(Site("source", match.start(1), match.end(1), int(match.group(1)),
                                      "__launch_bounds__"))
        if companion is not None:
            parsed = PythonFile(companion, "companion")
            local = parsed.constants()
            wanted = list(self.companion_names) + [_mirror_name(n) for n in kernel_names]
            for name in dict.fromkeys(wanted):
                if name in local:
                    sites.append(local[name])
                elif name in parsed.imported_names():
                    return None             # the launcher takes it from another rung: cannot move both
            borrowed = parsed.borrowed_constants()
            if borrowed is None or any(name in borrowed and name not in local for name in wanted):
                return None                 # code borrowed from another rung reads the old value: refuse
        if not sites:
            return None
        values = {s.value for s in sites}
        if len(values) != 1 or (value_hint is not None and value_hint not in values):
            return None                     # the places disagree: not one parameter
        if self.use_header_block:
            # A bare literal equal to the block size in the kernel code (``__shared__ float s[256]``) may
            # assume it: moving the named places and not that one would break the kernel. Refuse.
            spans = [(s.start, s.end) for s in sites if s.file == "source"]
            for match in re.finditer(rf"\b{sites[0].value}\b", hip.code):
                if not any(start <= match.start() < end for start, end in spans):
                    return None
        return sites

    def _plan(self, source, companion):
        sites = self._sites(source, companion)
        if sites is None:
            return None
        old = sites[0].value
        if old not in self.ladder:
            return None
        new = step_along(self.ladder, old, self.direction)
        if new is None:
            return None
        num, den = (new // old, 1) if new > old else (1, old // new)
        source_sites, companion_sites = _split(sites)
        source_edits = [s.to(new) for s in source_sites]
        companion_edits = [s.to(new) for s in companion_sites]
        hip = HipFile(source)
        grid = hip.header_field("grid")
        if grid is not None:
            scaled = grid_divisor_edits(source, grid[0], grid[2], num, den, prefer=old)
            if scaled is None:
                return None
            source_edits += scaled
        if companion is not None:
            constants = PythonFile(companion, "companion").constants()
            per_block = [constants[n] for n in ELEMENTS_PER_BLOCK_NAMES if n in constants]
            scaled = _scale_sites(per_block, num, den)
            if scaled is None:
                return None
            companion_edits += scaled
        return source_edits, companion_edits, f"{self.label} {old} -> {new}"


@dataclass
class HipBlocksPerSm(Action):
    """Blocks per SM of a machine-sized grid: ``sm_count * 8`` in the header's grid, or the launcher's
    ``BLOCKS_PER_SM``."""

    ladder: tuple[int, ...] = powers_of_two(1, 32)

    def _plan(self, source, companion):
        hip = HipFile(source)
        sites = []
        grid = hip.header_field("grid")
        if grid is not None:
            sites += grid_per_sm_sites(grid[2], grid[0])
        if companion is not None:
            constants = PythonFile(companion, "companion").constants()
            sites += [constants[n] for n in ("BLOCKS_PER_SM", "PROGRAMS_PER_SM") if n in constants]
        if not sites or len({s.value for s in sites}) != 1:
            return None
        old = sites[0].value
        new = step_along(self.ladder, old, self.direction)
        if new is None or old not in self.ladder:
            return None
        source_sites, companion_sites = _split(sites)
        return [s.to(new) for s in source_sites], [s.to(new) for s in companion_sites], \
            f"blocks per SM {old} -> {new}"


@dataclass
class HipLaunchBoundsMinBlocks(Action):
    """``__launch_bounds__(T)`` -> ``__launch_bounds__(T, B)``: ask the compiler to fit B blocks of T
    threads per SM, which caps registers at 65536 / (B x T) a thread (the register file of an H200 SM)."""

    def _plan(self, source, companion):
        hip = HipFile(source)
        matches = hip.launch_bounds()
        if not matches:
            return None
        constants = hip.constants()
        edits, pairs = [], []
        for match in matches:
            threads_text, blocks_text = match.group(1), match.group(2)
            threads = int(threads_text) if threads_text.isdigit() else \
                (constants[threads_text].value if threads_text in constants else None)
            if threads is None:
                return None
            old = int(blocks_text) if blocks_text else 1
            limit = max(1, 2048 // threads)          # 2048 resident threads per SM on the H200
            ladder = powers_of_two(1, limit)
            new = step_along(ladder, old, self.direction)
            if new is None:
                return None
            text = f"__launch_bounds__({threads_text})" if new == 1 else f"__launch_bounds__({threads_text}, {new})"
            edits.append(Edit(match.start(), match.end(), text))
            pairs.append((old, new))
        return edits, [], _changes_text("min blocks per SM in __launch_bounds__", pairs)


_PACK_ALIGN = re.compile(r"\balignas\((\d+)\)\s+Pack\b")
_PACK_LANES = re.compile(r"\b(\d+)\s*/\s*sizeof\(T\)")
_ALIGN_CHECK = re.compile(r"%\s*(\d+)\s*\)")


@dataclass
class HipPackWidth(Action):
    """The vector width of a rung that already has a ``struct alignas(16) Pack { T lane[16 / sizeof(T)]; }``:
    every ``alignas(W) Pack``, ``W / sizeof(T)`` and ``% W)`` alignment test moves together."""

    ladder: tuple[int, ...] = PACK_BYTES_LADDER

    def _plan(self, source, companion):
        hip = HipFile(source)
        code = hip.code
        if "uint4" in code or "float4" in code or not _PACK_ALIGN.search(code):
            return None                  # a hard-coded 16-byte type would not follow
        sites = [Site("source", m.start(1), m.end(1), int(m.group(1)), "pack")
                 for pattern in (_PACK_ALIGN, _PACK_LANES, _ALIGN_CHECK) for m in pattern.finditer(code)]
        if len({s.value for s in sites}) != 1:
            return None
        old = sites[0].value
        new = step_along(self.ladder, old, self.direction)
        if new is None or old not in self.ladder:
            return None
        if companion is not None and (re.search(r"\b16\b", mask_python_comments(companion))
                                      or PythonFile(companion, "companion").borrows_from_rungs()):
            return None                  # the launcher counts 16-byte packs itself (or borrows code that may)
        edits = [s.to(new) for s in sites]
        grid = hip.header_field("grid")
        if grid is not None:             # a block's tile counts lanes: the grid divisor follows the width
            num, den = (new // old, 1) if new > old else (1, old // new)
            scaled = grid_divisor_edits(source, grid[0], grid[2], num, den, prefer=None)
            if scaled is None:
                return None
            edits += scaled
        return edits, [], f"vector width {old * 8} -> {new * 8} bits"


def mask_python_comments(text: str) -> str:
    """Python source without comments and docstrings (for searching code only)."""
    try:
        tokens = list(tokenize.generate_tokens(io.StringIO(text).readline))
    except (tokenize.TokenError, IndentationError):
        return text
    return " ".join(t.string for t in tokens if t.type not in (tokenize.COMMENT, tokenize.STRING))


# ---------------------------------------------------------------- structural: a step along the ladder
def structure_signature(source: str, companion: str | None, route: str) -> str:
    """The code with comments, docstrings and integer literals set aside: two rungs that differ only in
    parameters (vector_add t02 and t03) have the same signature."""
    def python(text):
        try:
            tokens = list(tokenize.generate_tokens(io.StringIO(text).readline))
            tree = ast.parse(text)
        except (tokenize.TokenError, IndentationError, SyntaxError):
            return text
        docstrings = set()           # lines of module, class and function docstrings: prose, not code
        for node in ast.walk(tree):
            if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.body \
                    and isinstance(node.body[0], ast.Expr) and isinstance(node.body[0].value, ast.Constant) \
                    and isinstance(node.body[0].value.value, str):
                docstrings.update(range(node.body[0].lineno, node.body[0].end_lineno + 1))
        kept = []
        for token in tokens:
            if token.type in (tokenize.COMMENT, tokenize.NL, tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT):
                continue
            if token.type == tokenize.STRING and token.start[0] in docstrings:
                continue
            kept.append("#" if token.type == tokenize.NUMBER else token.string)
        return " ".join(kept)

    def hip(text):
        code = mask_c_comments(text)
        code = re.sub(r"\b\d+\b", "#", code)
        return " ".join(code.split())

    if route == "triton":
        return python(source)
    return hip(source) + " || " + (python(companion) if companion else "")


# Keywords of a rung's "change:" line -> the kind of move it is (first match wins).
STRUCTURAL_KINDS = (
    # matmul's SIMT steps raise the FLOPs per loaded byte (the compute-bound rule's first kind)
    ("tile", ("register blocking", "shared-memory tiling", "warp tiling")),
    ("vectorise", ("128-bit", "128 bit", "vector", "float4", "pack", "16-byte")),
    ("bytes_in_flight", ("in flight", "unroll", "loads first")),
    ("fewer_passes", ("one pass", "single pass", "online", "one launch", "fewer launches", "last block",
                      "instead of three", "fuse", "registers", "in registers")),
    ("work_per_thread", ("rows per", "per thread", "per program", "grid-stride", "grid stride", "tile",
                         "first add", "many elements", "two elements")),
    ("block_size", ("warps", "threads", "block per row", "block size")),
)


def structural_kind(text: str) -> str:
    lowered = text.lower()
    for kind, words in STRUCTURAL_KINDS:
        if any(word in lowered for word in words):
            return kind
    return "restructure"


def _is_negative_example(rung) -> bool:
    text = " ".join(filter(None, (rung.metadata.description, rung.metadata.change))).lower()
    return "negative example" in text


def _standalone(text: str | None) -> bool:
    """A file that still works when written somewhere else (no ``Path(__file__)`` sibling loading)."""
    return text is None or ("__file__" not in text and "load_module(" not in text)


@dataclass
class LadderStep(Action):
    """Become ``target`` (a rung of the ladder) where the current source has the structure of one of
    ``origins`` (ancestors of ``target``): a structural edit with the rung's own header as hypothesis."""

    origins: tuple[tuple[str, int], ...] = ()     # (structure signature, ladder steps down to the target)
    target_id: str = ""
    target_source: str = ""
    target_companion: str | None = None
    target_hypothesis: str = ""
    target_dtypes: tuple[str, ...] | None = None   # the target's header dtypes where fewer than the op's

    def covers(self, dtypes) -> bool:
        """Whether the target runs every one of ``dtypes`` (empty: the operator's, all of them). A candidate
        whose header leaves out a task dtype fails its check, so such a step is not worth a round."""
        if self.target_dtypes is None:
            return True
        return bool(dtypes) and set(dtypes) <= set(self.target_dtypes)

    def distance(self, source: str, companion: str | None) -> int | None:
        """Ladder steps from the rung whose structure ``source`` has down to the target (1: a child)."""
        signature = structure_signature(source, companion, self.route)
        depths = [depth for origin, depth in self.origins if origin == signature]
        return min(depths) if depths else None

    def _plan(self, source, companion):
        if self.distance(source, companion) is None:
            return None
        return None if self.target_source == source and self.target_companion == companion else ("ladder", None, None)

    def apply(self, source, companion=None):
        if self._plan(source, companion) is None:
            raise ActionError(f"{self.name}: the current source does not have the structure this step starts from")
        return self.target_source, self.target_companion, self.name

    def hypothesis(self, description: str) -> str:
        return f"{description}. {self.target_hypothesis}".strip()


ACTION_TEXT_LIMIT = 160


def ladder_steps(op_name: str, route: str, ops_root: str | None = None) -> list[LadderStep]:
    """Every structural step the ladder of ``op_name`` offers on ``route``: from each rung (and anything
    with its structure) to each of its descendants, and to the other branches of its ancestors (a
    sibling's change tried instead of this rung's), never back to an ancestor. ``origins`` give the
    distance in the ladder tree (steps up to the common ancestor plus steps down), so the policy can
    try the nearest first. Empty where the op has no ladder."""
    try:
        op = load_op(op_name, ops_root)        # ops_root: the task's own operator folder (--ops-root)
    except Exception:               # not an op of hello_gpu.ops (a KernelBench problem): no ladder
        return []
    rungs = [r for r in op.rungs if r.route == route]
    texts = {}
    for rung in rungs:
        source = rung.path.read_text(encoding="utf-8")
        companion = rung.companion.read_text(encoding="utf-8") if rung.companion else None
        texts[rung.id] = (source, companion)
    by_id = {r.id: r for r in rungs}

    def lineage(rung_id: str) -> list[str]:
        """The rung and its ancestors on this route, nearest first."""
        chain = [rung_id]
        while by_id[chain[-1]].metadata.parent_id in by_id and len(chain) <= len(by_id):
            chain.append(by_id[chain[-1]].metadata.parent_id)
        return chain

    signatures = {rung_id: structure_signature(*texts[rung_id], route) for rung_id in by_id}
    steps: dict[str, LadderStep] = {}
    for rung in rungs:
        if _is_negative_example(rung) or not all(_standalone(t) for t in texts[rung.id]):
            continue
        target_line = lineage(rung.id)
        origins = []
        for other in by_id:
            if other in target_line:            # the target itself or one of its ancestors
                if other != rung.id:
                    origins.append((signatures[other], target_line.index(other)))
                continue
            other_line = lineage(other)
            if rung.id in other_line:           # the target is an ancestor of this one: a step back
                continue
            common = next((r for r in other_line if r in target_line), None)
            if common is not None:              # a cousin: up to the common ancestor, down to the target
                origins.append((signatures[other], other_line.index(common) + target_line.index(common)))
        if not origins:
            continue
        target_signature = signatures[rung.id]
        kept = tuple((s, d) for s, d in origins if s != target_signature)
        if not kept:
            continue
        header = rung.metadata
        change = " ".join(header.change.split())
        if len(change) > ACTION_TEXT_LIMIT:          # the action is a label; the hypothesis has the rest
            change = change[:ACTION_TEXT_LIMIT].rsplit(" ", 1)[0] + " ..."
        hypothesis = " ".join(f"{header.change} -- {header.hypothesis} Predicted by the rung: "
                              f"{header.prediction or 'none'}.".split())
        steps[rung.id] = LadderStep(
            name=f"ladder step to {rung.id}: {change}", route=route,
            kind=structural_kind(change + " " + header.description.split("\n")[0]),
            reason=hypothesis, origins=kept, target_id=rung.id,
            target_source=texts[rung.id][0], target_companion=texts[rung.id][1], target_hypothesis=hypothesis,
            target_dtypes=None if header.dtypes is None or set(op.spec.DTYPES) <= set(header.dtypes)
            else tuple(header.dtypes))
    return [steps[key] for key in sorted(steps)]


# --------------------------------------------------------------------------------------------- catalogue
TILE_NAMES = ("BLOCK", "TILE", "BLOCK_SIZE", "TILE_SIZE")
KERNEL_BLOCK_NAMES = ("kBlock", "BLOCK", "kThreads", "kBlockSize", "kThreadsPerBlock")
COMPANION_BLOCK_NAMES = ("BLOCK", "THREADS", "BLOCK_SIZE")
# Elements (or packs) one thread handles, and the least each may drop to: kPerThread values are split
# into 16-byte packs of up to 8 lanes (bfloat16), so fewer than 8 would leave a thread no whole pack.
PER_THREAD_NAMES = {"kPerThread": (8, 128), "kPacksPerThread": (1, 16), "kUnroll": (1, 16), "UNROLL": (1, 16),
                    "kChunk": (1, 64), "kElementsPerThread": (1, 64), "kItemsPerThread": (1, 64),
                    "kHeldPerThread": (4, 64)}


def _both(cls, name, kind_up, kind_down, reason_up, reason_down, **fields) -> list[Action]:
    return [cls(name=f"{name} up", kind=kind_up, direction=+1, reason=reason_up, **fields),
            cls(name=f"{name} down", kind=kind_down, direction=-1, reason=reason_down, **fields)]


# Module-level constants of Triton rungs: (label, names, ladder, kind up, kind down, why up, why down).
TRITON_CONSTANTS = (
    ("tile", TILE_NAMES, powers_of_two(64, 32768), "tile", "tile",
     "twice the elements per program: half the programs, twice the loads in flight per program",
     "half the elements per program: twice the programs, fewer registers each (more resident)"),
    ("finish tile", ("FINISH_BLOCK",), powers_of_two(128, 65536), "fewer_passes", "tile",
     "a wider final step: fewer loop trips in the one-program finish",
     "a narrower final step: fewer idle lanes when there are few partials"),
    ("elements per program", ("ELEMENTS_PER_PROGRAM",), powers_of_two(256, 65536), "work_per_thread",
     "fewer_programs", "more elements per program: fewer programs to launch and schedule, more loads in flight each",
     "fewer elements per program: more programs to spread over the SMs"),
    ("rows per program", ("ROWS_PER_PROGRAM", "ROWS"), powers_of_two(1, 64), "work_per_thread", "fewer_programs",
     "more rows per program: fewer programs and more bytes in flight for short rows",
     "fewer rows per program: more programs in flight over the SMs"),
    ("values per thread", ("VALUES_PER_THREAD",), powers_of_two(4, 64), "registers", "num_warps",
     "more values per thread: fewer warps per program (num_warps follows), fewer to synchronise",
     "fewer values per thread: more warps per program, fewer registers each"),
    ("programs per SM", ("PROGRAMS_PER_SM",), powers_of_two(1, 32), "bytes_in_flight", "fewer_programs",
     "more resident programs per SM: more loads in flight (Little's law)",
     "fewer programs: less per-program fixed cost and a smaller finish"),
)


def triton_actions() -> list[Action]:
    actions: list[Action] = []
    for label, names, ladder, kind_up, kind_down, why_up, why_down in TRITON_CONSTANTS:
        actions += _both(TritonConstant, label, kind_up, kind_down, why_up, why_down, route="triton", names=names,
                         ladder=ladder)
    actions += _both(TritonLaunchKeyword, "num_warps", "num_warps", "registers",
                     "twice the threads per program: the same work in half the values per thread",
                     "half the threads per program: more values (and loads in flight) per thread, "
                     "fewer warps to synchronise in reductions",
                     route="triton", keyword="num_warps", ladder=WARPS_LADDER, default=DEFAULT_NUM_WARPS)
    actions += _both(TritonLaunchKeyword, "num_stages", "pipelining", "registers",
                     "one more loop iteration's loads in flight while the current one computes",
                     "one stage fewer: less shared memory and registers, more programs resident",
                     route="triton", keyword="num_stages", ladder=STAGES_LADDER, default=DEFAULT_NUM_STAGES,
                     needs_loop=True)
    return actions


def hip_actions() -> list[Action]:
    actions: list[Action] = []
    actions += _both(HipScaled, "threads per block", "block_size", "block_size",
                     "twice the threads per block: half the blocks to schedule, the same work per thread",
                     "half the threads per block: smaller blocks fit the SM's registers in finer steps "
                     "(occupancy), and the tail wave is shorter",
                     route="hip", kernel_names=KERNEL_BLOCK_NAMES, companion_names=COMPANION_BLOCK_NAMES,
                     use_header_block=True, use_launch_bounds=True, ladder=BLOCK_LADDER, label="threads per block")
    for name, (low, high) in PER_THREAD_NAMES.items():
        actions += _both(HipScaled, name, "work_per_thread", "registers",
                         f"{name} doubled: twice the independent loads a thread issues before it waits, "
                         f"half the threads or blocks for the same bytes",
                         f"{name} halved: fewer registers a thread, so more threads resident per SM",
                         route="hip", kernel_names=(name,), ladder=powers_of_two(low, high), label=name)
    actions += _both(HipBlocksPerSm, "blocks per SM", "bytes_in_flight", "fewer_programs",
                     "more blocks per SM in a machine-sized grid: more warps with loads in flight",
                     "fewer blocks per SM: no second partial wave when registers allow fewer resident blocks",
                     route="hip")
    actions += _both(HipLaunchBoundsMinBlocks, "launch bounds", "registers", "registers",
                     "a register cap from __launch_bounds__ min blocks: more blocks resident per SM",
                     "a looser register cap: fewer spills, fewer resident blocks",
                     route="hip")
    actions += _both(HipPackWidth, "vector width", "vectorise", "restructure",
                     "wider loads: fewer load instructions for the same bytes",
                     "narrower loads (a control: expect slower when memory instructions limit)",
                     route="hip")
    return actions


def catalogue(route: str, op: str | None = None, ops_root: str | None = None) -> list[Action]:
    """Every action for a route: the ladder's structural steps (for an op of hello_gpu.ops, or of the
    operator folder ``ops_root``), then the parameter moves."""
    structural = ladder_steps(op, route, ops_root) if op else []
    return [*structural, *(triton_actions() if route == "triton" else hip_actions())]
