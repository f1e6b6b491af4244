"""Read a kernel's calling convention from its C signature.

``__global__ void vector_add(const float* a, const float* b, float* out, int n)`` says everything
a caller needs: ``a`` and ``b`` are input tensors of float32, ``out`` is an output tensor of
float32, ``n`` an int32 scalar. This module turns that text into a list of :class:`Parameter`.

It is a small parser, not a C++ front end: it understands pointers (with ``const`` before or after
the type, ``__restrict__``), scalars of the usual C types and their standard spellings
(``std::size_t``, ``ptrdiff_t``, ``std::int64_t``, ``unsigned long int``...), ``__launch_bounds__``,
kernels inside named or anonymous namespaces, and templates that are instantiated by name
(``entry="scale<float, 256>"``). Anything else is refused with an error that names what it did not
understand and lists what it does.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

# C element type -> torch dtype name. A pointer to one of these takes a tensor of that dtype.
POINTER_ELEMENT_TYPES: dict[str, str] = {
    "float": "float32",
    "double": "float64",
    "half": "float16",
    "__half": "float16",
    "_Float16": "float16",
    "__nv_bfloat16": "bfloat16",
    "__hip_bfloat16": "bfloat16",
    "hip_bfloat16": "bfloat16",
    "bfloat16": "bfloat16",
    "char": "int8",
    "signed char": "int8",
    "int8_t": "int8",
    "unsigned char": "uint8",
    "uint8_t": "uint8",
    "short": "int16",
    "int16_t": "int16",
    "unsigned short": "uint16",
    "uint16_t": "uint16",
    "int": "int32",
    "int32_t": "int32",
    "unsigned": "uint32",
    "unsigned int": "uint32",
    "uint32_t": "uint32",
    "long": "int64",
    "long long": "int64",
    "int64_t": "int64",
    "unsigned long": "uint64",
    "unsigned long long": "uint64",
    "uint64_t": "uint64",
    "size_t": "uint64",
    "ptrdiff_t": "int64",
    "intptr_t": "int64",
    "uintptr_t": "uint64",
    "bool": "bool",
    "void": "any",
}

# Vector types: a float4* reads a float32 tensor four elements at a time.
VECTOR_ELEMENT_TYPES: dict[str, tuple[str, int]] = {
    f"{base}{lanes}": (dtype, lanes)
    for base, dtype in (("float", "float32"), ("double", "float64"), ("int", "int32"),
                        ("uint", "uint32"), ("longlong", "int64"), ("ulonglong", "uint64"), ("char", "int8"),
                        ("uchar", "uint8"), ("short", "int16"), ("ushort", "uint16"), ("half", "float16"),
                        ("__half", "float16"), ("__nv_bfloat16", "bfloat16"), ("__hip_bfloat16", "bfloat16"))
    for lanes in (2, 4)
    if not (base in ("half", "__half", "__nv_bfloat16", "__hip_bfloat16") and lanes == 4)
}

# Scalar C type -> (kind, numpy dtype name). The numpy dtype is how the value is packed:
# a Python float given to a `float` parameter must become 4 bytes, not an 8-byte double.
SCALAR_TYPES: dict[str, tuple[str, str]] = {
    "float": ("float", "float32"),
    "double": ("float", "float64"),
    "half": ("float", "float16"),
    "__half": ("float", "float16"),
    "bool": ("bool", "bool"),
    "char": ("int", "int8"),
    "signed char": ("int", "int8"),
    "int8_t": ("int", "int8"),
    "unsigned char": ("int", "uint8"),
    "uint8_t": ("int", "uint8"),
    "short": ("int", "int16"),
    "int16_t": ("int", "int16"),
    "unsigned short": ("int", "uint16"),
    "uint16_t": ("int", "uint16"),
    "int": ("int", "int32"),
    "int32_t": ("int", "int32"),
    "unsigned": ("int", "uint32"),
    "unsigned int": ("int", "uint32"),
    "uint32_t": ("int", "uint32"),
    "long": ("int", "int64"),
    "long long": ("int", "int64"),
    "int64_t": ("int", "int64"),
    "unsigned long": ("int", "uint64"),
    "unsigned long long": ("int", "uint64"),
    "uint64_t": ("int", "uint64"),
    "size_t": ("int", "uint64"),        # LP64, the layout of device code on both vendors
    "ptrdiff_t": ("int", "int64"),
    "intptr_t": ("int", "int64"),
    "uintptr_t": ("int", "uint64"),
}

# <cstdint>/<cstddef> names that may be spelled with std:: (or ::) in front.
STANDARD_TYPEDEFS = {"int8_t", "uint8_t", "int16_t", "uint16_t", "int32_t", "uint32_t", "int64_t", "uint64_t",
                     "size_t", "ptrdiff_t", "intptr_t", "uintptr_t"}

# Words that spell a built-in integer type, in any order ("long unsigned int" is "unsigned long").
_INTEGER_WORDS = {"signed", "unsigned", "short", "long", "int", "char"}

# Integer scalars with these names are the element count and may be left out by the caller.
SIZE_NAMES = ("n", "numel", "N", "size")

_QUALIFIERS = {"const", "volatile", "__restrict__", "__restrict", "restrict", "struct"}


class SignatureError(ValueError):
    """The kernel's signature could not be read, or uses something we cannot call."""


@dataclass(frozen=True)
class Parameter:
    """One kernel parameter, as the caller sees it."""

    name: str
    c_type: str             # the declared type, normalised: "const float*", "int"
    is_pointer: bool
    is_const: bool          # for pointers: const element type, so the tensor is an input
    element: str            # pointee or scalar base type, e.g. "float", "int64_t"
    dtype: str              # torch dtype name for pointers ("any" for void*), numpy name for scalars
    lanes: int = 1          # elements per pointee for vector types (float4* -> 4)
    kind: str = "tensor"    # "tensor", "int", "float" or "bool"

    @property
    def is_input(self) -> bool:
        return self.is_pointer and self.is_const

    @property
    def is_output(self) -> bool:
        return self.is_pointer and not self.is_const

    @property
    def is_size(self) -> bool:
        return self.kind == "int" and self.name in SIZE_NAMES


@dataclass(frozen=True)
class Signature:
    entry: str                  # the name the user asked for, e.g. "scale<float, 256>"
    function: str               # the bare function name, e.g. "scale"
    parameters: tuple[Parameter, ...]
    line: int                   # 1-based line of the declaration in the user's source
    scope: str = ""             # the enclosing named namespaces, e.g. "course::v2" ("" at global scope)

    @property
    def name_expression(self) -> str:
        """The entry as C++ names it from global scope, for the compiler's name-expression API
        (nvrtcAddNameExpression / hiprtcAddNameExpression), which gives back the symbol to launch.
        An anonymous namespace adds nothing: its members are visible from the enclosing scope."""
        bare = re.sub(r"^\s*(?:::)?(?:[A-Za-z_]\w*\s*::\s*)*", "", self.entry).strip()
        return f"{self.scope}::{bare}" if self.scope else bare

    @property
    def inputs(self) -> tuple[Parameter, ...]:
        return tuple(p for p in self.parameters if p.is_input)

    @property
    def outputs(self) -> tuple[Parameter, ...]:
        return tuple(p for p in self.parameters if p.is_output)

    def describe(self) -> str:
        return f"{self.entry}(" + ", ".join(f"{p.c_type} {p.name}" for p in self.parameters) + ")"


def strip_comments(source: str) -> str:
    """Blank out comments and string literals, keeping every newline so offsets map to lines."""

    def blank(match: re.Match[str]) -> str:
        return re.sub(r"[^\n]", " ", match.group(0))

    pattern = r'//[^\n]*|/\*.*?\*/|"(?:\\.|[^"\\\n])*"'
    return re.sub(pattern, blank, source, flags=re.S)


def blank_attributes(clean: str) -> str:
    """``__attribute__((...))`` and ``[[...]]`` blanked (newlines kept): AMD code writes
    ``__global__ __attribute__((amdgpu_flat_work_group_size(1, 256))) void k(...)``, whose nested parentheses
    hid the kernel (its name was read as amdgpu_flat_work_group_size, and k was not found)."""
    text = list(clean)
    for match in re.finditer(r"\b__attribute__\s*\(|\[\[", clean):
        if match.group(0) == "[[":
            end = clean.find("]]", match.end())
            end = -1 if end < 0 else end + 2
        else:
            depth, end = 0, -1
            for index in range(match.end() - 1, len(clean)):
                depth += {"(": 1, ")": -1}.get(clean[index], 0)
                if depth == 0:
                    end = index + 1
                    break
        if end > 0:
            text[match.start():end] = re.sub(r"[^\n]", " ", clean[match.start():end])
    return "".join(text)


def split_top_level(text: str, separator: str = ",") -> list[str]:
    """``text`` split at ``separator`` outside brackets: "a<b, c>, d(e, f)" -> ["a<b, c>", "d(e, f)"]."""
    parts, depth, current = [], 0, []
    for char in text:
        if char in "(<[{":
            depth += 1
        elif char in ")>]}":
            depth -= 1
        if char == separator and depth == 0:
            parts.append("".join(current))
            current = []
        else:
            current.append(char)
    if "".join(current).strip():
        parts.append("".join(current))
    return [part.strip() for part in parts]


def _matching_paren(text: str, open_index: int) -> int:
    depth = 0
    for index in range(open_index, len(text)):
        if text[index] == "(":
            depth += 1
        elif text[index] == ")":
            depth -= 1
            if depth == 0:
                return index
    raise SignatureError("unbalanced parentheses in the kernel signature")


# Names that may stand between __global__ and the kernel's name with a parenthesised argument.
_ATTRIBUTES = {"__launch_bounds__", "__attribute__", "__declspec", "__align__", "alignas", "__maxnreg__",
               "__cluster_dims__"}


@dataclass(frozen=True)
class KernelDeclaration:
    name: str
    line: int          # 1-based line of `__global__`
    template: bool
    scope: str = ""    # enclosing named namespaces, "a::b"; an anonymous namespace adds nothing
    anonymous: bool = False   # inside an anonymous namespace (internal linkage)

    @property
    def qualified_name(self) -> str:
        return f"{self.scope}::{self.name}" if self.scope else self.name


_NAMESPACE_OR_BRACE = re.compile(
    r"\b(?:inline\s+)?namespace\b\s*((?:[A-Za-z_]\w*)?(?:\s*::\s*(?:inline\s+)?[A-Za-z_]\w*)*)\s*"
    r"(?:__attribute__\s*\(\(.*?\)\)\s*)?\{|[{}]")


def namespace_scopes(clean: str) -> list[tuple[int, tuple[str, ...]]]:
    """Where the namespace nesting changes in comment-free text: [(offset, names from outermost)],
    an anonymous namespace being the name "". Other braces (bodies, ``extern "C" {``) nest too, as
    non-namespaces, so the closing brace of a function never closes a namespace."""
    stack: list[tuple[str, ...] | None] = []
    changes: list[tuple[int, tuple[str, ...]]] = [(0, ())]

    def current() -> tuple[str, ...]:
        return tuple(name for entry in stack if entry is not None for name in entry)

    for match in _NAMESPACE_OR_BRACE.finditer(clean):
        text = match.group(0)
        if text == "}":
            if stack:
                stack.pop()
        elif text == "{":
            stack.append(None)
        else:
            names = tuple(re.sub(r"\binline\s+", "", part).strip() for part in match.group(1).split("::"))
            stack.append(names if names != ("",) else ("",))
        changes.append((match.end(), current()))
    return changes


def _scope_at(changes: list[tuple[int, tuple[str, ...]]], offset: int) -> tuple[str, ...]:
    scope: tuple[str, ...] = ()
    for position, names in changes:
        if position > offset:
            break
        scope = names
    return scope


def find_kernels(source: str) -> list[KernelDeclaration]:
    """Every ``__global__`` function: its name, line, whether it is a template and its namespace.

    The name is the first identifier followed by ``(`` after ``__global__`` that is not an attribute
    such as ``__launch_bounds__(256)``. A kernel declared before it is defined is listed once, at its
    first line; the same name in two namespaces is listed twice.
    """
    clean = blank_attributes(strip_comments(source))
    changes = namespace_scopes(clean)
    kernels: dict[tuple[str, str], KernelDeclaration] = {}
    for match in re.finditer(r"\b__global__\b", clean):
        position = match.end()
        for call in re.finditer(r"([A-Za-z_]\w*)\s*\(", clean[position:]):
            if re.search(r"[;{}]", clean[position:position + call.start()]):
                break   # the declaration ended before any name: not a kernel we can read
            if call.group(1) not in _ATTRIBUTES:
                template = re.search(r"template\s*<[^;{}]*>\s*(?:(?:static|inline|extern)\s+)*$",
                                     clean[:match.start()]) is not None
                line = clean.count("\n", 0, match.start()) + 1
                names = _scope_at(changes, match.start())
                scope = "::".join(name for name in names if name)
                kernels.setdefault((scope, call.group(1)), KernelDeclaration(
                    call.group(1), line, template, scope, "" in names))
                break
    return list(kernels.values())


def list_kernels(source: str) -> list[str]:
    """Names of every ``__global__`` function in the source, in order."""
    return [kernel.name for kernel in find_kernels(source)]


def _parse_entry(entry: str) -> tuple[str, str | None, list[str]]:
    """``"ns::scale<float, 256>"`` -> ("scale", "ns", ["float", "256"]); the qualifier is None when
    the entry names no namespace ("" for an explicit global ``::scale``)."""
    match = re.fullmatch(r"\s*((?:::)?\s*(?:[A-Za-z_]\w*\s*::\s*)*)([A-Za-z_]\w*)\s*(?:<(.*)>)?\s*", entry,
                         flags=re.S)
    if not match:
        raise SignatureError(
            f"entry {entry!r} is not a kernel name (expected e.g. 'vector_add', 'scale<float, 256>' "
            f"or 'course::vector_add')")
    qualifier = re.sub(r"\s+", "", match.group(1)) if match.group(1).strip() else None
    if qualifier is not None:
        qualifier = qualifier.strip(":")
    arguments = split_top_level(match.group(3)) if match.group(3) is not None else []
    return match.group(2), qualifier, arguments


def _template_parameters(clean: str, declaration_start: int) -> list[tuple[str, str]] | None:
    """The ``template <...>`` right before a declaration: [(kind, name)], or None if absent."""
    head = clean[:declaration_start].rstrip()
    # Walk back over `extern "C"`/`static`/attributes is unnecessary: __global__ starts the match.
    match = re.search(r"template\s*<([^<>]*(?:<[^<>]*>[^<>]*)*)>\s*$", head, flags=re.S)
    if not match:
        return None
    parameters = []
    for part in split_top_level(match.group(1)):
        part = part.split("=")[0].strip()
        words = part.replace("...", " ").split()
        if len(words) < 2:
            raise SignatureError(f"cannot read template parameter {part!r}")
        kind = "type" if words[0] in ("typename", "class") else "value"
        parameters.append((kind, words[-1]))
    return parameters


def canonical_type(words: list[str]) -> str:
    """The type a list of words spells, as the tables above name it: qualifiers dropped,
    ``std::``/``::`` dropped from the <cstdint>/<cstddef> names, integer words put in one order
    (``long unsigned int`` -> ``unsigned long``, ``signed`` -> ``int``)."""
    words = [word for word in words if word not in _QUALIFIERS]
    words = [re.sub(r"^(?:::)?(?:std::)?", "", word) if re.sub(r"^(?:::)?(?:std::)?", "", word) in STANDARD_TYPEDEFS
             else word for word in words]
    if words and set(words) <= _INTEGER_WORDS:
        longs = words.count("long")
        if "char" in words:
            base = "char"
        elif "short" in words:
            base = "short"
        elif longs:
            base = " ".join(["long"] * min(longs, 2))
        else:
            base = "int"
        if "unsigned" in words:
            return "unsigned " + base
        return "signed char" if base == "char" and "signed" in words else base
    return " ".join(words)


def _supported(table) -> str:
    return ", ".join(table)


def _unknown_type_message(entry: str, name: str, spelled: str, element: str, pointer: bool) -> str:
    if pointer:
        text = (f"{entry}: parameter {name!r} points to {spelled!r}, which hello-gpu cannot match to a tensor "
                f"dtype. Supported element types: {_supported(POINTER_ELEMENT_TYPES)}, and the vector types "
                f"{_supported(VECTOR_ELEMENT_TYPES)}")
    else:
        text = (f"{entry}: parameter {name!r} has type {spelled!r}, which hello-gpu cannot pass. A kernel "
                f"parameter is a pointer (a tensor) or a scalar of one of: {_supported(SCALAR_TYPES)}")
    text += " (the <cstdint>/<cstddef> names may be written with std::)"
    # Only a plain name can be a user's struct; std::complex<float> or ns::Thing<3> is named as written.
    if re.fullmatch(r"(?:struct\s+|class\s+)?[A-Za-z_]\w*", spelled) and not pointer:
        text += f". If {element!r} is a struct or class, pass its fields as separate scalars: " \
                f"a struct by value is not supported"
    return text


_TYPE_TOKEN = re.compile(r"(?:::\s*)?[A-Za-z_]\w*(?:\s*::\s*[A-Za-z_]\w*)*|\*")


# `typedef float real;` / `using real = float;`: a plain type (words and `::`, no template, pointer, array
# or braces) under a new name, as course code writes its element type once.
_ALIAS = re.compile(r"\btypedef\s+((?:[A-Za-z_][\w:]*\s+)+?)([A-Za-z_]\w*)\s*;"
                    r"|\busing\s+([A-Za-z_]\w*)\s*=\s*((?:[A-Za-z_][\w:]*\s*)+?)\s*;")


# `#define REAL float`, older course code's alias: an object-like macro whose body is type words alone.
_TYPE_MACRO = re.compile(r"(?m)^[ \t]*#[ \t]*define[ \t]+([A-Za-z_]\w*)[ \t]+((?:[A-Za-z_][\w:]*[ \t]*)+)$")


def _type_words() -> set[str]:
    names = [*POINTER_ELEMENT_TYPES, *VECTOR_ELEMENT_TYPES, *SCALAR_TYPES]
    return {word for name in names for word in name.split()} | _INTEGER_WORDS | _QUALIFIERS


def type_aliases(clean: str) -> dict[str, str]:
    """The source's plain type aliases, name -> aliased type as written: typedefs, using-aliases, and macros
    whose body is type words (a macro like `#define N 256` or `#define TID threadIdx.x` is no type). A name
    aliased to two different types (in two namespaces) is left out: which one a kernel sees depends on
    scope, so it stays unknown."""
    found: dict[str, set[str]] = {}
    for match in _ALIAS.finditer(clean):
        name, target = (match.group(2), match.group(1)) if match.group(2) else (match.group(3), match.group(4))
        found.setdefault(name, set()).add(" ".join(target.split()))
    words = _type_words() | set(found)
    for match in _TYPE_MACRO.finditer(clean):
        body = match.group(2).split()
        if all(word in words for word in body):
            found.setdefault(match.group(1), set()).add(" ".join(body))
    return {name: next(iter(targets)) for name, targets in found.items() if len(targets) == 1}


def _replace_names(text: str, substitutions: dict[str, str]) -> str:
    for name, value in substitutions.items():
        text = re.sub(rf"(?<![\w:])\b{re.escape(name)}\b", value, text)
    return text


def _parse_parameter(text: str, substitutions: dict[str, str], entry: str,
                     aliases: dict[str, str] | None = None) -> Parameter:
    original = text
    text = _replace_names(text, substitutions)
    for _ in range(8):                      # an alias of an alias (real -> scalar_t -> float), a few deep
        resolved = _replace_names(text, aliases or {})
        if resolved == text:
            break
        text = resolved
    if "&" in text:
        raise SignatureError(f"{entry}: parameter {original!r} is a reference; kernels take values or pointers")
    if "[" in text:
        raise SignatureError(f"{entry}: parameter {original!r} is an array; pass a pointer instead")
    text = re.sub(r"__attribute__\s*\(\(.*?\)\)", " ", text)
    tokens = [re.sub(r"\s+", "", token) for token in _TYPE_TOKEN.findall(re.sub(r"<[^<>]*(?:<[^<>]*>[^<>]*)*>", " ", text))]
    if not tokens:
        raise SignatureError(f"{entry}: cannot read parameter {original!r}")
    name = tokens[-1]
    if name == "*" or canonical_type([name]) in SCALAR_TYPES or name in POINTER_ELEMENT_TYPES \
            or name in _QUALIFIERS or name in _INTEGER_WORDS:
        raise SignatureError(f"{entry}: parameter {original!r} has no name; name every parameter")
    # The type as the user wrote it (for messages), without the parameter's name and qualifiers.
    declared = re.sub(r"__attribute__\s*\(\(.*?\)\)", " ", text)
    declared = declared[:declared.rfind(name)] if name in declared else declared
    spelled = " ".join(word for word in re.sub(r"\s+", " ", declared.replace("*", " ")).split()
                       if word not in _QUALIFIERS)
    spelled = re.sub(r"\s*::\s*", "::", spelled)
    type_tokens = tokens[:-1]
    stars = type_tokens.count("*")
    if stars > 1:
        raise SignatureError(f"{entry}: parameter {name!r} is a pointer to a pointer; not supported")
    if stars == 1:
        star = type_tokens.index("*")
        base_words = type_tokens[:star]
        is_const = "const" in base_words   # const after the star (float* const p) is the pointer's own
        element = canonical_type(base_words)
        if "<" in declared:
            element = spelled
        if element in POINTER_ELEMENT_TYPES:
            dtype, lanes = POINTER_ELEMENT_TYPES[element], 1
        elif element in VECTOR_ELEMENT_TYPES:
            dtype, lanes = VECTOR_ELEMENT_TYPES[element]
        else:
            raise SignatureError(_unknown_type_message(entry, name, spelled, element, pointer=True))
        c_type = ("const " if is_const else "") + spelled + "*"
        return Parameter(name, c_type, True, is_const, element, dtype, lanes, "tensor")
    element = canonical_type(type_tokens)
    if "<" in declared:
        element = spelled         # a template such as std::complex<float>: no scalar type of ours
    if element not in SCALAR_TYPES:
        raise SignatureError(_unknown_type_message(entry, name, spelled, element, pointer=False))
    kind, dtype = SCALAR_TYPES[element]
    return Parameter(name, spelled, False, False, element, dtype, 1, kind)


def _is_definition(clean: str, close_index: int) -> bool:
    """Is the parameter list closing at ``close_index`` followed by a body (not a ``;``)?"""
    following = re.match(r"[^;{]*", clean[close_index + 1:]).group(0)
    return close_index + 1 + len(following) < len(clean) and clean[close_index + 1 + len(following)] == "{"


def parse_signature(source: str, entry: str) -> Signature:
    """Find ``entry``'s ``__global__`` declaration in ``source`` and read its parameters.

    ``entry`` may name the kernel's namespace (``"course::vector_add"``); without one, a kernel of
    that name in any namespace matches, and the signature records the namespace so the compiler is
    asked for the right symbol. A kernel declared first and defined later is read at its definition.
    """
    function, qualifier, template_arguments = _parse_entry(entry)
    clean = blank_attributes(strip_comments(source))
    changes = namespace_scopes(clean)
    pattern = rf"__global__\b(?:[^;{{(]|\([^()]*(?:\([^()]*\)[^()]*)*\))*?\b{re.escape(function)}\s*\("
    candidates = []
    for match in re.finditer(pattern, clean):
        names = _scope_at(changes, match.start())
        scope = "::".join(name for name in names if name)
        if qualifier is None or qualifier == scope:
            close_index = _matching_paren(clean, match.end() - 1)
            candidates.append((match, scope, close_index, _is_definition(clean, close_index)))
    if not candidates:
        found = [kernel.qualified_name for kernel in find_kernels(source)]
        wanted = f"{qualifier}::{function}" if qualifier else function
        hint = f"; kernels in the source: {', '.join(found)}" if found else "; the source has no __global__ function"
        raise SignatureError(f"no __global__ function named {wanted!r}{hint}")
    scopes = sorted({scope for _, scope, _, _ in candidates})
    if len(scopes) > 1:
        listed = ", ".join(f"{scope}::{function}" if scope else f"::{function}" for scope in scopes)
        raise SignatureError(f"{function!r} is a kernel in {len(scopes)} namespaces ({listed}); "
                             f"say which with a qualified entry, e.g. entry=\"{scopes[-1]}::{function}\"")
    definitions = [candidate for candidate in candidates if candidate[3]] or candidates
    if len(definitions) > 1:
        raise SignatureError(f"{function!r} is defined {len(definitions)} times; overloads are not supported")
    match, scope, close_index, _ = definitions[0]
    templates = _template_parameters(clean, match.start())
    substitutions: dict[str, str] = {}
    if templates is not None:
        if not template_arguments:
            raise SignatureError(
                f"{function!r} is a template; instantiate it by name, e.g. "
                f"entry=\"{function}<{', '.join('float' if k == 'type' else '256' for k, _ in templates)}>\"")
        if len(template_arguments) != len(templates):
            raise SignatureError(
                f"{function!r} takes {len(templates)} template arguments, entry gives {len(template_arguments)}")
        substitutions = {name: value for (_, name), value in zip(templates, template_arguments)}
    elif template_arguments:
        raise SignatureError(f"{function!r} is not a template, but entry {entry!r} gives template arguments")
    open_index = match.end() - 1
    body = clean[open_index + 1:close_index].strip()
    parameters: list[Parameter] = []
    if body and body != "void":
        aliases = type_aliases(clean)
        parameters = [_parse_parameter(part, substitutions, entry, aliases) for part in split_top_level(body)]
    names = [p.name for p in parameters]
    duplicated = {n for n in names if names.count(n) > 1}
    if duplicated:
        raise SignatureError(f"{entry}: parameter names repeat: {sorted(duplicated)}")
    line = clean.count("\n", 0, match.start()) + 1
    return Signature(entry.strip(), function, tuple(parameters), line, scope)
