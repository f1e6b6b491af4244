"""Read a kernel's calling convention from its C signature.

``__global__ void vector_add(const float* a, const float* b, float* out, int n)`` says everything
a caller needs: ``a`` and ``b`` are input tensors of float32, ``out`` is an output tensor of
float32, ``n`` an int32 scalar. This module turns that text into a list of :class:`Parameter`.

It is a small parser, not a C++ front end: it understands pointers (with ``const`` before or after
the type, ``__restrict__``), scalars of the usual C types, ``__launch_bounds__`` and templates that
are instantiated by name (``entry="scale<float, 256>"``). Anything else is refused with an error that
says what it did not understand.
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
    "bool": "bool",
    "void": "any",
}

# Vector types: a float4* reads a float32 tensor four elements at a time.
VECTOR_ELEMENT_TYPES: dict[str, tuple[str, int]] = {
    f"{base}{lanes}": (dtype, lanes)
    for base, dtype in (("float", "float32"), ("double", "float64"), ("int", "int32"),
                        ("uint", "uint32"), ("longlong", "int64"), ("half", "float16"),
                        ("__half", "float16"), ("__nv_bfloat16", "bfloat16"))
    for lanes in (2, 4)
    if not (base in ("half", "__half", "__nv_bfloat16") and lanes == 4)
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
    "size_t": ("int", "uint64"),
}

# Integer scalars with these names are the element count and may be left out by the caller.
SIZE_NAMES = ("n", "numel", "N", "size")

_QUALIFIERS = {"const", "volatile", "__restrict__", "__restrict", "restrict", "struct", "signed"}


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


def _split_top_level(text: str, separator: str = ",") -> list[str]:
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


def find_kernels(source: str) -> list[KernelDeclaration]:
    """Every ``__global__`` function: its name, line and whether it is a template.

    The name is the first identifier followed by ``(`` after ``__global__`` that is not an attribute
    such as ``__launch_bounds__(256)``.
    """
    clean = strip_comments(source)
    kernels: dict[str, KernelDeclaration] = {}
    for match in re.finditer(r"\b__global__\b", clean):
        position = match.end()
        for call in re.finditer(r"([A-Za-z_]\w*)\s*\(", clean[position:]):
            if re.search(r"[;{}]", clean[position:position + call.start()]):
                break   # the declaration ended before any name: not a kernel we can read
            if call.group(1) not in _ATTRIBUTES:
                template = re.search(r"template\s*<[^;{}]*>\s*(?:(?:static|inline|extern)\s+)*$",
                                     clean[:match.start()]) is not None
                line = clean.count("\n", 0, match.start()) + 1
                kernels.setdefault(call.group(1), KernelDeclaration(call.group(1), line, template))
                break
    return list(kernels.values())


def list_kernels(source: str) -> list[str]:
    """Names of every ``__global__`` function in the source, in order."""
    return [kernel.name for kernel in find_kernels(source)]


def _parse_entry(entry: str) -> tuple[str, list[str]]:
    match = re.fullmatch(r"\s*([A-Za-z_]\w*)\s*(?:<(.*)>)?\s*", entry, flags=re.S)
    if not match:
        raise SignatureError(
            f"entry {entry!r} is not a kernel name (expected e.g. 'vector_add' or 'scale<float, 256>')")
    arguments = _split_top_level(match.group(2)) if match.group(2) is not None else []
    return match.group(1), arguments


def _template_parameters(clean: str, declaration_start: int) -> list[tuple[str, str]] | None:
    """The ``template <...>`` right before a declaration: [(kind, name)], or None if absent."""
    head = clean[:declaration_start].rstrip()
    # Walk back over `extern "C"`/`static`/attributes is unnecessary: __global__ starts the match.
    match = re.search(r"template\s*<([^<>]*(?:<[^<>]*>[^<>]*)*)>\s*$", head, flags=re.S)
    if not match:
        return None
    parameters = []
    for part in _split_top_level(match.group(1)):
        part = part.split("=")[0].strip()
        words = part.replace("...", " ").split()
        if len(words) < 2:
            raise SignatureError(f"cannot read template parameter {part!r}")
        kind = "type" if words[0] in ("typename", "class") else "value"
        parameters.append((kind, words[-1]))
    return parameters


def _normalise_type(words: list[str]) -> str:
    return " ".join(word for word in words if word not in _QUALIFIERS)


def _parse_parameter(text: str, substitutions: dict[str, str], entry: str) -> Parameter:
    original = text
    for name, value in substitutions.items():
        text = re.sub(rf"\b{re.escape(name)}\b", value, text)
    if "&" in text:
        raise SignatureError(f"{entry}: parameter {original!r} is a reference; kernels take values or pointers")
    if "[" in text:
        raise SignatureError(f"{entry}: parameter {original!r} is an array; pass a pointer instead")
    text = re.sub(r"__attribute__\s*\(\(.*?\)\)", " ", text)
    tokens = re.findall(r"[A-Za-z_]\w*|\*", text)
    if not tokens:
        raise SignatureError(f"{entry}: cannot read parameter {original!r}")
    name = tokens[-1]
    if name == "*" or name in SCALAR_TYPES or name in POINTER_ELEMENT_TYPES:
        raise SignatureError(f"{entry}: parameter {original!r} has no name; name every parameter")
    type_tokens = tokens[:-1]
    stars = type_tokens.count("*")
    if stars > 1:
        raise SignatureError(f"{entry}: parameter {name!r} is a pointer to a pointer; not supported")
    if stars == 1:
        star = type_tokens.index("*")
        base_words = type_tokens[:star]
        is_const = "const" in base_words   # const after the star (float* const p) is the pointer's own
        element = _normalise_type(base_words)
        if element in POINTER_ELEMENT_TYPES:
            dtype, lanes = POINTER_ELEMENT_TYPES[element], 1
        elif element in VECTOR_ELEMENT_TYPES:
            dtype, lanes = VECTOR_ELEMENT_TYPES[element]
        else:
            raise SignatureError(
                f"{entry}: parameter {name!r} points to {element!r}, which hello-gpu cannot match to "
                f"a tensor dtype (known: float, double, half, __nv_bfloat16, int, int64_t, ..., float4)")
        c_type = ("const " if is_const else "") + element + "*"
        return Parameter(name, c_type, True, is_const, element, dtype, lanes, "tensor")
    element = _normalise_type(type_tokens)
    if element not in SCALAR_TYPES:
        raise SignatureError(
            f"{entry}: parameter {name!r} has type {element!r}; hello-gpu passes tensors (as "
            f"pointers) and scalars of C arithmetic types only (a struct by value is not supported)")
    kind, dtype = SCALAR_TYPES[element]
    return Parameter(name, element, False, False, element, dtype, 1, kind)


def parse_signature(source: str, entry: str) -> Signature:
    """Find ``entry``'s ``__global__`` declaration in ``source`` and read its parameters."""
    function, template_arguments = _parse_entry(entry)
    clean = strip_comments(source)
    pattern = rf"__global__\b(?:[^;{{(]|\([^()]*(?:\([^()]*\)[^()]*)*\))*?\b{re.escape(function)}\s*\("
    matches = list(re.finditer(pattern, clean))
    if not matches:
        found = list_kernels(source)
        hint = f"; kernels in the source: {', '.join(found)}" if found else "; the source has no __global__ function"
        raise SignatureError(f"no __global__ function named {function!r}{hint}")
    if len(matches) > 1:
        raise SignatureError(f"{function!r} is declared {len(matches)} times; overloads are not supported")
    match = matches[0]
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
    close_index = _matching_paren(clean, open_index)
    body = clean[open_index + 1:close_index].strip()
    parameters: list[Parameter] = []
    if body and body != "void":
        parameters = [_parse_parameter(part, substitutions, entry) for part in _split_top_level(body)]
    names = [p.name for p in parameters]
    duplicated = {n for n in names if names.count(n) > 1}
    if duplicated:
        raise SignatureError(f"{entry}: parameter names repeat: {sorted(duplicated)}")
    line = clean.count("\n", 0, match.start()) + 1
    return Signature(entry.strip(), function, tuple(parameters), line)
