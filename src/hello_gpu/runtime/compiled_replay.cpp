// The replay of recorded Triton launches (runtime/triton_replay.py) as one C++ call.
//
// Why: on the H200 machine, hello_gpu.ops.softmax at 16x4096 float32 cost 13.9 us of host time per
// call against torch.softmax's 10.7 (records/nvidia-h200/call-overhead.json, run of f71d987). Its
// parts: the signature key in Python 0.9 us, the result's allocation by torch.empty_like from Python
// 3.7 us, the recorded launch through Triton's C launcher 7.2 us (a launch through cuLaunchKernel
// from cuda-python costs the same: kernel.prepare()() 7.3 us), and ~2 us of Python in between.
// torch allocates inside its own C++ call for ~1.5 us (torch.add(a, b) 9.9 us against
// torch.add(a, b, out=c) 8.4). Here the key, the allocation and the argument substitution run in C++;
// only the launch itself, a call of Triton's C launcher, is left as it was.
//
// replay(table, *args) returns the result, or None when it has no plan for this call (another
// signature, grad needed, another current device, a Triton launch hook set): the caller then takes
// its checked Python path, which raises every error as before. Nothing here can be half-done: the
// result is allocated, the launches are enqueued, and only then is it returned.

#include <torch/csrc/autograd/python_variable.h>
#include <torch/csrc/Device.h>
#include <torch/csrc/Dtype.h>
#include <torch/csrc/Exceptions.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/empty_strided.h>
#include <c10/core/GradMode.h>

#include <cstdint>
#include <cstring>
#include <deque>
#include <exception>
#include <memory>
#include <unordered_map>
#include <utility>
#include <vector>

namespace {

struct Launch {
  PyObject* call = nullptr;       // Triton's C launch function (owned reference)
  PyObject* arguments = nullptr;  // the recorded arguments, a tuple (owned reference)
  std::vector<std::pair<Py_ssize_t, int>> slots;  // (position, input index; -1: the result)
};

// Immutable once added, and shared: Triton's launcher lets go of the GIL around cuLaunchKernel, so
// another thread may replace or drop a plan while a replay of it is between two launches. Created
// and destroyed with the GIL held (add, configure, the end of a replay).
struct Plan {
  std::vector<int64_t> sizes, strides;
  c10::ScalarType dtype = c10::ScalarType::Float;
  c10::Device device{c10::DeviceType::CPU};
  bool contiguous = true;
  std::vector<Launch> launches;

  Plan() = default;
  Plan(const Plan&) = delete;
  Plan& operator=(const Plan&) = delete;
  ~Plan() {
    for (Launch& launch : launches) {
      Py_XDECREF(launch.call);
      Py_XDECREF(launch.arguments);
    }
  }
};

using Key = std::vector<int64_t>;

struct KeyHash {
  size_t operator()(const Key& key) const noexcept {
    size_t hash = key.size();
    for (int64_t value : key) {
      hash ^= std::hash<int64_t>{}(value) + 0x9e3779b97f4a7c15ULL + (hash << 6) + (hash >> 2);
    }
    return hash;
  }
};

struct Table {
  std::unordered_map<Key, std::shared_ptr<const Plan>, KeyHash> plans;
  std::deque<Key> order;  // insertion order: the oldest plan goes first past the limit
};

constexpr size_t kPlansPerTable = 256;  // as hello_gpu.ops.functions.FAST_PLANS
// Never destroyed: a static's destructor would run after Python's finalisation, when releasing the
// plans' Python references is no longer allowed.
std::vector<Table>& tables = *new std::vector<Table>();
PyObject* stream_function = nullptr;  // torch._C._cuda_getCurrentRawStream(device) -> int
PyObject* device_function = nullptr;  // torch._C._cuda_getDevice() -> int
PyObject* hook_lists = nullptr;       // Triton's launch hook chains' lists: any entry means no replay
PyObject* tensor_types = nullptr;     // torch.Tensor and nn.Parameter exactly: another subclass may override anything

bool plain_tensor(PyObject* value) {
  PyObject* type = reinterpret_cast<PyObject*>(Py_TYPE(value));
  Py_ssize_t count = PyTuple_GET_SIZE(tensor_types);
  for (Py_ssize_t index = 0; index < count; ++index) {
    if (PyTuple_GET_ITEM(tensor_types, index) == type) return true;
  }
  return false;
}

enum ArgumentKind : int64_t { kTensor = 1, kFloat = 2, kInt = 3, kBool = 4, kNone = 5 };

// The key of a call: per tensor its dtype, device, sizes, strides and 16-byte alignment (what the
// checks and Triton's specialisation read); other arguments by kind and value. false when an
// argument is of a kind with no key (the caller then takes the Python path).
bool make_key(PyObject* const* args, Py_ssize_t count, Key& key, bool& needs_grad) {
  key.clear();
  needs_grad = false;
  for (Py_ssize_t index = 0; index < count; ++index) {
    PyObject* value = args[index];
    if (plain_tensor(value)) {
      const at::Tensor& tensor = THPVariable_Unpack(value);
      // A lazily negated or conjugated view (z.conj().imag) is not the values its memory holds: no key,
      // so the caller takes its checked path, which refuses or resolves it (runtime/checks.py: lazy_view).
      if (tensor.layout() != c10::kStrided || !tensor.has_storage() || tensor.is_neg() || tensor.is_conj()) {
        return false;
      }
      key.push_back(kTensor);
      key.push_back(static_cast<int64_t>(tensor.scalar_type()));
      key.push_back(static_cast<int64_t>(tensor.device().type()));
      key.push_back(tensor.device().index());
      key.push_back(tensor.dim());
      for (int64_t size : tensor.sizes()) key.push_back(size);
      for (int64_t stride : tensor.strides()) key.push_back(stride);
      key.push_back(reinterpret_cast<uintptr_t>(tensor.data_ptr()) % 16 == 0);
      needs_grad = needs_grad || tensor.requires_grad();
    } else if (PyFloat_CheckExact(value)) {
      double number = PyFloat_AS_DOUBLE(value);
      int64_t bits;
      std::memcpy(&bits, &number, sizeof bits);
      key.push_back(kFloat);
      key.push_back(bits);
    } else if (PyBool_Check(value)) {
      key.push_back(kBool);
      key.push_back(value == Py_True);
    } else if (PyLong_CheckExact(value)) {
      int overflow = 0;
      long long number = PyLong_AsLongLongAndOverflow(value, &overflow);
      if (overflow) return false;
      key.push_back(kInt);
      key.push_back(number);
    } else if (value == Py_None) {
      key.push_back(kNone);
    } else {
      return false;
    }
  }
  return true;
}

bool hooks_set() {
  Py_ssize_t count = PyTuple_GET_SIZE(hook_lists);
  for (Py_ssize_t index = 0; index < count; ++index) {
    if (PyList_GET_SIZE(PyTuple_GET_ITEM(hook_lists, index)) != 0) return true;
  }
  return false;
}

bool table_index(PyObject* value, size_t& index) {
  long long number = PyLong_AsLongLong(value);
  if (number == -1 && PyErr_Occurred()) return false;
  if (number < 0 || static_cast<size_t>(number) >= tables.size()) {
    PyErr_Format(PyExc_IndexError, "compiled_replay: no table %lld (there are %zu)", number, tables.size());
    return false;
  }
  index = static_cast<size_t>(number);
  return true;
}

// configure(tensor_types, stream_function, device_function, hook_lists, table_count)
PyObject* configure(PyObject*, PyObject* args) {
  PyObject *types, *stream, *device, *hooks;
  Py_ssize_t count;
  if (!PyArg_ParseTuple(args, "O!OOO!n", &PyTuple_Type, &types, &stream, &device, &PyTuple_Type, &hooks, &count)) {
    return nullptr;
  }
  bool types_ok = PyTuple_GET_SIZE(types) > 0;
  for (Py_ssize_t index = 0; index < PyTuple_GET_SIZE(types); ++index) {
    types_ok = types_ok && PyType_Check(PyTuple_GET_ITEM(types, index));
  }
  if (!types_ok || !PyCallable_Check(stream) || !PyCallable_Check(device) || count < 0) {
    PyErr_SetString(PyExc_TypeError, "configure(tensor_types, stream_function, device_function, hook_lists, tables)");
    return nullptr;
  }
  for (Py_ssize_t index = 0; index < PyTuple_GET_SIZE(hooks); ++index) {
    if (!PyList_Check(PyTuple_GET_ITEM(hooks, index))) {
      PyErr_SetString(PyExc_TypeError, "configure: hook_lists must be a tuple of lists");
      return nullptr;
    }
  }
  tables.assign(static_cast<size_t>(count), Table{});
  for (PyObject** slot : {&tensor_types, &stream_function, &device_function, &hook_lists}) Py_XDECREF(*slot);
  Py_INCREF(types);
  Py_INCREF(stream);
  Py_INCREF(device);
  Py_INCREF(hooks);
  tensor_types = types;
  stream_function = stream;
  device_function = device;
  hook_lists = hooks;
  Py_RETURN_NONE;
}

// add(table, example_args, sizes, strides, dtype, device, launches)
// launches: a list of (call, arguments tuple, [(position, input index or -1), ...]).
PyObject* add(PyObject*, PyObject* args) {
  HANDLE_TH_ERRORS
  PyObject *table_object, *example, *sizes, *strides, *dtype, *device, *launches;
  if (!PyArg_ParseTuple(args, "OO!O!O!OOO!", &table_object, &PyTuple_Type, &example, &PyTuple_Type, &sizes,
                        &PyTuple_Type, &strides, &dtype, &device, &PyList_Type, &launches)) {
    return nullptr;
  }
  if (tensor_types == nullptr) {
    PyErr_SetString(PyExc_RuntimeError, "compiled_replay: configure() was not called");
    return nullptr;
  }
  size_t index;
  if (!table_index(table_object, index)) return nullptr;
  if (!THPDtype_Check(dtype) || !THPDevice_Check(device)) {
    PyErr_SetString(PyExc_TypeError, "compiled_replay.add: dtype must be a torch.dtype and device a torch.device");
    return nullptr;
  }
  Key key;
  bool needs_grad;
  if (!make_key(&PyTuple_GET_ITEM(example, 0), PyTuple_GET_SIZE(example), key, needs_grad)) {
    PyErr_SetString(PyExc_ValueError, "compiled_replay.add: an example argument has no key (tensors, floats, ints, "
                                      "bools and None only)");
    return nullptr;
  }
  auto plan = std::make_shared<Plan>();
  plan->dtype = reinterpret_cast<THPDtype*>(dtype)->scalar_type;
  plan->device = reinterpret_cast<THPDevice*>(device)->device;
  if (PyTuple_GET_SIZE(sizes) != PyTuple_GET_SIZE(strides)) {
    PyErr_SetString(PyExc_ValueError, "compiled_replay.add: sizes and strides differ in length");
    return nullptr;
  }
  int64_t expected = 1;
  plan->contiguous = true;
  for (Py_ssize_t dim = PyTuple_GET_SIZE(sizes) - 1; dim >= 0; --dim) {
    int64_t size = PyLong_AsLongLong(PyTuple_GET_ITEM(sizes, dim));
    int64_t stride = PyLong_AsLongLong(PyTuple_GET_ITEM(strides, dim));
    if (PyErr_Occurred()) return nullptr;
    plan->sizes.insert(plan->sizes.begin(), size);
    plan->strides.insert(plan->strides.begin(), stride);
    if (size != 1 && stride != expected) plan->contiguous = false;
    expected *= size > 1 ? size : 1;
  }
  Py_ssize_t inputs = PyTuple_GET_SIZE(example);
  for (Py_ssize_t item = 0; item < PyList_GET_SIZE(launches); ++item) {
    PyObject *call, *arguments, *slots;
    if (!PyArg_ParseTuple(PyList_GET_ITEM(launches, item), "OO!O!", &call, &PyTuple_Type, &arguments, &PyList_Type,
                          &slots)) {
      return nullptr;
    }
    Launch launch;
    for (Py_ssize_t slot = 0; slot < PyList_GET_SIZE(slots); ++slot) {
      Py_ssize_t position;
      int source;
      if (!PyArg_ParseTuple(PyList_GET_ITEM(slots, slot), "ni", &position, &source)) {
        return nullptr;
      }
      if (position <= 3 || position >= PyTuple_GET_SIZE(arguments) || source < -1 || source >= inputs) {
        PyErr_Format(PyExc_ValueError, "compiled_replay.add: slot (%zd, %d) is outside the arguments or inputs",
                     position, source);
        return nullptr;
      }
      launch.slots.emplace_back(position, source);
    }
    if (PyTuple_GET_SIZE(arguments) < 5) {
      PyErr_SetString(PyExc_ValueError, "compiled_replay.add: a launch's arguments begin grid x, y, z, stream");
      return nullptr;
    }
    Py_INCREF(call);
    Py_INCREF(arguments);
    launch.call = call;
    launch.arguments = arguments;
    plan->launches.push_back(std::move(launch));
  }
  Table& table = tables[index];
  auto found = table.plans.find(key);
  if (found != table.plans.end()) {
    found->second = std::move(plan);
  } else {
    table.plans.emplace(key, std::move(plan));
    table.order.push_back(key);
    if (table.order.size() > kPlansPerTable) {
      table.plans.erase(table.order.front());
      table.order.pop_front();
    }
  }
  Py_RETURN_NONE;
  END_HANDLE_TH_ERRORS
}

// replay(table, *args): the result of the plan for these arguments, or None without one.
PyObject* replay(PyObject*, PyObject* const* args, Py_ssize_t nargs) {
  HANDLE_TH_ERRORS
  if (nargs < 1) {
    PyErr_SetString(PyExc_TypeError, "replay(table, *args)");
    return nullptr;
  }
  size_t index;
  if (!table_index(args[0], index)) return nullptr;
  if (hook_lists == nullptr || hooks_set()) Py_RETURN_NONE;
  thread_local Key key;
  bool needs_grad;
  if (!make_key(args + 1, nargs - 1, key, needs_grad)) Py_RETURN_NONE;
  if (needs_grad && c10::GradMode::is_enabled()) Py_RETURN_NONE;
  Table& table = tables[index];
  auto found = table.plans.find(key);
  if (found == table.plans.end()) Py_RETURN_NONE;
  const std::shared_ptr<const Plan> held = found->second;  // the launches may let go of the GIL
  const Plan& plan = *held;

  // The recorded launches belong to the tensors' device; another current device: the Python path,
  // which switches to it as Triton itself would have to.
  if (plan.device.is_cuda()) {
    PyObject* current = PyObject_CallNoArgs(device_function);
    if (current == nullptr) return nullptr;
    long current_device = PyLong_AsLong(current);
    Py_DECREF(current);
    if (current_device == -1 && PyErr_Occurred()) return nullptr;
    if (current_device != plan.device.index()) Py_RETURN_NONE;
  }

  at::TensorOptions options = at::TensorOptions().dtype(plan.dtype).device(plan.device);
  at::Tensor result = plan.contiguous ? at::empty(plan.sizes, options)
                                      : at::empty_strided(plan.sizes, plan.strides, options);
  PyObject* device_number = PyLong_FromLong(plan.device.index());
  if (device_number == nullptr) return nullptr;
  PyObject* stream = PyObject_CallOneArg(stream_function, device_number);
  Py_DECREF(device_number);
  if (stream == nullptr) return nullptr;

  for (const Launch& launch : plan.launches) {
    Py_ssize_t count = PyTuple_GET_SIZE(launch.arguments);
    PyObject* arguments = PyTuple_New(count);
    if (arguments == nullptr) {
      Py_DECREF(stream);
      return nullptr;
    }
    for (Py_ssize_t position = 0; position < count; ++position) {
      PyObject* item = position == 3 ? stream : PyTuple_GET_ITEM(launch.arguments, position);
      Py_INCREF(item);
      PyTuple_SET_ITEM(arguments, position, item);
    }
    for (const auto& [position, source] : launch.slots) {
      const at::Tensor& tensor = source < 0 ? result : THPVariable_Unpack(args[1 + source]);
      PyObject* pointer = PyLong_FromUnsignedLongLong(reinterpret_cast<uintptr_t>(tensor.data_ptr()));
      if (pointer == nullptr) {
        Py_DECREF(arguments);
        Py_DECREF(stream);
        return nullptr;
      }
      Py_SETREF(PyTuple_GET_ITEM(arguments, position), pointer);
    }
    PyObject* returned = PyObject_Call(launch.call, arguments, nullptr);
    Py_DECREF(arguments);
    if (returned == nullptr) {
      Py_DECREF(stream);
      return nullptr;
    }
    Py_DECREF(returned);
  }
  Py_DECREF(stream);
  return THPVariable_Wrap(std::move(result));
  END_HANDLE_TH_ERRORS
}

// signature(*args): the key of a call as bytes (make_key: per tensor its dtype, device, sizes, strides
// and 16-byte alignment; other arguments by kind and value), or None where an argument has none.
// hello_gpu.Kernel keys its checked call plans by it (runtime/kernel.py): ~0.2 us for three tensors on
// the CPU where the same key in Python costs ~1 us.
PyObject* signature(PyObject*, PyObject* const* args, Py_ssize_t nargs) {
  if (tensor_types == nullptr) {
    PyErr_SetString(PyExc_RuntimeError, "compiled_replay: configure() was not called");
    return nullptr;
  }
  thread_local Key key;
  bool needs_grad;
  try {
    if (!make_key(args, nargs, key, needs_grad)) Py_RETURN_NONE;
  } catch (const std::exception&) {  // a tensor whose layout or storage cannot be read: no key, the checks say why
    Py_RETURN_NONE;
  }
  return PyBytes_FromStringAndSize(reinterpret_cast<const char*>(key.data()),
                                   static_cast<Py_ssize_t>(key.size() * sizeof(int64_t)));
}

// data_pointers(*tensors): the data pointer of each tensor, as ints; a TypeError for anything else.
// A Kernel's call plan reads its pointers so: ~0.1 us for three tensors on the CPU where
// tuple(map(torch.Tensor.data_ptr, tensors)) costs ~0.3 us.
PyObject* data_pointers(PyObject*, PyObject* const* args, Py_ssize_t nargs) {
  HANDLE_TH_ERRORS
  PyObject* pointers = PyTuple_New(nargs);
  if (pointers == nullptr) return nullptr;
  for (Py_ssize_t index = 0; index < nargs; ++index) {
    if (!THPVariable_Check(args[index])) {
      Py_DECREF(pointers);
      PyErr_Format(PyExc_TypeError, "data_pointers: argument %zd is %s, not a tensor", index, Py_TYPE(args[index])->tp_name);
      return nullptr;
    }
    PyObject* pointer =
        PyLong_FromUnsignedLongLong(reinterpret_cast<uintptr_t>(THPVariable_Unpack(args[index]).data_ptr()));
    if (pointer == nullptr) {
      Py_DECREF(pointers);
      return nullptr;
    }
    PyTuple_SET_ITEM(pointers, index, pointer);
  }
  return pointers;
  END_HANDLE_TH_ERRORS
}

// plans(table): how many plans a table holds (tests and `hello-gpu doctor`).
PyObject* plans(PyObject*, PyObject* table_object) {
  size_t index;
  if (!table_index(table_object, index)) return nullptr;
  return PyLong_FromSize_t(tables[index].plans.size());
}

PyMethodDef methods[] = {
    {"configure", configure, METH_VARARGS, "configure(tensor_type, stream_function, device_function, hook_lists, tables)"},
    {"add", add, METH_VARARGS, "add(table, example_args, sizes, strides, dtype, device_index, launches)"},
    {"replay", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(replay)), METH_FASTCALL,
     "replay(table, *args) -> result, or None without a plan"},
    {"signature", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(signature)), METH_FASTCALL,
     "signature(*args) -> the call's key as bytes, or None where an argument has none"},
    {"data_pointers", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(data_pointers)), METH_FASTCALL,
     "data_pointers(*tensors) -> the data pointer of each tensor"},
    {"plans", plans, METH_O, "plans(table) -> number of plans held"},
    {nullptr, nullptr, 0, nullptr}};

PyModuleDef module_definition = {PyModuleDef_HEAD_INIT, "compiled_replay", nullptr, -1, methods};

}  // namespace

#define HG_CONCAT_(a, b) a##b
#define HG_CONCAT(a, b) HG_CONCAT_(a, b)

PyMODINIT_FUNC HG_CONCAT(PyInit_, TORCH_EXTENSION_NAME)(void) { return PyModule_Create(&module_definition); }
