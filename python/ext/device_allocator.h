// tandem._C.DeviceAllocator: a tandem::DeviceAllocator over two Python callables
// (Note [One GPU memory pool] in tandem/device_allocator.h), so that tandem.torch hands
// the engine's device buffers to PyTorch's caching allocator without the extension
// linking libtorch (tandem/_core/device_memory.py).
#pragma once

#include <pybind11/pybind11.h>

#include <cstdint>
#include <memory>

#include "tandem/device_allocator.h"

namespace tandem::python {

// allocate(nbytes, what) -> the device address (an int), or 0 when out of memory;
// free(address, nbytes) gives it back. Both are called with the GIL held (the engine
// takes it: it calls them from its constructor and destructor with the GIL released).
// An exception from allocate becomes Error(kOutOfMemory) when it is a MemoryError or
// torch.OutOfMemoryError, else Error(kInternal), with its message; one from free, which
// must not fail, is reported as unraisable and the memory counted as given back. Once
// the interpreter is finalizing, free is not called (the process's memory goes with it).
class PyDeviceAllocator final : public DeviceAllocator {
 public:
  PyDeviceAllocator(pybind11::function allocate, pybind11::function free);
  ~PyDeviceAllocator() override;
  PyDeviceAllocator(const PyDeviceAllocator&) = delete;
  PyDeviceAllocator& operator=(const PyDeviceAllocator&) = delete;

  void* Allocate(uint64_t bytes, const char* what) override;
  void Free(void* ptr, uint64_t bytes) noexcept override;

  pybind11::object allocate() const { return allocate_; }
  pybind11::object free() const { return free_; }

 private:
  pybind11::object allocate_, free_;
};

// Adds DeviceAllocator to `m`.
void BindDeviceAllocator(pybind11::module_& m);

}  // namespace tandem::python
