// The ten state arrays as Python sees them (snapshot dicts, state dicts, checkpoint
// sections): the engine's table (engine/state_arrays.h, Note [State arrays]) with the
// NumPy dtype each array crosses as, exported as tandem._C.state_arrays(). Python reads
// it instead of spelling the arrays out again.
#pragma once

#include <pybind11/pybind11.h>

#include "engine/state_arrays.h"

namespace tandem::python {

// The NumPy dtype a snapshot array of `info` holds: "float32" (f32), "int16" (bf16 bit
// patterns, ecc16), "int8" (ecc8, m codes: signed) or "uint8" (v codes).
const char* NumpyDtype(const StateArrayInfo& info);

// "master", "momentum" or "variance": the state component array `a` belongs to.
const char* Component(StateArray a);

// tandem._C.state_arrays(): [{name, dtype, bf16, component, per_group, element_size,
// section_id}] in the table's order (dtype: NumpyDtype; element_size: entry bytes;
// section_id: the checkpoint section kind); tandem._C.QUANT_GROUP.
void BindArrays(pybind11::module_& m);

}  // namespace tandem::python
