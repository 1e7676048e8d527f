// tandem._C: the pybind11 binding of tandem::HybridOptimizer.
//
// The extension never links libtorch. Tensors cross the boundary as raw data pointers
// (Python ints from `Tensor.data_ptr()`) plus a dtype name and an element count; CUDA
// streams cross as integer handles (`torch.cuda.current_stream().cuda_stream`, 0 = the
// legacy default stream). The Python layer (tandem/torch/) validates tensors and owns
// the buffers; this file only converts values and errors.
//
// Errors: tandem::Error becomes the class of its kind (python/ext/errors.h), each also the
// built-in ValueError, MemoryError or RuntimeError it was before those classes existed.
// Options: OptimizerConfig and StepOptions are bound classes (python/ext/config.h).
//
// Snapshots cross as a dict of plain values and NumPy arrays. Arrays returned by
// `snapshot()` own their memory (the engine's vectors are moved into capsules, no copy).
// bf16 bit patterns are returned as int16 arrays (NumPy has no bf16 and old PyTorch has
// no uint16), q8 momentum codes as int8, variance codes as uint8. Each tensor's dict has
// its "step" and "shape" (a list, empty where the spec gave none); the snapshot's
// "metadata" is a str (tandem.torch keeps its param_groups there in checkpoints).
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cstdint>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#if TANDEM_PY_HAS_CHECKPOINT
#include "checkpoint/crc.h"
#include "tandem/checkpoint.h"
#endif
#include "engine/state_arrays.h"
#include "python/ext/arrays.h"
#include "python/ext/config.h"
#include "python/ext/device_allocator.h"
#include "python/ext/errors.h"
#include "python/ext/pickle_bounds.h"
#include "python/ext/planner.h"
#include "tandem/error.h"
#include "tandem/node.h"
#include "tandem/optimizer.h"
#include "tandem/placement.h"
#include "tandem/planner.h"
#include "tandem/resolve_placement.h"
#include "tandem/snapshot.h"
#include "tandem/types.h"
#include "tandem/version.h"

namespace py = pybind11;

namespace tandem {
namespace {

using python::HyperParamsFromDict;
using python::HyperParamsToDict;
using python::ModeName;
using python::PyStepOptions;

void* ToPointer(uint64_t address) {
  return reinterpret_cast<void*>(static_cast<uintptr_t>(address));
}

// NumPy 2 moved the element size within its dtype struct, which pybind11 before 2.12
// reads directly (Debian 12 ships 2.10): the two functions below never let pybind11 read
// it (explicit strides; the element size through Python), so the extension works with
// NumPy 1 and 2 whichever pybind11 built it.

// Moves `v` into a 1-D NumPy array of type Out (same element size as T) without copying.
template <typename Out, typename T>
py::array MoveToArray(std::vector<T>&& v) {
  static_assert(sizeof(Out) == sizeof(T));
  auto* owner = new std::vector<T>(std::move(v));
  py::capsule free_when_done(owner, [](void* p) { delete static_cast<std::vector<T>*>(p); });
  return py::array_t<Out>({static_cast<py::ssize_t>(owner->size())},
                          {static_cast<py::ssize_t>(sizeof(Out))},
                          reinterpret_cast<const Out*>(owner->data()), free_when_done);
}

// A state array as NumPy sees it (engine's table, StateArrayInfo::dtype): fp32 as float32,
// bf16 bit patterns (master, scales) and ecc16 as int16, ecc8 and m codes as int8, v codes
// as uint8.
template <typename T>
py::array ArrayOf(std::vector<T>&& v, const StateArrayInfo& info) {
  if constexpr (sizeof(T) == 4) {
    return MoveToArray<float>(std::move(v));
  } else if constexpr (sizeof(T) == 2) {
    return MoveToArray<int16_t>(std::move(v));
  } else {
    if (std::string_view(info.dtype) == "u8") return MoveToArray<uint8_t>(std::move(v));
    return MoveToArray<int8_t>(std::move(v));
  }
}

// Copies a 1-D array-like (any NumPy array with the right element size) into `out`.
template <typename T>
void CopyFromArray(const py::dict& d, const char* key, std::vector<T>* out) {
  out->clear();
  if (!d.contains(key)) return;
  py::array a = py::array::ensure(d[key], py::array::c_style);
  if (!a)
    throw Error(ErrorKind::kInvalidArgument,
                std::string("snapshot array '") + key + "' is not an array");
  const auto itemsize = a.attr("itemsize").cast<py::ssize_t>();
  if (itemsize != static_cast<py::ssize_t>(sizeof(T)))
    throw Error(ErrorKind::kInvalidArgument,
                std::string("snapshot array '") + key + "' has " + std::to_string(itemsize) +
                    "-byte elements, expected " + std::to_string(sizeof(T)));
  out->resize(static_cast<size_t>(a.size()));
  if (a.size() > 0) std::memcpy(out->data(), a.data(), out->size() * sizeof(T));
}

// Snapshot metadata is opaque bytes to the engine; Python sees a str. Bytes that are not
// UTF-8 cross as surrogate escapes, so metadata of any origin round-trips unchanged.
py::str MetadataToStr(const std::string& m) {
  PyObject* o =
      PyUnicode_DecodeUTF8(m.data(), static_cast<py::ssize_t>(m.size()), "surrogateescape");
  if (!o) throw py::error_already_set();
  return py::reinterpret_steal<py::str>(o);
}

std::string MetadataFromStr(const py::handle& h) {
  if (!py::isinstance<py::str>(h))
    throw Error(ErrorKind::kInvalidArgument, "snapshot 'metadata' must be a str");
  PyObject* b = PyUnicode_AsEncodedString(h.ptr(), "utf-8", "surrogateescape");
  if (!b) throw py::error_already_set();
  return py::reinterpret_steal<py::bytes>(b).cast<std::string>();
}

// {"master": ..., "momentum": ..., "variance": ...}: format names as the constructor's
// keywords take them.
py::dict FormatsToDict(const StateFormats& f) {
  py::dict d;
  d["master"] = Name(f.master);
  d["momentum"] = Name(f.momentum);
  d["variance"] = Name(f.variance);
  return d;
}

py::dict SnapshotToDict(OptimizerSnapshot s) {
  py::dict d;
  d["algorithm"] = Name(s.algo);
  d["master"] = Name(s.formats.master);
  d["momentum"] = Name(s.formats.momentum);
  d["variance"] = Name(s.formats.variance);
  py::list groups;
  for (const HyperParams& h : s.groups) groups.append(HyperParamsToDict(h));
  d["groups"] = groups;
  d["step"] = s.step;
  d["metadata"] = MetadataToStr(s.metadata);
  py::list tensors;
  for (TensorSnapshot& t : s.tensors) {
    py::dict td;
    td["name"] = t.name;
    td["numel"] = t.numel;
    td["shape"] = py::cast(t.shape);
    td["param_dtype"] = Name(t.param_dtype);
    td["grad_dtype"] = Name(t.grad_dtype);
    td["group"] = t.group;
    td["step"] = t.step;
    td["formats"] = FormatsToDict(t.formats);
    // Only the arrays the format uses (named by engine's table); empty ones are left out.
    ForEachStateVector(t, [&](StateArray a, auto& v) {
      if (!v.empty()) td[Info(a).name] = ArrayOf(std::move(v), Info(a));
    });
    tensors.append(td);
  }
  d["tensors"] = tensors;
  return d;
}

// d[key] cast to T; a missing key or a value of another type is Error(kInvalidArgument)
// naming `where` and the key (not a bare KeyError or "Unable to cast").
template <typename T>
T Field(const py::dict& d, const char* key, const std::string& where) {
  if (!d.contains(key)) throw Error(ErrorKind::kInvalidArgument, where + ": missing '" + key + "'");
  try {
    return d[key].cast<T>();
  } catch (const py::cast_error&) {
    throw Error(ErrorKind::kInvalidArgument,
                where + ": '" + key + "' holds a " +
                    std::string(py::str(py::type::of(d[key]).attr("__name__"))) +
                    " that is not of the expected type or range");
  }
}

// The inverse of FormatsToDict; every key is required. Error(kInvalidArgument) naming
// `where` for anything else than a dict of three format names.
StateFormats FormatsFromObject(const py::handle& h, const std::string& where) {
  if (!py::isinstance<py::dict>(h))
    throw Error(ErrorKind::kInvalidArgument,
                where + ": formats must be a dict {'master', 'momentum', 'variance'} or None");
  const py::dict d = py::reinterpret_borrow<py::dict>(h);
  for (auto item : d) {
    const std::string key = py::str(item.first);
    if (key != "master" && key != "momentum" && key != "variance")
      throw Error(ErrorKind::kInvalidArgument, where + ": formats has an unknown key '" + key +
                                                   "' (expected master, momentum, variance)");
  }
  const std::string w = where + " formats";
  return {ParseMasterFormat(Field<std::string>(d, "master", w)),
          ParseMomentFormat(Field<std::string>(d, "momentum", w)),
          ParseMomentFormat(Field<std::string>(d, "variance", w))};
}

// Snapshot dicts written before per-tensor steps, shapes, formats and metadata existed
// still load: a missing tensor "step" is the snapshot's step, a missing "shape" is empty
// (one dimension of numel elements), a missing (or None) "formats" is the snapshot's
// master/momentum/variance, and a missing "metadata" is empty.
OptimizerSnapshot SnapshotFromDict(const py::dict& d) {
  OptimizerSnapshot s;
  s.algo = ParseAlgorithm(Field<std::string>(d, "algorithm", "snapshot"));
  s.formats.master = ParseMasterFormat(Field<std::string>(d, "master", "snapshot"));
  s.formats.momentum = ParseMomentFormat(Field<std::string>(d, "momentum", "snapshot"));
  s.formats.variance = ParseMomentFormat(Field<std::string>(d, "variance", "snapshot"));
  for (auto g : Field<py::list>(d, "groups", "snapshot")) {
    if (!py::isinstance<py::dict>(g))
      throw Error(ErrorKind::kInvalidArgument, "snapshot: 'groups' entries must be dicts");
    s.groups.push_back(HyperParamsFromDict(g.cast<py::dict>()));
  }
  s.step = Field<int64_t>(d, "step", "snapshot");
  if (d.contains("metadata")) s.metadata = MetadataFromStr(d["metadata"]);
  size_t index = 0;
  for (auto item : Field<py::list>(d, "tensors", "snapshot")) {
    const std::string where = "snapshot tensor " + std::to_string(index++);
    if (!py::isinstance<py::dict>(item))
      throw Error(ErrorKind::kInvalidArgument, where + ": not a dict");
    const py::dict td = item.cast<py::dict>();
    TensorSnapshot t;
    t.name = Field<std::string>(td, "name", where);
    t.numel = Field<uint64_t>(td, "numel", where);
    if (td.contains("shape")) t.shape = Field<std::vector<uint64_t>>(td, "shape", where);
    t.param_dtype = ParseDType(Field<std::string>(td, "param_dtype", where));
    t.grad_dtype = ParseDType(Field<std::string>(td, "grad_dtype", where));
    t.group = Field<uint32_t>(td, "group", where);
    t.step = td.contains("step") ? Field<int64_t>(td, "step", where) : s.step;
    t.formats = td.contains("formats") && !td["formats"].is_none()
                    ? FormatsFromObject(td["formats"], where)
                    : s.formats;
    ForEachStateVector(t, [&](StateArray a, auto& v) { CopyFromArray(td, Info(a).name, &v); });
    s.tensors.push_back(std::move(t));
  }
  return s;
}

#if TANDEM_PY_HAS_CHECKPOINT
// tandem::ConvertSnapshot on a snapshot dict: the same state in the formats named. With
// tensor_formats (a list, one entry per tensor: a formats dict, or None for the formats
// named), tandem::ConvertSnapshotPerTensor: each tensor in its own target.
py::dict ConvertSnapshotDict(const py::dict& d, const std::string& master,
                             const std::string& momentum, const std::string& variance,
                             const py::object& tensor_formats) {
  OptimizerSnapshot s = SnapshotFromDict(d);
  const StateFormats to{ParseMasterFormat(master), ParseMomentFormat(momentum),
                        ParseMomentFormat(variance)};
  std::vector<StateFormats> targets;
  const bool per_tensor = !tensor_formats.is_none();
  if (per_tensor) {
    size_t i = 0;
    for (auto f : tensor_formats.cast<py::sequence>()) {
      const std::string where = "tensor_formats[" + std::to_string(i++) + "]";
      targets.push_back(f.is_none() ? to : FormatsFromObject(f, where));
    }
  }
  OptimizerSnapshot out;
  {
    py::gil_scoped_release release;
    out = per_tensor ? ConvertSnapshotPerTensor(s, to, targets) : ConvertSnapshot(s, to);
  }
  return SnapshotToDict(std::move(out));
}
#endif

py::dict BytesToDict(const MemoryReport::Bytes& b) {
  py::dict d;
  d["master"] = b.master;
  d["correction"] = b.correction;
  d["momentum"] = b.momentum;
  d["variance"] = b.variance;
  d["scales"] = b.scales;
  d["staging"] = b.staging;
  d["metadata"] = b.metadata;
  d["speculation"] = b.speculation;
  d["grads"] = b.grads;
  d["total"] = b.total();
  return d;
}

// HybridOptimizer::memory() and PredictMemory as Python sees them: {"device": Bytes,
// "host": Bytes, "host_budget", "classes": {...}} (BytesToDict).
py::dict MemoryToDict(const MemoryReport& m) {
  py::dict d;
  d["device"] = BytesToDict(m.device);
  d["host"] = BytesToDict(m.host);
  d["host_budget"] = m.host_budget;
  py::dict classes;
  classes["gpu_resident"] = m.classes.gpu_resident;
  classes["streamed"] = m.classes.streamed;
  classes["stream_slots"] = m.classes.stream_slots;
  classes["host_computed"] = m.classes.host_computed;
  d["classes"] = classes;
  return d;
}

// TensorSpec from a tuple (name, numel, param_dtype, grad_dtype, param_ptr, grad_ptr, group
// [, shape[, formats[, norm_unit]]]); shape is a sequence of dimensions whose product is
// numel (the engine checks), or None; formats a dict {"master", "momentum", "variance"} of
// format names overriding the configured ones for this tensor (TensorSpec::formats), or
// None; norm_unit TensorSpec::norm_unit. The 7-field form (no shape) stays accepted.
TensorSpec SpecFromTuple(const py::tuple& t) {
  if (t.size() < 7 || t.size() > 10)
    throw Error(ErrorKind::kInvalidArgument,
                "tensor spec must be (name, numel, param_dtype, grad_dtype, param_ptr, "
                "grad_ptr, group[, shape[, formats[, norm_unit]]]), got " +
                    std::to_string(t.size()) + " fields");
  TensorSpec s;
  s.name = t[0].cast<std::string>();
  s.numel = t[1].cast<uint64_t>();
  s.param_dtype = ParseDType(t[2].cast<std::string>());
  s.grad_dtype = ParseDType(t[3].cast<std::string>());
  s.param = ToPointer(t[4].cast<uint64_t>());
  s.grad = ToPointer(t[5].cast<uint64_t>());
  s.group = t[6].cast<uint32_t>();
  if (t.size() >= 10) s.norm_unit = t[9].cast<uint64_t>();
  if (t.size() >= 8 && !t[7].is_none()) {
    for (auto d : t[7].cast<py::sequence>()) {
      const int64_t dim = d.cast<int64_t>();
      if (dim < 0)
        throw Error(ErrorKind::kInvalidArgument,
                    "tensor '" + s.name + "': negative dimension " + std::to_string(dim));
      s.shape.push_back(static_cast<uint64_t>(dim));
    }
  }
  if (t.size() >= 9 && !t[8].is_none())
    s.formats = FormatsFromObject(t[8], "tensor '" + s.name + "'");
  return s;
}

std::vector<TensorSpec> SpecsFromList(const py::list& tensors) {
  std::vector<TensorSpec> specs;
  for (auto t : tensors) specs.push_back(SpecFromTuple(t.cast<py::tuple>()));
  return specs;
}

// One flag per tensor from None (every tensor), bytes or a sequence of 0/1 values;
// `count` entries are required.
std::vector<uint8_t> ActiveFromObject(const py::object& active, size_t count) {
  std::vector<uint8_t> flags;
  if (active.is_none()) return flags;
  if (py::isinstance<py::bytes>(active) || py::isinstance<py::bytearray>(active)) {
    const std::string raw = active.cast<std::string>();
    flags.assign(raw.begin(), raw.end());
  } else {
    for (auto v : active.cast<py::sequence>()) flags.push_back(v.cast<int>() != 0 ? 1 : 0);
  }
  if (flags.size() != count)
    throw Error(ErrorKind::kInvalidArgument,
                "step: active has " + std::to_string(flags.size()) +
                    " entries, the optimizer has " + std::to_string(count) + " tensors");
  return flags;
}

// A step's learning rates: a number (every group: lr * lr_scale, HybridOptimizer::
// Step(lr)) or a sequence of one number per group (HybridOptimizer::Step(group_lrs)).
struct StepLrs {
  bool per_group = false;
  double lr = 0;
  std::vector<double> group_lrs;
};

StepLrs LrsFromObject(const py::object& lr) {
  StepLrs out;
  if (py::isinstance<py::float_>(lr) || py::isinstance<py::int_>(lr)) {
    out.lr = lr.cast<double>();
    return out;
  }
  if (!py::isinstance<py::sequence>(lr) || py::isinstance<py::str>(lr))
    throw Error(ErrorKind::kInvalidArgument,
                "lr must be a number or a sequence of one number per group");
  out.per_group = true;
  for (auto v : lr.cast<py::sequence>()) out.group_lrs.push_back(v.cast<double>());
  return out;
}

// StepOptions::group_hyper from None or a list of group dicts.
std::vector<HyperParams> GroupsFromObject(const py::object& groups) {
  std::vector<HyperParams> hs;
  if (groups.is_none()) return hs;
  for (auto g : groups.cast<py::sequence>()) {
    if (!py::isinstance<py::dict>(g))
      throw Error(ErrorKind::kInvalidArgument, "groups: each entry must be a dict");
    hs.push_back(HyperParamsFromDict(g.cast<py::dict>()));
  }
  return hs;
}

// StepOptions::grads from None or a sequence of pointers (ints; 0: the default).
std::vector<const void*> GradsFromObject(const py::object& grads) {
  std::vector<const void*> ptrs;
  if (grads.is_none()) return ptrs;
  for (auto g : grads.cast<py::sequence>())
    ptrs.push_back(g.is_none() ? nullptr : ToPointer(g.cast<uint64_t>()));
  return ptrs;
}

// The bound object: the engine optimizer and the configuration it was built with.
class PyOptimizer {
 public:
  PyOptimizer(const py::list& tensors, OptimizerConfig cfg) {
    std::vector<TensorSpec> specs = SpecsFromList(tensors);
    py::gil_scoped_release release;
    opt_ = std::make_unique<HybridOptimizer>(std::move(specs), std::move(cfg));
  }

  // Returns (applied, grad_norm, step, stepped_tensors). `combine`, when not None, is
  // StepOptions::combine_grad_stats: combine(digits, nonfinite) -> (digits, nonfinite) of
  // the whole model, where digits are GradStats::exact (16 ints below 2^32, least
  // significant first, both ways); called with the GIL held; what it raises propagates
  // unchanged (the step changes nothing then).
  // `lr`: a number, or one number per group (LrsFromObject); the options' groups: None or
  // each group's hyper-parameters for this step (StepOptions::group_hyper); its grads: None
  // or each tensor's gradient pointer for this step (StepOptions::grads; 0 or None: the
  // default).
  py::tuple Step(const py::object& lr, const PyStepOptions& given) {
    const StepLrs lrs = LrsFromObject(lr);
    const std::vector<uint8_t> flags = ActiveFromObject(given.active, opt_->tensor_count());
    const std::vector<HyperParams> hyper = GroupsFromObject(given.groups);
    const std::vector<const void*> ptrs = GradsFromObject(given.grads);
    const py::object combine = given.combine;
    StepOptions options{given.max_grad_norm, given.loss_scale};
    options.active = flags;
    options.group_hyper = hyper;
    options.grads = ptrs;
    // A Python exception from `combine` crosses the engine as a tandem::Error and is
    // raised again here, as itself, once the GIL is held.
    std::unique_ptr<py::error_already_set> raised;
    if (!combine.is_none()) {
      options.combine_grad_stats = [&combine, &raised](const GradStats& local) {
        py::gil_scoped_acquire gil;
        try {
          py::list digits;
          for (uint32_t d : local.exact) digits.append(d);
          const py::object out = combine(digits, local.nonfinite);
          if (!py::isinstance<py::tuple>(out) || py::len(out) != 2)
            throw py::type_error("combine must return a tuple (digits, nonfinite)");
          const py::tuple whole = out.cast<py::tuple>();
          const auto sums = whole[0].cast<std::vector<uint32_t>>();
          if (sums.size() != local.exact.size())
            throw py::value_error("combine must return 16 digits");
          GradStats g;
          for (size_t k = 0; k < sums.size(); ++k) g.exact[k] = sums[k];
          g.nonfinite = whole[1].cast<uint64_t>();
          return g;
        } catch (py::error_already_set& e) {
          raised = std::make_unique<py::error_already_set>(std::move(e));
        } catch (const std::exception& e) {  // pybind11's cast and type errors
          PyErr_SetString(PyExc_TypeError, e.what());
          raised = std::make_unique<py::error_already_set>();
        }
        throw Error(ErrorKind::kInvalidArgument, "the gradient statistics callback raised");
      };
    }
    StepResult r;
    try {
      py::gil_scoped_release release;
      r = lrs.per_group ? opt_->Step(lrs.group_lrs, options) : opt_->Step(lrs.lr, options);
    } catch (const Error&) {
      if (raised) throw std::move(*raised);
      throw;
    }
    return py::make_tuple(r.applied, r.grad_norm, r.step, r.stepped_tensors);
  }

  // Re-derives the masters of `indices` from their parameters (HybridOptimizer::ReloadParams).
  void ReloadParams(const std::vector<size_t>& indices) {
    py::gil_scoped_release release;
    opt_->ReloadParams(indices);
  }

  // Each tensor's own step count, in tensor order.
  std::vector<int64_t> TensorStepCounts() const {
    std::vector<int64_t> counts;
    for (size_t i = 0; i < opt_->tensor_count(); ++i) counts.push_back(opt_->tensor_step_count(i));
    return counts;
  }

  void BeginStep(const py::object& lr, const PyStepOptions& given) {
    const StepLrs lrs = LrsFromObject(lr);
    const std::vector<HyperParams> hyper = GroupsFromObject(given.groups);
    StepOptions options{given.max_grad_norm, given.loss_scale};
    options.group_hyper = hyper;
    py::gil_scoped_release release;
    if (lrs.per_group)
      opt_->BeginStep(lrs.group_lrs, options);
    else
      opt_->BeginStep(lrs.lr, options);
  }

  bool step_begun() const { return opt_->step_begun(); }

  void GradReady(size_t i, uint64_t grad, uint64_t ready_stream) {
    py::gil_scoped_release release;
    opt_->GradReady(i, ToPointer(grad), ToPointer(ready_stream));
  }

  void WaitGradConsumed(size_t i, uint64_t stream) const {
    py::gil_scoped_release release;  // host mode with release_grads blocks
    opt_->WaitGradConsumed(i, ToPointer(stream));
  }

  bool GradConsumed(size_t i) const { return opt_->GradConsumed(i); }

  void DiscardStep() {
    py::gil_scoped_release release;  // waits for the speculation worker
    opt_->DiscardStep();
  }

  void WaitParam(size_t i, uint64_t stream) const { opt_->WaitParam(i, ToPointer(stream)); }

  // Replaces every group's hyper-parameters from the next step on (cheap: no state is
  // touched). All groups are validated before any change, so a bad one changes nothing.
  void SetGroups(const py::list& groups) {
    std::vector<HyperParams> hs;
    for (auto g : groups) hs.push_back(HyperParamsFromDict(g.cast<py::dict>()));
    py::gil_scoped_release release;
    const size_t count = opt_->group_count();
    if (hs.size() != count)
      throw Error(ErrorKind::kInvalidArgument, "set_groups: " + std::to_string(hs.size()) +
                                                   " groups given, optimizer has " +
                                                   std::to_string(count));
    std::vector<HyperParams> old;
    for (size_t g = 0; g < hs.size(); ++g) old.push_back(opt_->hyper_params(g));
    try {
      for (size_t g = 0; g < hs.size(); ++g) opt_->SetHyperParams(g, hs[g]);
    } catch (...) {
      for (size_t g = 0; g < old.size(); ++g) opt_->SetHyperParams(g, old[g]);
      throw;
    }
  }

#if TANDEM_PY_HAS_CHECKPOINT
  // Writes the whole state to `path` with tandem::SaveCheckpoint (atomic, CRC-framed),
  // with `metadata` (tandem.torch: its param_groups as JSON) stored verbatim in the file.
  void SaveCheckpointFile(const std::string& path, const std::string& compression, bool sync,
                          const py::handle& metadata) {
    CheckpointOptions options;
    if (compression == "none") {
      options.compression = CheckpointCompression::kNone;
    } else if (compression == "auto") {
      options.compression = CheckpointCompression::kAuto;
    } else if (compression == "all") {
      options.compression = CheckpointCompression::kAll;
    } else {
      throw Error(ErrorKind::kInvalidArgument,
                  "unknown checkpoint compression '" + compression + "' (none, auto, all)");
    }
    options.sync = sync;
    std::string text = MetadataFromStr(metadata);
    py::gil_scoped_release release;
    OptimizerSnapshot s = opt_->Snapshot();
    s.metadata = std::move(text);
    SaveCheckpoint(s, path, options);
  }

  // Loads and verifies `path` with tandem::LoadCheckpoint, then calls
  // `groups_for(metadata)` (the file's metadata as a str) before anything changes: it may
  // raise to refuse the file (nothing changed then), return None to restore the file's
  // hyper-parameters, or return a list of group dicts to restore in their place (files
  // without metadata: the live optimizer's stay in force). Then restores the state.
  // Returns the metadata.
  py::str LoadCheckpointFile(const std::string& path, const py::object& groups_for) {
    OptimizerSnapshot s;
    {
      py::gil_scoped_release release;
      s = LoadCheckpoint(path);
    }
    py::str metadata = MetadataToStr(s.metadata);
    const py::object chosen = groups_for(metadata);
    if (!chosen.is_none()) {
      std::vector<HyperParams> hs;
      for (auto g : chosen.cast<py::list>()) hs.push_back(HyperParamsFromDict(g.cast<py::dict>()));
      if (hs.size() != s.groups.size())
        throw Error(ErrorKind::kInvalidArgument,
                    "checkpoint '" + path + "' has " + std::to_string(s.groups.size()) +
                        " groups, optimizer " + std::to_string(hs.size()));
      s.groups = std::move(hs);
    }
    {
      py::gil_scoped_release release;
      opt_->Restore(s);
    }
    return metadata;
  }
#endif

  py::dict Snapshot() const {
    OptimizerSnapshot s;
    {
      py::gil_scoped_release release;
      s = opt_->Snapshot();
    }
    return SnapshotToDict(std::move(s));
  }

  void Restore(const py::dict& d) {
    OptimizerSnapshot s = SnapshotFromDict(d);
    py::gil_scoped_release release;
    opt_->Restore(s);
  }

  // The state as the engine's own snapshot, held by Python without converting it: what a
  // move between placements carries (Engine.move_state), copied once out and once in.
  std::shared_ptr<OptimizerSnapshot> SnapshotHeld() const {
    py::gil_scoped_release release;
    return std::make_shared<OptimizerSnapshot>(opt_->Snapshot());
  }

  void RestoreHeld(const std::shared_ptr<OptimizerSnapshot>& s) {
    if (!s) throw Error(ErrorKind::kInvalidArgument, "restore_held: no snapshot");
    py::gil_scoped_release release;
    opt_->Restore(*s);
  }

  std::string mode() const { return ModeName(opt_->mode()); }

  py::dict placement() const {
    const Placement& p = opt_->placement();
    py::list parts, streams;
    for (const TensorPlacement& t : p.tensors) {
      parts.append(py::make_tuple(t.numel, t.device_count));
      streams.append(t.stream_count);
    }
    py::dict d;
    d["tensors"] = parts;  // (numel, device_count) per tensor
    d["stream_counts"] = streams;  // per tensor: host-resident elements the GPU computes
    d["total"] = p.total;
    d["offloaded"] = p.offloaded;
    d["target"] = p.target;
    d["streamed"] = p.streamed;
    d["stream_share"] = p.stream_share;
    return d;
  }

  py::dict compute_split() const {
    const ComputeSplit& s = opt_->compute_split();
    py::dict d;
    d["share"] = s.share;
    d["step_ms"] = s.step_ms;
    d["d2h_ms"] = s.down_ms;
    d["h2d_ms"] = s.up_ms;
    d["host_ms"] = s.host_ms;
    d["gpu_ms"] = s.gpu_ms;
    d["stream_ms"] = s.stream_ms;
    d["host_path_ms"] = s.host_path_ms;
    d["bound"] = s.step_ms > 0 ? s.bound() : "";
    return d;
  }

  py::dict memory() const { return MemoryToDict(opt_->memory()); }

  py::dict last_step_times() const {
    const StageTimes t = opt_->last_step_times();
    py::dict d;
    d["prepass_ms"] = t.prepass_ms;
    d["gpu_update_ms"] = t.gpu_update_ms;
    d["d2h_ms"] = t.d2h_ms;
    d["host_update_ms"] = t.host_update_ms;
    d["h2d_ms"] = t.h2d_ms;
    d["step_ms"] = t.step_ms;
    d["chunks"] = t.chunks;
    d["stream_ms"] = t.stream_ms;
    d["stream_chunks"] = t.stream_chunks;
    d["speculated_chunks"] = t.speculated_chunks;
    d["rolled_back_chunks"] = t.rolled_back_chunks;
    d["speculative_host_ms"] = t.speculative_host_ms;
    d["speculated_stream_chunks"] = t.speculated_stream_chunks;
    d["rolled_back_stream_chunks"] = t.rolled_back_stream_chunks;
    d["released_grad_up_bytes"] = t.released_grad_up_bytes;
    d["speculation_stopped"] = t.speculation_stopped;
    d["handover_ms"] = t.handover_ms;
    return d;
  }

  int64_t step_count() const { return opt_->step_count(); }
  size_t tensor_count() const { return opt_->tensor_count(); }

 private:
  std::unique_ptr<HybridOptimizer> opt_;
};

#if TANDEM_PY_HAS_CHECKPOINT
// crc32c(buffer, seed=0): CRC32C (Castagnoli) of a C-contiguous buffer through ISA-L
// (checkpoint/crc.h), continuing from `seed` so that crc32c(b, crc32c(a)) == crc32c(a + b).
// Takes any object with the buffer protocol (bytes, bytearray, memoryview, NumPy arrays);
// a non-contiguous buffer raises BufferError or ValueError (the exporter's). The GIL is
// released for buffers of kCrcReleaseGilBytes or more; the buffer stays exported (so a
// bytearray cannot be resized) until the CRC is done.
constexpr size_t kCrcReleaseGilBytes = size_t{64} << 10;

uint32_t Crc32cOfBuffer(const py::handle& buffer, uint64_t seed) {
  if (seed > 0xFFFFFFFFull)
    throw Error(ErrorKind::kInvalidArgument,
                "crc32c: seed " + std::to_string(seed) + " is not a 32-bit value");
  Py_buffer view;
  if (PyObject_GetBuffer(buffer.ptr(), &view, PyBUF_SIMPLE) != 0) throw py::error_already_set();
  const auto* data = view.buf;
  const size_t n = static_cast<size_t>(view.len);
  uint32_t crc = static_cast<uint32_t>(seed);
  if (n >= kCrcReleaseGilBytes) {
    py::gil_scoped_release release;
    crc = ckpt::Crc32c(data, n, crc);
  } else {
    crc = ckpt::Crc32c(data, n, crc);
  }
  PyBuffer_Release(&view);
  return crc;
}
#endif

}  // namespace
}  // namespace tandem

PYBIND11_MODULE(_C, m) {
  using tandem::PyOptimizer;
  m.doc() = "Tandem's HybridOptimizer (pointer-level binding; use tandem.torch instead)";

  tandem::python::BindErrors(m);
  tandem::python::BindDeviceAllocator(m);
  tandem::python::BindConfig(m);
  tandem::python::BindArrays(m);
  tandem::python::BindPickleBounds(m);

  m.attr("has_checkpoint") = py::bool_(TANDEM_PY_HAS_CHECKPOINT != 0);
  // The version has one home, include/tandem/version.h; tandem.__version__ is this.
  m.attr("__version__") = tandem::kVersion;
#if TANDEM_PY_HAS_CHECKPOINT
  m.def("convert_snapshot", &tandem::ConvertSnapshotDict, py::arg("snapshot"), py::arg("master"),
        py::arg("momentum"), py::arg("variance"), py::arg("tensor_formats") = py::none(),
        "The snapshot dict re-encoded in the formats named (tandem::ConvertSnapshot): "
        "masters and moments through fp32, everything else copied. Tensors whose "
        "'formats' differ from the snapshot's master/momentum/variance (per-tensor "
        "overrides) keep them (ConvertTensors::kDefaultFormats). tensor_formats: None, or "
        "a list with one entry per tensor, its target formats dict or None for the formats "
        "named (tandem::ConvertSnapshotPerTensor).");
  m.def("crc32c", &tandem::Crc32cOfBuffer, py::arg("buffer"), py::arg("seed") = 0,
        "CRC32C (Castagnoli, ISA-L) of a contiguous buffer (bytes, bytearray, memoryview, "
        "NumPy array), continuing from `seed`: crc32c(b, crc32c(a)) == crc32c(a + b).");
#endif
  m.def("cuda_device_available", &tandem::CudaDeviceAvailable,
        "Whether this process can use a CUDA device (never raises).");
  tandem::python::BindPlanner(m);  // plan_options, make_plan, find_largest, plan_cli, ...
  m.def(
      "check_hyper_params",
      [](const std::string& algorithm, const py::dict& hyper, const std::string& where) {
        tandem::ValidateHyperParams(tandem::ParseAlgorithm(algorithm),
                                    tandem::python::HyperParamsFromDict(hyper), where);
      },
      py::arg("algorithm"), py::arg("hyper"), py::arg("where"),
      "Checks one group's hyper-parameters (a dict of HyperParams fields) as the engine "
      "does (tandem::ValidateHyperParams): ValueError naming `where` and the field.");
  m.def(
      "rate_cache_entries",
      []() {
        py::list out;
        for (const auto& [key, r] : tandem::DefaultRateCache().Entries()) {
          py::dict d;
          d["algorithm"] = tandem::Name(key.algorithm);
          d["formats"] = tandem::FormatsToDict(key.formats);
          d["param_dtype"] = tandem::Name(key.param_dtype);
          d["host_threads"] = key.host_threads;
          d["host_cpus"] = key.host_cpus;
          d["chunk_elements"] = key.chunk_elements;
          d["kernel_bytes"] = key.kernel_bytes;
          d["h2d_gbps"] = r.h2d_gbps;
          d["d2h_gbps"] = r.d2h_gbps;
          d["host_gparams"] = r.host_gparams;
          d["gpu_gparams"] = r.gpu_gparams;
          out.append(d);
        }
        return out;
      },
      "The rates offload_compute='auto' measured in this process (tandem::DefaultRateCache), "
      "one dict per setting.");
  m.def(
      "reset_rate_cache", []() { tandem::DefaultRateCache().Reset(); },
      "Forgets the measured rates: the next optimizer with offload_compute='auto' measures "
      "again.");
  m.def("max_host_threads", &tandem::MaxHostThreads,
        "The largest host_threads an optimizer accepts.");
  // One node, many ranks (include/tandem/node.h).
  m.def(
      "rank_cpus",
      [](int local_rank, int local_world_size, const std::vector<std::string>& gpu_pci_bus_ids) {
        py::gil_scoped_release release;
        return tandem::RankCpus(local_rank, local_world_size, gpu_pci_bus_ids);
      },
      py::arg("local_rank"), py::arg("local_world_size"),
      py::arg("gpu_pci_bus_ids") = std::vector<std::string>{},
      "This local rank's share of the node's cores (tandem::RankCpus): a sorted list of CPU ids.");
  m.def("rank_cpus_on_topology", &tandem::RankCpusOnTopology, py::arg("synthetic"),
        py::arg("allowed_cpus"), py::arg("rank_numa_nodes"), py::arg("local_rank"),
        py::arg("local_world_size"), "RankCpus on a synthetic hwloc topology.");
  m.def("node_pinned_budget", &tandem::NodePinnedBudget,
        "The node's pinned-memory budget in bytes (TANDEM_NODE_PINNED_BUDGET, else half of "
        "MemTotal).");
  m.def("pinned_budget", &tandem::PinnedBudget, py::arg("local_world_size"),
        py::arg("node_budget") = uint64_t{0}, "One local rank's share of the node's budget.");
  m.def("parse_byte_size", &tandem::ParseByteSize, py::arg("text"),
        "Bytes from '64GiB', '200GB', '12345' ... (ValueError naming the text otherwise).");

  m.def(
      "rates_for",
      [](const py::list& tensors, const tandem::OptimizerConfig& cfg) {
        return tandem::python::RatesTo(tandem::RatesFor(tandem::SpecsFromList(tensors), cfg));
      },
      py::arg("tensors"), py::arg("config"),
      "The rates offload_compute 'auto' decides with for an optimizer built from tensors and "
      "config (tandem::RatesFor): config.machine_rates, else the rate cache's entry for its "
      "setting (measured by a construction of that setting), else None. The setting depends "
      "on the offload fraction: to predict other fractions with the rates of one, pass "
      "these as machine_rates.");
  m.def(
      "predict_memory",
      [](const py::list& tensors, const tandem::OptimizerConfig& cfg) {
        const std::vector<tandem::TensorSpec> specs = tandem::SpecsFromList(tensors);
        tandem::ExecutionMode mode = cfg.mode;
        if (mode == tandem::ExecutionMode::kAuto)
          mode = tandem::CudaDeviceAvailable() ? tandem::ExecutionMode::kGpu
                                               : tandem::ExecutionMode::kHost;
        tandem::MemoryReport r;
        {
          py::gil_scoped_release release;
          r = tandem::PredictMemory(specs, cfg, mode);
        }
        return tandem::MemoryToDict(r);
      },
      py::arg("tensors"), py::arg("config"),
      "The memory() of a HybridOptimizer(tensors, config), computed without building it or "
      "allocating anything (tandem::PredictMemory; the pointers in the specs are not read). "
      "offload_compute 'auto' in GPU mode needs machine_rates or the rates a construction "
      "of the same setting measured (ValueError otherwise).");

  py::class_<tandem::OptimizerSnapshot, std::shared_ptr<tandem::OptimizerSnapshot>>(
      m, "HeldSnapshot",
      "An engine's state as a C++ snapshot, opaque to Python (HybridOptimizer.snapshot_held; "
      "restore_held takes it back): placement-independent, as snapshot()'s dict is.");
  py::class_<PyOptimizer>(m, "HybridOptimizer")
      .def(py::init<const py::list&, tandem::OptimizerConfig>(), py::arg("tensors"),
           py::arg("config"),
           "tensors: list of (name, numel, param_dtype, grad_dtype, param_ptr, grad_ptr, "
           "group[, shape[, formats[, norm_unit]]]); shape: dims or None; formats: None or a "
           "dict {'master', 'momentum', 'variance'} of format names overriding this tensor's "
           "state formats. config: an OptimizerConfig. The buffers must outlive the "
           "optimizer.")
      .def(py::init([](const py::list& tensors, const std::string& algorithm,
                       const py::list& groups, const py::kwargs& options) {
             tandem::OptimizerConfig cfg;
             py::dict fields;
             fields["algorithm"] = algorithm;
             fields["groups"] = groups;
             tandem::python::SetConfigFields(cfg, py::kwargs(fields));
             tandem::python::SetConfigFields(cfg, options);
             return new PyOptimizer(tensors, std::move(cfg));
           }),
           py::arg("tensors"), py::arg("algorithm"), py::arg("groups"),
           "HybridOptimizer(tensors, algorithm, groups, **fields): the same with an "
           "OptimizerConfig(algorithm=..., groups=..., **fields).")
      .def(
          "step",
          [](PyOptimizer& o, const py::object& lr, const py::object& options,
             const py::kwargs& fields) {
            return o.Step(lr, tandem::python::StepOptionsFrom(options, fields));
          },
          py::arg("lr"), py::arg("options") = py::none(),
          "step(lr, options=None, **fields): lr a number (every group steps with lr * its "
          "lr_scale) or a list of one lr per group (each group steps with its own; lr_scale "
          "is not applied); options a StepOptions (None: the defaults), fields set on a copy "
          "of it: max_grad_norm, loss_scale, active (None: every tensor, or bytes/list of "
          "0/1 per tensor), combine (None or a callable (digits, nonfinite) -> (digits, "
          "nonfinite) giving the whole model's gradient statistics: sharded training), "
          "groups (None or one dict of HyperParams fields per group, for this step and on), "
          "grads (None or one gradient pointer per tensor; 0 or None: grad_ready's or the "
          "construction's). Returns (applied, grad_norm, step, stepped_tensors).")
      .def("reload_params", &PyOptimizer::ReloadParams, py::arg("indices"),
           "Re-derives the masters of the given tensors from their parameters.")
      .def("tensor_step_counts", &PyOptimizer::TensorStepCounts,
           "Each tensor's own step count (updates it has received).")
      .def(
          "begin_step",
          [](PyOptimizer& o, const py::object& lr, const py::object& options,
             const py::kwargs& fields) {
            o.BeginStep(lr, tandem::python::StepOptionsFrom(options, fields));
          },
          py::arg("lr"), py::arg("options") = py::none(),
          "Announces the next step before backward (speculative early start); lr, "
          "max_grad_norm, loss_scale and groups as for step, which must hand the same.")
      .def_property_readonly("step_begun", &PyOptimizer::step_begun)
      .def("grad_ready", &PyOptimizer::GradReady, py::arg("index"), py::arg("grad") = 0,
           py::arg("ready_stream") = 0,
           "Tensor `index`'s gradient is final (early start, gradient release); grad: the "
           "pointer this step reads for it (0: the step's grads entry, else the "
           "construction's); ready_stream: the CUDA stream on which it is final (0: the "
           "engine's cuda_stream).")
      .def("wait_grad_consumed", &PyOptimizer::WaitGradConsumed, py::arg("index"),
           py::arg("stream") = 0,
           "Makes `stream` wait until the engine no longer reads tensor `index`'s gradient "
           "(after step(); with release_grads also between grad_ready and step).")
      .def("grad_consumed", &PyOptimizer::GradConsumed, py::arg("index"),
           "With release_grads: whether everything the engine reads of tensor `index`'s "
           "gradient since grad_ready has completed, so its memory may be reused (never "
           "blocks).")
      .def("discard_step", &PyOptimizer::DiscardStep,
           "Ends the step under way (begin_step, grad_ready since the last step) without "
           "applying it: speculated chunks rolled back, handed gradients forgotten.")
      .def("wait_param", &PyOptimizer::WaitParam, py::arg("index"), py::arg("stream") = 0)
      .def("set_groups", &PyOptimizer::SetGroups, py::arg("groups"))
#if TANDEM_PY_HAS_CHECKPOINT
      .def("save_checkpoint", &PyOptimizer::SaveCheckpointFile, py::arg("path"),
           py::arg("compression") = "none", py::arg("sync") = true,
           py::arg("metadata") = py::str(""))
      .def("load_checkpoint", &PyOptimizer::LoadCheckpointFile, py::arg("path"),
           py::arg("groups_for"),
           "groups_for(metadata) -> None (the file's groups) or a list of group dicts; "
           "may raise to refuse the file. Returns the file's metadata.")
#endif
      .def("snapshot", &PyOptimizer::Snapshot)
      .def("restore", &PyOptimizer::Restore, py::arg("snapshot"))
      .def("snapshot_held", &PyOptimizer::SnapshotHeld,
           "snapshot() without the conversion to Python: a HeldSnapshot")
      .def("restore_held", &PyOptimizer::RestoreHeld, py::arg("snapshot"),
           "restore() of a HeldSnapshot")
      .def_property_readonly("mode", &PyOptimizer::mode)
      .def("placement", &PyOptimizer::placement)
      .def("memory", &PyOptimizer::memory)
      .def("last_step_times", &PyOptimizer::last_step_times)
      .def("compute_split", &PyOptimizer::compute_split,
           "The share of host-resident elements computed on the GPU and the modelled step "
           "(zeros without rates).")
      .def_property_readonly("step_count", &PyOptimizer::step_count)
      .def_property_readonly("tensor_count", &PyOptimizer::tensor_count);
}
