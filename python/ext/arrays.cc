// The state-array table (python/ext/arrays.h).
#include "python/ext/arrays.h"

#include <cstring>
#include <string>

#include "checkpoint/format.h"
#include "checkpoint/sections.h"
#include "tandem/error.h"

namespace py = pybind11;

namespace tandem::python {

const std::array<ArrayInfo, kStateArrayCount>& StateArrayTable() {
  // m codes are stored as uint8_t in the engine and cross as int8 (signed codes).
  static const std::array<ArrayInfo, kStateArrayCount> table = {{
      {StateArray::kMasterF32, "master_f32", "float32", false, "master", false},
      {StateArray::kMasterBf16, "master_bf16", "int16", true, "master", false},
      {StateArray::kEcc8, "ecc8", "int8", false, "master", false},
      {StateArray::kEcc16, "ecc16", "int16", false, "master", false},
      {StateArray::kMF32, "m_f32", "float32", false, "momentum", false},
      {StateArray::kMCodes, "m_codes", "int8", false, "momentum", false},
      {StateArray::kMScales, "m_scales", "int16", true, "momentum", true},
      {StateArray::kVF32, "v_f32", "float32", false, "variance", false},
      {StateArray::kVCodes, "v_codes", "uint8", false, "variance", false},
      {StateArray::kVScales, "v_scales", "int16", true, "variance", true},
  }};
  return table;
}

namespace {

// The table's order and flags are the engine's: each row sits at its StateArray's
// position and says per_group exactly when the engine does.
bool TableMatchesEngine() {
  const auto& t = StateArrayTable();
  for (size_t i = 0; i < t.size(); ++i)
    if (static_cast<size_t>(t[i].array) != i || t[i].per_group != PerGroup(t[i].array))
      return false;
  return true;
}

}  // namespace

void BindArrays(py::module_& m) {
  if (!TableMatchesEngine())
    throw Error(ErrorKind::kInternal, "the binding's state-array table is out of order");
  py::list out;
  for (const ArrayInfo& a : StateArrayTable()) {
    uint32_t section = 0;
    for (uint32_t id = ckpt::kFirstDataKind; id <= ckpt::kLastDataKind; ++id)
      if (std::strcmp(ckpt::KindName(static_cast<ckpt::SectionKind>(id)), a.name) == 0)
        section = id;
    if (section == 0)
      throw Error(ErrorKind::kInternal,
                  std::string("no checkpoint section kind for state array ") + a.name);
    py::dict d;
    d["name"] = a.name;
    d["dtype"] = a.dtype;
    d["bf16"] = a.bf16;
    d["component"] = a.component;
    d["per_group"] = a.per_group;
    d["element_size"] = ckpt::KindElementSize(static_cast<ckpt::SectionKind>(section));
    d["section_id"] = section;
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
