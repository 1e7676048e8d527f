// tandem._C's exception classes: one per tandem::ErrorKind, and the translation of
// tandem::Error into them (the one place the binding maps errors).
#pragma once

#include <pybind11/pybind11.h>

namespace tandem::python {

// Adds to `m` the class Error (base of all, an Exception) and one subclass per
// tandem::ErrorKind, each also a subclass of the built-in exception that kind raised
// before these classes existed, so that code catching those keeps working:
//   InvalidArgumentError  (Error, ValueError)          kInvalidArgument
//   CheckpointCorruptError(Error, RuntimeError, ValueError)  kCorruption
//   CheckpointIOError     (Error, RuntimeError)        kIO
//   CudaError             (Error, RuntimeError)        kCuda
//   OutOfMemoryError      (Error, MemoryError)         kOutOfMemory
//   UnsupportedError      (Error, RuntimeError)        kUnsupported
//   InternalError         (Error, RuntimeError)        kInternal
// (CheckpointCorruptError is also a ValueError: tandem.dcp raises it for damaged
// torch.distributed.checkpoint files, where a ValueError was documented.) Their
// __module__ is "tandem" (the package re-exports them). Registers the translator: a
// tandem::Error escaping a bound function raises its kind's class with the error's
// message; `kind` (on the class and the instance) holds ErrorKindName(kind).
void BindErrors(pybind11::module_& m);

}  // namespace tandem::python
