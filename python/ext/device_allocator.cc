// tandem._C.DeviceAllocator (python/ext/device_allocator.h).
#include "python/ext/device_allocator.h"

#include <Python.h>

#include <string>
#include <utility>

#include "tandem/error.h"

namespace py = pybind11;

namespace tandem::python {
namespace {

bool Finalizing() {
#if PY_VERSION_HEX >= 0x030D0000
  return !Py_IsInitialized() || Py_IsFinalizing();
#else
  return !Py_IsInitialized() || _Py_IsFinalizing();
#endif
}

// Whether `e` says the device is out of memory: a MemoryError, or an exception class
// named OutOfMemoryError (torch.OutOfMemoryError, torch.cuda.OutOfMemoryError).
bool IsOutOfMemory(const py::error_already_set& e) {
  if (e.matches(PyExc_MemoryError)) return true;
  const py::object type = e.type();
  return py::hasattr(type, "__name__") &&
         py::str(type.attr("__name__")).cast<std::string>() == "OutOfMemoryError";
}

}  // namespace

PyDeviceAllocator::PyDeviceAllocator(py::function allocate, py::function free)
    : allocate_(std::move(allocate)), free_(std::move(free)) {}

PyDeviceAllocator::~PyDeviceAllocator() {
  if (Finalizing()) {  // leave the references: Python may no longer take them back
    allocate_.release();
    free_.release();
    return;
  }
  py::gil_scoped_acquire gil;
  allocate_ = py::object();
  free_ = py::object();
}

void* PyDeviceAllocator::Allocate(uint64_t bytes, const char* what) {
  py::gil_scoped_acquire gil;
  try {
    const py::object address = allocate_(bytes, what);
    const uint64_t p = address.cast<uint64_t>();
    return reinterpret_cast<void*>(static_cast<uintptr_t>(p));
  } catch (py::error_already_set& e) {
    const ErrorKind kind = IsOutOfMemory(e) ? ErrorKind::kOutOfMemory : ErrorKind::kInternal;
    throw Error(kind, std::string("the device allocator raised for ") + std::to_string(bytes) +
                          " bytes of " + what + ": " + e.what());
  } catch (const py::cast_error&) {
    throw Error(ErrorKind::kInternal, std::string("the device allocator returned no address "
                                                  "(an int) for ") +
                                          what);
  }
}

void PyDeviceAllocator::Free(void* ptr, uint64_t bytes) noexcept {
  if (Finalizing()) return;
  py::gil_scoped_acquire gil;
  try {
    free_(reinterpret_cast<uintptr_t>(ptr), bytes);
  } catch (py::error_already_set& e) {
    e.discard_as_unraisable("tandem: the device allocator's free");
  } catch (...) {  // a cast of the arguments cannot fail; nothing else may escape
  }
}

void BindDeviceAllocator(py::module_& m) {
  py::class_<PyDeviceAllocator, std::shared_ptr<PyDeviceAllocator>>(
      m, "DeviceAllocator",
      "DeviceAllocator(allocate, free): where the engine's device memory comes from "
      "(OptimizerConfig.device_allocator). allocate(nbytes, what) returns a device address "
      "(an int, aligned to 256 bytes, on the current device) or 0 when out of memory; "
      "free(address, nbytes) gives it back, once nothing the engine queued uses it. "
      "tandem.torch passes one over torch's caching allocator.")
      .def(py::init<py::function, py::function>(), py::arg("allocate"), py::arg("free"))
      .def_property_readonly("allocate", &PyDeviceAllocator::allocate)
      .def_property_readonly("free", &PyDeviceAllocator::free);
}

}  // namespace tandem::python
