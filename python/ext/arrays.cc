// The state-array table as Python sees it (python/ext/arrays.h).
#include "python/ext/arrays.h"

#include <string>
#include <string_view>
#include <tuple>

#include <pybind11/stl.h>

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
      "array_entries",
      [](const std::string& algorithm, const std::tuple<std::string, std::string, std::string>& f,
         double momentum, uint64_t numel) {
        const Algorithm algo = ParseAlgorithm(algorithm);
        const StateFormats formats{ParseMasterFormat(std::get<0>(f)),
                                   ParseMomentFormat(std::get<1>(f)),
                                   ParseMomentFormat(std::get<2>(f))};
        HyperParams h;
        h.momentum = momentum;
        py::dict out;
        for (const StateArrayInfo& a : kStateArrays)
          if (ArrayEntries(a.array, algo, h, formats, 1) > 0)  // kept, an empty shard too
            out[a.name] = ArrayEntries(a.array, algo, h, formats, numel);
        return out;
      },
      py::arg("algorithm"), py::arg("formats"), py::arg("momentum"), py::arg("numel"),
      "{array name: entries} of the arrays a tensor of `numel` elements keeps in `formats` "
      "(master, momentum, variance) under `algorithm`, SGD's with `momentum` (ArrayEntries: "
      "the engine's one rule; an array kept by a tensor of 0 elements has 0 entries).");
  m.def(
      "state_arrays", [out] { return py::module_::import("copy").attr("deepcopy")(out); },
      "The engine's state arrays, in order: a list of dicts {name, dtype (NumPy, as "
      "snapshot dicts hold them), bf16 (bf16 bit patterns), component (master, momentum, "
      "variance), per_group (one entry per 32 elements), element_size, section_id (the "
      "checkpoint section kind)}.");
}

}  // namespace tandem::python
