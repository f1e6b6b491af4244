"""Reading kernel signatures: pointers, const-ness, scalar types, templates, and clear refusals."""

import pytest

from hello_gpu.runtime.signature import SignatureError, list_kernels, parse_signature

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


@pytest.mark.parametrize("declaration, message", [
    ("float** x", "pointer to a pointer"),
    ("float& x", "reference"),
    ("MyStruct s", "struct by value is not supported"),
    ("const Foo* x", "cannot match to a tensor dtype"),
    ("float x[4]", "array"),
    ("int", "has no name"),
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
