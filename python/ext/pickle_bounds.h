// A pickle's opcodes checked against its own length before it is unpickled, so that what
// the unpickler allocates is bounded by the bytes (tandem/dcp/_metadata.py: DCP's
// .metadata). Exported as tandem._C.check_pickle_bounds(data).
#pragma once

#include <cstdint>
#include <string_view>

#include <pybind11/pybind11.h>

namespace tandem::python {

// Walks the opcodes of pickle `data` (protocols 0 to 5) up to its STOP, without running
// any, and checks that every opcode is one, that every argument (a length field's bytes, a
// line) lies inside `data`, and that every memo index is one the pickle has defined (a
// PUT at most one past the entries so far, a GET below them): so the C unpickler's memo,
// which grows to a PUT's index, holds at most one entry per opcode, and nothing it reads
// can be longer than `data`. Returns the number of opcodes. Throws
// Error(kInvalidArgument) "byte N: ..." naming the offset and what is wrong. Thread-safe.
uint64_t CheckPickleBounds(std::string_view data);

// tandem._C.check_pickle_bounds(data: bytes) -> int (CheckPickleBounds).
void BindPickleBounds(pybind11::module_& m);

}  // namespace tandem::python
