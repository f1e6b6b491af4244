"""Reading kernel signatures: pointers, const-ness, scalar types, templates, and clear refusals."""

import pytest

from hello_gpu.runtime.signature import SignatureError, find_kernels, list_kernels, parse_signature, type_aliases

VECTOR_ADD = r"""
// a comment mentioning __global__ void fake(int x) must not confuse the parser
__global__ void vector_add(const float* a, const float* b, float* out, int n) {
  int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) out[i] = a[i] + b[i];
}
"""


def test_vector_add_parameters():
    signature = parse_signature(VECTOR_ADD, "vector_add")
    assert [p.name for p in signature.parameters] == ["a", "b", "out", "n"]
    a, b, out, n = signature.parameters
    assert a.is_input and b.is_input and not a.is_output
    assert out.is_output and out.dtype == "float32"
    assert n.kind == "int" and n.dtype == "int32" and n.is_size
    assert signature.line == 3


@pytest.mark.parametrize("declaration, dtype, is_const", [
    ("const float* __restrict__ x", "float32", True),
    ("float const* x", "float32", True),
    ("float* const x", "float32", False),        # a const pointer to mutable data is an output
    ("const __half* __restrict x", "float16", True),
    ("__nv_bfloat16* x", "bfloat16", False),
    ("const hip_bfloat16 *x", "bfloat16", True),
    ("int64_t* x", "int64", False),
    ("const int* x", "int32", True),
    ("unsigned char* x", "uint8", False),
    ("const void* x", "any", True),
    ("double *x", "float64", False),
])
def test_pointer_types(declaration, dtype, is_const):
    source = f"__global__ void k({declaration}) {{}}"
    (parameter,) = parse_signature(source, "k").parameters
    assert parameter.is_pointer and parameter.dtype == dtype and parameter.is_const == is_const


@pytest.mark.parametrize("declaration, kind, dtype", [
    ("float alpha", "float", "float32"),
    ("double alpha", "float", "float64"),
    ("const int rows", "int", "int32"),
    ("int64_t n", "int", "int64"),
    ("unsigned int mask", "int", "uint32"),
    ("size_t count", "int", "uint64"),
    ("long long total", "int", "int64"),
    ("bool flag", "bool", "bool"),
])
def test_scalar_types(declaration, kind, dtype):
    (parameter,) = parse_signature(f"__global__ void k({declaration}) {{}}", "k").parameters
    assert not parameter.is_pointer and parameter.kind == kind and parameter.dtype == dtype


def test_vector_pointer_has_lanes():
    (parameter,) = parse_signature("__global__ void k(const float4* x) {}", "k").parameters
    assert parameter.dtype == "float32" and parameter.lanes == 4


def test_launch_bounds_and_extern_c():
    source = 'extern "C" __global__ void __launch_bounds__(256, 2) k(const float* x, float* y, int n) {}'
    assert [p.name for p in parse_signature(source, "k").parameters] == ["x", "y", "n"]


def test_template_needs_instantiation_by_name():
    source = "template <typename T, int BLOCK>\n__global__ void scale(const T* x, T* y, T alpha, int n) {}"
    with pytest.raises(SignatureError, match=r"is a template; instantiate it by name, e.g. entry=\"scale<float, 256>\""):
        parse_signature(source, "scale")
    signature = parse_signature(source, "scale<double, 128>")
    assert [p.dtype for p in signature.parameters] == ["float64", "float64", "float64", "int32"]
    assert signature.function == "scale" and signature.entry == "scale<double, 128>"
    with pytest.raises(SignatureError, match="takes 2 template arguments"):
        parse_signature(source, "scale<float>")


@pytest.mark.parametrize("declaration, kind, dtype", [
    # The standard spellings, packed as their real width and signedness (LP64 device code).
    ("std::size_t n", "int", "uint64"),
    ("::size_t n", "int", "uint64"),
    ("ptrdiff_t n", "int", "int64"),
    ("std::ptrdiff_t n", "int", "int64"),
    ("std::int64_t n", "int", "int64"),
    ("std::uint32_t mask", "int", "uint32"),
    ("uint32_t mask", "int", "uint32"),
    ("std::int8_t small", "int", "int8"),
    ("std::uint16_t half_word", "int", "uint16"),
    ("intptr_t address", "int", "int64"),
    ("std::uintptr_t address", "int", "uint64"),
    ("unsigned long int count", "int", "uint64"),
    ("long unsigned int count", "int", "uint64"),
    ("long long int total", "int", "int64"),
    ("short int s", "int", "int16"),
    ("signed x", "int", "int32"),
    ("unsigned u", "int", "uint32"),
    ("signed char c", "int", "int8"),
    ("const std::size_t n", "int", "uint64"),
])
def test_standard_integer_spellings(declaration, kind, dtype):
    (parameter,) = parse_signature(f"__global__ void k({declaration}) {{}}", "k").parameters
    assert not parameter.is_pointer and parameter.kind == kind and parameter.dtype == dtype
    assert parameter.c_type == declaration.rsplit(" ", 1)[0].replace("const ", "")   # shown as written


def test_pointers_to_standard_integers():
    source = "__global__ void k(const std::int64_t* __restrict__ x, std::uint8_t* y, const std::size_t* z) {}"
    x, y, z = parse_signature(source, "k").parameters
    assert (x.dtype, x.is_input, x.c_type) == ("int64", True, "const std::int64_t*")
    assert (y.dtype, y.is_output) == ("uint8", True)
    assert z.dtype == "uint64"


def test_std_size_t_is_the_size_that_defaults_to_numel():
    (_, n) = parse_signature("__global__ void k(const float* x, std::size_t n) {}", "k").parameters
    assert n.is_size


@pytest.mark.parametrize("declaration, message", [
    ("float** x", "pointer to a pointer"),
    ("float& x", "reference"),
    ("MyStruct s", "struct by value is not supported"),
    ("const Foo* x", "cannot match to a tensor dtype"),
    ("float x[4]", "array"),
    ("int", "has no name"),
    ("std::size_t", "has no name"),
])
def test_refusals_name_the_parameter(declaration, message):
    with pytest.raises(SignatureError, match=message):
        parse_signature(f"__global__ void k({declaration}) {{}}", "k")


def test_unknown_entry_lists_kernels():
    with pytest.raises(SignatureError, match="no __global__ function named 'nope'; kernels in the source: vector_add"):
        parse_signature(VECTOR_ADD, "nope")


def test_list_kernels_ignores_comments_and_launch_bounds():
    assert list_kernels(VECTOR_ADD) == ["vector_add"]
    assert list_kernels("__global__ void __launch_bounds__(128, 2) heavy(float* x) {}") == ["heavy"]


def test_no_parameters():
    assert parse_signature("__global__ void k(void) {}", "k").parameters == ()
    assert parse_signature("__global__ void k() {}", "k").parameters == ()


@pytest.mark.parametrize("declaration, named", [
    ("std::string s", "'std::string'"),
    ("std::complex<float> z", "'std::complex<float>'"),
    ("std::vector<float> v", "'std::vector<float>'"),
    ("ns::Thing<3> t", "'ns::Thing<3>'"),
])
def test_an_unknown_type_is_named_and_std_types_are_not_called_structs(declaration, named):
    with pytest.raises(SignatureError) as caught:
        parse_signature(f"__global__ void k(float* x, {declaration}) {{}}", "k")
    message = str(caught.value)
    assert f"has type {named}" in message
    assert "struct" not in message
    # ...and it lists what is supported, standard names included.
    for supported in ("float", "int64_t", "size_t", "ptrdiff_t", "unsigned long long"):
        assert supported in message


def test_unknown_pointee_lists_the_element_types():
    with pytest.raises(SignatureError) as caught:
        parse_signature("__global__ void k(const std::complex<float>* z) {}", "k")
    message = str(caught.value)
    assert "points to 'std::complex<float>'" in message and "float4" in message and "__half" in message
    assert "struct" not in message


NAMESPACED = """\
namespace course {
namespace {
template <int TILE>
__global__ void tiled(const float* a, float* c, std::size_t n) {}
}  // namespace
__global__ void scale(float* x, float alpha, int n) {}
}  // namespace course
namespace {
__global__ void hidden(float* x) {}
}
namespace other { __global__ void scale(double* x, double alpha, int n) {} }
__global__ void declared_first(float* x);
__global__ void declared_first(float* x) { x[0] = 1.0f; }
"""


def test_kernels_in_namespaces_are_found_with_their_scope():
    kernels = [(k.qualified_name, k.line, k.template, k.anonymous) for k in find_kernels(NAMESPACED)]
    assert kernels == [("course::tiled", 4, True, True), ("course::scale", 6, False, False),
                       ("hidden", 9, False, True), ("other::scale", 11, False, False),
                       ("declared_first", 12, False, False)]


def test_the_name_expression_is_qualified_by_the_namespace():
    assert parse_signature(NAMESPACED, "tiled<16>").name_expression == "course::tiled<16>"
    assert parse_signature(NAMESPACED, "course::scale").name_expression == "course::scale"
    assert parse_signature(NAMESPACED, "other::scale").parameters[0].dtype == "float64"
    assert parse_signature(NAMESPACED, "hidden").name_expression == "hidden"   # anonymous: no qualifier
    assert parse_signature(VECTOR_ADD, "vector_add").name_expression == "vector_add"


def test_a_name_in_two_namespaces_must_be_qualified():
    with pytest.raises(SignatureError, match=r"in 2 namespaces \(course::scale, other::scale\); say which"):
        parse_signature(NAMESPACED, "scale")
    with pytest.raises(SignatureError, match="no __global__ function named 'nowhere::scale'"):
        parse_signature(NAMESPACED, "nowhere::scale")


def test_a_kernel_declared_then_defined_is_read_at_its_definition():
    signature = parse_signature(NAMESPACED, "declared_first")
    assert signature.line == 13 and [p.name for p in signature.parameters] == ["x"]


def test_plain_type_aliases_are_read_through():
    """`typedef float real;` and `using index_t = long long;` (course code names its element type once): the
    kernel's parameters were refused ("points to 'real', which hello-gpu cannot match to a tensor dtype")."""
    source = ("typedef float real;\nusing scalar_t = real;\nusing index_t = long long;\ntypedef __half half_t;\n"
              "namespace a { using T = float; }\nnamespace b { using T = double; }\n"
              "template <typename U> __global__ void k(const scalar_t* __restrict__ x, half_t* y, U* z, index_t n, real s) {}\n"
              "__global__ void ambiguous(T* x) {}\n")
    signature = parse_signature(source, "k<real>")
    assert [(p.name, p.dtype, p.kind) for p in signature.parameters] == [
        ("x", "float32", "tensor"), ("y", "float16", "tensor"), ("z", "float32", "tensor"), ("n", "int64", "int"),
        ("s", "float32", "float")]
    assert signature.parameters[0].is_const
    with pytest.raises(SignatureError, match="'T'"):       # aliased differently in two namespaces: unknown
        parse_signature(source, "ambiguous")


def test_attributes_with_nested_parentheses_and_type_macros():
    """AMD code's `__attribute__((amdgpu_flat_work_group_size(1, 256)))` before the return type was read as the
    kernel's name; `#define REAL float` (older course code's alias) and byte/short vector types were refused."""
    source = ("#define REAL float\n#define N 256\n#define TID threadIdx.x\n"
              "__global__ __attribute__((amdgpu_flat_work_group_size(1, 256))) void k(const REAL* x, uchar4* y, "
              "__hip_bfloat162* z, ushort2* w, [[maybe_unused]] int n) {}\n")
    assert [kernel.name for kernel in find_kernels(source)] == ["k"]
    assert [(p.name, p.dtype, p.lanes) for p in parse_signature(source, "k").parameters] == [
        ("x", "float32", 1), ("y", "uint8", 4), ("z", "bfloat16", 2), ("w", "uint16", 2), ("n", "int32", 1)]
    assert "N" not in type_aliases(source) and "TID" not in type_aliases(source)
