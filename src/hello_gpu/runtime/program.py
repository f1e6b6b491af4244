"""Whole course-style files: every ``__global__`` kernel of a program that also holds host code.

A course file is a whole program: kernels and ``__device__`` helpers, then ``main()`` with
``hipMalloc``/``hipMemcpy``/``hipLaunchKernelGGL``, ``printf`` and ``<vector>``. A GPU compiler for
device code (NVRTC, hipRTC, clang ``--cuda-device-only`` on a machine without the host's headers)
cannot take the host half, so hello-gpu compiles the device half only: host code is blanked out
(every character but newlines turned into a space), so every line keeps its number and a compile
error points at the file's own line.

What is device code is read from the text, not from a C++ front end:

- kept: functions and variables marked ``__global__``/``__device__``/``__constant__``/``__shared__``
  (with their templates), ``static_assert``, ``using namespace``, namespace aliases and using-declarations
  (``namespace cg = cooperative_groups;``, ``using std::min;``), every preprocessor line except
  host-only ``#include``s, and the types, constants (``const``/``constexpr``) and ``constexpr``
  functions that the kept code names;
- left out: other functions (``main``, host helpers), host variables, types and constants that no
  device code names, and ``#include <X>`` of a header device code cannot use (``<vector>``,
  ``<iostream>``...: anything but the HIP/CUDA headers and the C/C++ headers the preludes cover).

A kernel made by a macro (``#define KERNEL(name) __global__ void name(...)``) cannot be read from the
text: :func:`device_source` refuses such a file with a message that names the macro.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from .prelude import STANDARD_HEADERS
from .signature import KernelDeclaration, find_kernels, split_top_level, strip_comments


class ProgramError(ValueError):
    """A whole program whose kernels hello-gpu cannot find or read."""


# `#include <X>` kept in a whole program: headers with device code or the names the preludes provide.
_DEVICE_HEADER = re.compile(r"(hip/|hip_|cuda|cooperative_groups|mma\.h|sm_\d+_intrinsics|crt/|curand_kernel)")
_DEVICE_WORDS = re.compile(r"\b(__global__|__device__|__constant__|__shared__|__managed__)\b")
_IDENTIFIER = re.compile(r"[A-Za-z_]\w*")


@dataclass(frozen=True)
class LeftOut:
    """A part of the program that is not compiled: host code, or a declaration no kernel uses."""

    line: int
    what: str        # "function main()", "#include <vector>", "variable h_a"

    def __str__(self) -> str:
        return f"line {self.line}: {self.what}"


@dataclass
class DeviceSource:
    """A program's device half: ``text`` has the original's length and newlines, host code blanked."""

    text: str
    kernels: list[KernelDeclaration]
    left_out: list[LeftOut] = field(default_factory=list)

    @property
    def has_host_code(self) -> bool:
        """Did the program hold code that only a host compiler takes (a function, a variable, an include)?"""
        return any(not part.what.startswith(("type ", "constant ")) for part in self.left_out)


def _blank(text: str) -> str:
    return re.sub(r"[^\n]", " ", text)


def _line(text: str, offset: int) -> int:
    return text.count("\n", 0, offset) + 1


def _directive_spans(clean: str) -> list[tuple[int, int]]:
    """(start, end) of every preprocessor directive, continuation lines included."""
    spans = []
    for match in re.finditer(r"(?m)^[ \t]*#(?:[^\n]*\\\n)*[^\n]*", clean):
        spans.append((match.start(), match.end()))
    return spans


def _hidden_kernel_macros(clean: str, spans: list[tuple[int, int]]) -> list[tuple[str, int]]:
    """Macros whose body holds ``__global__``: (name, line of the #define)."""
    found = []
    for start, end in spans:
        match = re.match(r"[ \t]*#[ \t]*define[ \t]+([A-Za-z_]\w*)", clean[start:end])
        if match and "__global__" in clean[start + match.end():end]:
            found.append((match.group(1), _line(clean, start)))
    return found


def _matching(text: str, open_index: int, opening: str, closing: str) -> int:
    depth = 0
    for index in range(open_index, len(text)):
        if text[index] == opening:
            depth += 1
        elif text[index] == closing:
            depth -= 1
            if depth == 0:
                return index
    raise ProgramError(f"line {_line(text, open_index)}: this {opening!r} is never closed")


def _collapse_parens(text: str) -> str:
    """``f(int a = 3) const`` -> ``f() const``: parenthesised groups emptied, innermost first."""
    previous = None
    while previous != text:
        previous, text = text, re.sub(r"\([^()]*\)", "\x00", text)
    return text.replace("\x00", "()")


# A function definition's head: ends with its parameter list, then qualifiers or a trailing return type.
_FUNCTION_HEAD = re.compile(r"\)\s*(?:(?:const|noexcept|override|final|mutable|__attribute__\s*\(\))\s*|->[^{=;]*)*$")


def _strip_template_prefix(head: str) -> str:
    match = re.match(r"\s*template\s*<", head)
    while match:
        close = _matching(head.replace("<", "(").replace(">", ")"), match.end() - 1, "(", ")")
        head = head[close + 1:]
        match = re.match(r"\s*template\s*<", head)
    return head


def _declared_names(head: str, kind: str) -> list[str]:
    """The names a type, constant or function declaration introduces (best effort, from the text)."""
    head = _strip_template_prefix(head)
    if kind == "type":
        match = re.search(r"\b(?:struct|class|union|enum(?:\s+class|\s+struct)?)\s+(?:__attribute__\s*\(\(.*?\)\)\s*)?"
                          r"(?:alignas\s*\([^)]*\)\s*)?([A-Za-z_]\w*)", head)
        alias = re.match(r"\s*using\s+([A-Za-z_]\w*)\s*=", head)
        if alias:
            return [alias.group(1)]
        if re.match(r"\s*typedef\b", head):
            pointer = re.search(r"\(\s*\*\s*([A-Za-z_]\w*)\s*\)", head)
            if pointer:
                return [pointer.group(1)]
            # `typedef short Short8 __attribute__((ext_vector_type(8)));`: the name comes before the attribute
            bare = re.sub(r"__attribute__\s*\(\(.*?\)\)", " ", re.sub(r"\{.*\}", " ", head, flags=re.S), flags=re.S)
            names = _IDENTIFIER.findall(bare)
            return names[-1:]
        return [match.group(1)] if match else []
    if kind == "function":
        match = re.search(r"([A-Za-z_]\w*)\s*\(", head)
        return [match.group(1)] if match else []
    names = []
    for part in split_top_level(head):
        declarator = re.split(r"[=\[{(]", part, maxsplit=1)[0]
        words = _IDENTIFIER.findall(declarator)
        if words:
            names.append(words[-1])
    return names


@dataclass
class _Declaration:
    start: int
    end: int
    head: str            # the text before a function's body (the whole declaration otherwise)
    kind: str            # "device", "keep", "host-function", "host-variable", "function", "type", "constant"
    names: list[str]


def _classify(code: str, start: int, end: int, body_start: int | None) -> _Declaration:
    text = code[start:end]
    head = code[start:body_start] if body_start is not None else text
    bare = _strip_template_prefix(head).strip()
    if _DEVICE_WORDS.search(head):
        return _Declaration(start, end, head, "device", [])
    if re.match(r"(static_assert|using\s+namespace)\b", bare) or not bare.strip(" ;"):
        return _Declaration(start, end, head, "keep", [])
    # `namespace cg = cooperative_groups;` and `using std::min;` name things for the code after them, which
    # may be device code: kept (read as a host variable, the alias was blanked and every cg:: name failed).
    if re.match(r"namespace\s+[A-Za-z_]\w*\s*=", bare) or re.match(r"using\s+(?:typename\s+)?[\w:]*::\w+\s*;?$", bare):
        return _Declaration(start, end, head, "keep", [])
    # struct alignas(16) Pack {...}: attributes aside, a class head has no parenthesis (a function's has).
    class_head = re.sub(r"\b(?:alignas|__align__|__attribute__|__declspec)\s*\(\)", "",
                        _collapse_parens(bare.split("{")[0]))
    if re.match(r"(typedef|using)\b", bare) or (re.match(r"(?:[\w:]+\s+)*?(struct|class|union|enum)\b", bare)
                                                  and "(" not in class_head):
        return _Declaration(start, end, head, "type", _declared_names(head, "type"))
    is_function = body_start is not None and _FUNCTION_HEAD.search(_collapse_parens(head))
    if is_function:
        kind = "function" if re.search(r"\bconstexpr\b", head) else "host-function"
        return _Declaration(start, end, head, kind, _declared_names(head, "function"))
    before_value = re.split(r"=", bare, maxsplit=1)[0]
    if "(" in before_value and "=" not in bare and body_start is None and not re.search(r"\bconst(expr)?\b", bare):
        return _Declaration(start, end, head, "host-function", _declared_names(head, "function"))   # a prototype
    if re.search(r"\b(constexpr|const)\b", before_value):
        return _Declaration(start, end, head, "constant", _declared_names(bare.rstrip(";"), "constant"))
    # A variable has a type and a name (`float* d_a;`, `int count = 0;`); anything else (a macro used as
    # a statement, text we cannot read) stays, and the compiler judges it.
    if len(_IDENTIFIER.findall(before_value)) < 2 and "*" not in before_value:
        return _Declaration(start, end, head, "keep", [])
    return _Declaration(start, end, head, "host-variable", _declared_names(bare.rstrip(";"), "constant"))


def _top_level_declarations(code: str) -> list[_Declaration]:
    """Split comment-, string- and directive-free text into namespace-scope declarations, looking
    through ``namespace X {`` and ``extern "C" {`` blocks (their braces are kept as they are)."""
    declarations = []
    position, length = 0, len(code)
    while position < length:
        match = re.compile(r"\s*").match(code, position)
        position = match.end()
        if position >= length:
            break
        opener = re.compile(r"(?:inline\s+)?namespace\b[^{;=]*\{|extern\s*\{").match(code, position)
        if opener:
            position = opener.end()
            continue
        if code[position] == "}":
            position += 1
            continue
        if code[position] == ";":
            position += 1
            continue
        # One declaration: to a `;` at depth 0, or to the `}` closing a function body.
        index, body_start = position, None
        while index < length:
            char = code[index]
            if char == "(":
                index = _matching(code, index, "(", ")") + 1
                continue
            if char == "[":
                index = _matching(code, index, "[", "]") + 1
                continue
            if char == ";":
                index += 1
                break
            if char == "{":
                close = _matching(code, index, "{", "}")
                flat = _collapse_parens(code[position:index])
                if "=" in flat or not _FUNCTION_HEAD.search(flat):
                    index = close + 1       # a class body or an initializer: the `;` follows
                    continue
                body_start, index = index, close + 1
                break
            if char == "}":
                break                       # a namespace closes: the declaration ended without `;`
            index += 1
        declarations.append(_classify(code, position, index, body_start))
        position = index
    return declarations


def _describe(declaration: _Declaration, code: str) -> str:
    if not declaration.names:
        words = " ".join(code[declaration.start:declaration.end].split())
        return f"declaration '{words[:40]}{'...' if len(words) > 40 else ''}'"
    names = ", ".join(declaration.names)
    return {"host-function": f"function {names}()", "host-variable": f"variable {names}",
            "function": f"function {names}()", "type": f"type {names}",
            "constant": f"constant {names}"}[declaration.kind]


def launched_instantiations(source: str, templates) -> list[str]:
    """Instantiations of the template kernels ``templates`` that a program's host code launches:
    ``HIP_KERNEL_NAME(tiled<16>)``, ``hipLaunchKernelGGL(tiled<16>, ...)`` or ``tiled<16><<<...>>>``."""
    clean = strip_comments(source)
    found: list[str] = []
    for name in templates:
        pattern = rf"(?<![\w:]){re.escape(name)}\s*<([^<>;(){{}}]*(?:<[^<>;(){{}}]*>[^<>;(){{}}]*)*)>\s*(?=[,)]|<<<)"
        for match in re.finditer(pattern, clean):
            entry = f"{name}<{', '.join(part.strip() for part in match.group(1).split(','))}>"
            if entry not in found:
                found.append(entry)
    return found


def device_source(source: str, file_name: str = "the source") -> DeviceSource:
    """The device half of ``source`` (see the module's docstring): same length, same lines.

    Raises :class:`ProgramError` when a macro makes kernels, or the braces do not balance."""
    clean = strip_comments(source)
    # Char literals may hold braces ('{'); blank them like strings (a digit separator 1'000 holds none).
    clean = re.sub(r"'(?:\\.|[^'\\\n])'", lambda m: _blank(m.group(0)), clean)
    spans = _directive_spans(clean)
    hiding = _hidden_kernel_macros(clean, spans)
    if hiding:
        listed = ", ".join(f"{name} (line {line})" for name, line in hiding)
        raise ProgramError(
            f"{file_name}: the macro {listed} expands to a __global__ kernel. hello-gpu finds kernels and "
            f"their parameters in the source text and cannot see through macros; write the kernel out "
            f"(a template kernel, instantiated by name, covers the variants a macro would stamp out)")
    code = list(clean)
    for start, end in spans:
        code[start:end] = _blank(clean[start:end])
    code_text = "".join(code)

    output = list(source)
    left_out: list[LeftOut] = []
    for start, end in spans:
        include = re.match(r"[ \t]*#[ \t]*include[ \t]*<([^>]+)>", clean[start:end])
        if include:
            # The header name, from the source (strip_comments leaves <...> alone).
            header = include.group(1).strip()
            if header not in STANDARD_HEADERS and not _DEVICE_HEADER.match(header):
                output[start:end] = _blank(source[start:end])
                left_out.append(LeftOut(_line(source, start), f"#include <{header}>"))

    declarations = _top_level_declarations(code_text)
    kept = [d for d in declarations if d.kind in ("device", "keep")]
    candidates = [d for d in declarations if d.kind in ("function", "type", "constant")]
    used = set(_IDENTIFIER.findall(" ".join(code_text[d.start:d.end] for d in kept)))
    # The template arguments of the kernels main() launches (tiled<kBlock><<<...>>>) are compiled as names
    # of instantiations: the constants and types they name are device code's too.
    templates = [kernel.name for kernel in find_kernels(code_text) if kernel.template]
    for entry in launched_instantiations(code_text, templates):
        used |= set(_IDENTIFIER.findall(entry[entry.index("<"):]))
    changed = True
    while changed:                       # a kept type may name another type or constant: to a fixpoint
        changed = False
        for declaration in list(candidates):
            if any(name in used for name in declaration.names):
                candidates.remove(declaration)
                kept.append(declaration)
                used |= set(_IDENTIFIER.findall(code_text[declaration.start:declaration.end]))
                changed = True
    for declaration in declarations:
        if declaration in kept:
            continue
        output[declaration.start:declaration.end] = _blank(source[declaration.start:declaration.end])
        start = declaration.start + len(code_text[declaration.start:declaration.end]) - \
            len(code_text[declaration.start:declaration.end].lstrip())
        left_out.append(LeftOut(_line(source, start), _describe(declaration, code_text)))
    left_out.sort(key=lambda part: part.line)
    text = "".join(output)
    return DeviceSource(text, find_kernels(text), left_out)


def read_program(path) -> tuple[str, str, str]:
    """(source, file name, dialect) of a .hip/.cu/.cpp file; .cu is CUDA, anything else HIP."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"no such file: {path}")
    return path.read_text(encoding="utf-8", errors="replace"), path.name, "cuda" if path.suffix == ".cu" else "hip"
