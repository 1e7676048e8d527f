// tandem._C's exception classes (python/ext/errors.h).
#include "python/ext/errors.h"

#include <Python.h>

#include <array>
#include <exception>
#include <string>
#include <vector>

#include "tandem/error.h"

namespace py = pybind11;

namespace tandem::python {
namespace {

struct KindClass {
  ErrorKind kind;
  const char* name;  // qualified: "tandem.<class>"
  const char* doc;
};

constexpr std::array<KindClass, 7> kKindClasses = {{
    {ErrorKind::kInvalidArgument, "tandem.InvalidArgumentError",
     "The caller passed something the engine's contract forbids (also a ValueError)."},
    {ErrorKind::kCorruption, "tandem.CheckpointCorruptError",
     "A checkpoint's stored bytes or records do not check out (a CRC, a magic number, a "
     "bound), or its save did not finish. Raised by the engine's checkpoint loads and by "
     "tandem.dcp, naming the file and, where one is at fault, the item, its byte range and "
     "both CRCs (also a RuntimeError and a ValueError)."},
    {ErrorKind::kIO, "tandem.CheckpointIOError",
     "A file-system or device I/O call failed (also a RuntimeError)."},
    {ErrorKind::kCuda, "tandem.CudaError",
     "A CUDA runtime call or kernel launch failed (also a RuntimeError)."},
    {ErrorKind::kOutOfMemory, "tandem.OutOfMemoryError",
     "A device, pinned or host allocation failed, or a memory budget refused the state "
     "(also a MemoryError)."},
    {ErrorKind::kUnsupported, "tandem.UnsupportedError",
     "A valid request that this build or machine cannot serve (also a RuntimeError)."},
    {ErrorKind::kInternal, "tandem.InternalError",
     "A broken invariant inside Tandem, a bug: please report it (also a RuntimeError)."},
}};

// The built-in classes each kind raised before these classes existed.
std::vector<PyObject*> BuiltinBases(ErrorKind kind) {
  switch (kind) {
    case ErrorKind::kInvalidArgument:
      return {PyExc_ValueError};
    case ErrorKind::kCorruption:
      return {PyExc_RuntimeError, PyExc_ValueError};
    case ErrorKind::kOutOfMemory:
      return {PyExc_MemoryError};
    default:
      return {PyExc_RuntimeError};
  }
}

// The classes, indexed by ErrorKind value (0 unused), alive for the process's lifetime
// (the module holds a reference too).
std::array<PyObject*, 8> g_classes{};

}  // namespace

void BindErrors(py::module_& m) {
  PyObject* base = PyErr_NewExceptionWithDoc(
      "tandem.Error",
      "Base class of the errors Tandem's engine raises; `kind` names the ErrorKind "
      "(\"invalid argument\", \"corruption\", \"I/O error\", \"CUDA error\", \"out of memory\", "
      "\"unsupported\", \"internal error\").",
      PyExc_Exception, nullptr);
  if (base == nullptr) throw py::error_already_set();
  m.attr("Error") = py::reinterpret_borrow<py::object>(base);
  for (const KindClass& k : kKindClasses) {
    py::list bases;
    bases.append(py::reinterpret_borrow<py::object>(base));
    for (PyObject* b : BuiltinBases(k.kind)) bases.append(py::reinterpret_borrow<py::object>(b));
    PyObject* cls = PyErr_NewExceptionWithDoc(k.name, k.doc, py::tuple(bases).ptr(), nullptr);
    if (cls == nullptr) throw py::error_already_set();
    g_classes[static_cast<size_t>(k.kind)] = cls;  // the one reference we keep
    // The class says its kind too (tandem.dcp raises CheckpointCorruptError itself).
    if (PyObject_SetAttrString(cls, "kind", py::str(ErrorKindName(k.kind)).ptr()) != 0)
      throw py::error_already_set();
    const char* dot = k.name + sizeof("tandem.") - 1;
    m.attr(dot) = py::reinterpret_borrow<py::object>(cls);
  }
  m.def(
      "_set_error_class",
      [](const std::string& kind, const py::object& cls) {
        for (const KindClass& k : kKindClasses) {
          if (kind != ErrorKindName(k.kind)) continue;
          PyObject*& current = g_classes[static_cast<size_t>(k.kind)];
          if (!PyType_Check(cls.ptr()) || PyObject_IsSubclass(cls.ptr(), current) != 1)
            throw py::type_error(std::string("the class for '") + kind +
                                 "' must be a subclass of " + k.name);
          Py_INCREF(cls.ptr());  // kept for the process's lifetime, as the built-in ones
          current = cls.ptr();
          return;
        }
        throw py::value_error("unknown error kind '" + kind + "'");
      },
      py::arg("kind"), py::arg("cls"),
      "Makes the engine raise `cls`, a subclass of the kind's class, for errors of `kind` "
      "(tandem.torch: an OutOfMemoryError that is also torch.OutOfMemoryError).");
  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const Error& e) {
      const auto index = static_cast<size_t>(e.kind());
      PyObject* cls = index < g_classes.size() && g_classes[index] != nullptr
                          ? g_classes[index]
                          : g_classes[static_cast<size_t>(ErrorKind::kInternal)];
      PyObject* exc = PyObject_CallFunction(cls, "s", e.what());
      if (exc == nullptr) return;  // the call's own error stays set
      PyObject* kind = PyUnicode_FromString(ErrorKindName(e.kind()));
      if (kind != nullptr) {
        PyObject_SetAttrString(exc, "kind", kind);
        Py_DECREF(kind);
      }
      PyErr_SetObject(cls, exc);
      Py_DECREF(exc);
    }
  });
}

}  // namespace tandem::python
