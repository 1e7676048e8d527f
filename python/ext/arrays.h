// The ten state arrays as Python sees them (snapshot dicts, state dicts, checkpoint
// sections): one table, in the engine's order (engine/state_arrays.h, Note [State
// arrays]), exported as tandem._C.state_arrays(). The snapshot conversions of the binding
// walk it; Python reads it instead of spelling the arrays out again.
#pragma once

#include <pybind11/pybind11.h>

#include <array>
#include <cstdint>

#include "engine/state_arrays.h"

namespace tandem::python {

struct ArrayInfo {
  StateArray array;
  const char* name;       // the snapshot dict key, the checkpoint section kind's name
  const char* dtype;      // the NumPy dtype of the snapshot array ("float32", "int16", ...)
  bool bf16;              // holds bf16 bit patterns (torch.bfloat16 in state dicts)
  const char* component;  // "master", "momentum" or "variance"
  bool per_group;         // one entry per quantization group, else one per element
};

// In StateArray order (static_assert'ed where the table is defined).
const std::array<ArrayInfo, kStateArrayCount>& StateArrayTable();

// tandem._C.state_arrays(): [{name, dtype, bf16, component, per_group, element_size,
// section_id}] in the table's order; section_id is the checkpoint section kind of the
// same name (checkpoint/format.h), an import error if a name has none.
void BindArrays(pybind11::module_& m);

}  // namespace tandem::python
