// The state-array table as Python sees it (python/ext/arrays.h).
#include "python/ext/arrays.h"

#include <string_view>

namespace py = pybind11;

namespace tandem::python {

const char* NumpyDtype(const StateArrayInfo& info) {
  const std::string_view d = info.dtype;
  if (d == "f32") return "float32";
  if (d == "u8") return "uint8";
  if (d == "i8") return "int8";
  return "int16";  // "bf16" (bit patterns), "i16"
}

const char* Component(StateArray a) {
  if (IsMasterArray(a)) return "master";
  switch (a) {
    case StateArray::kMF32:
    case StateArray::kMCodes:
    case StateArray::kMScales:
      return "momentum";
    default:
      return "variance";
  }
}

void BindArrays(py::module_& m) {
  py::list out;
  for (const StateArrayInfo& a : kStateArrays) {
    py::dict d;
    d["name"] = a.name;
    d["dtype"] = NumpyDtype(a);
    d["bf16"] = std::string_view(a.dtype) == "bf16";
    d["component"] = Component(a.array);
    d["per_group"] = a.per_group;
    d["element_size"] = a.entry_bytes;
    d["section_id"] = a.section_id;
    out.append(d);
  }
  m.attr("QUANT_GROUP") = kQuantGroup;  // elements per q8 scale (tandem/types.h)
  m.def(
      "state_arrays", [out] { return py::module_::import("copy").attr("deepcopy")(out); },
      "The engine's state arrays, in order: a list of dicts {name, dtype (NumPy, as "
      "snapshot dicts hold them), bf16 (bf16 bit patterns), component (master, momentum, "
      "variance), per_group (one entry per 32 elements), element_size, section_id (the "
      "checkpoint section kind)}.");
}

}  // namespace tandem::python
