// tandem._C.OptimizerConfig and tandem._C.StepOptions (python/ext/config.h).
//
// Each option is one row of Fields(): its name, its getter and its checked setter. The
// class's keyword constructor, its properties and its repr all come from that table, and
// every default is the C++ struct's own (a default-constructed OptimizerConfig), so an
// option is declared once: here, over include/tandem/optimizer.h.
#include "python/ext/config.h"

#include <pybind11/stl.h>

#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <set>
#include <string>
#include <vector>

#include "python/ext/device_allocator.h"
#include "tandem/compute_split.h"
#include "tandem/error.h"
#include "tandem/placement.h"
#include "tandem/types.h"

namespace py = pybind11;

namespace tandem::python {

HyperParams HyperParamsFromDict(const py::dict& d) {
  HyperParams h;
  for (auto item : d) {
    const std::string key = py::str(item.first);
    const py::handle v = item.second;
    if (key == "lr_scale")
      h.lr_scale = v.cast<double>();
    else if (key == "beta1")
      h.beta1 = v.cast<double>();
    else if (key == "beta2")
      h.beta2 = v.cast<double>();
    else if (key == "eps")
      h.eps = v.cast<double>();
    else if (key == "weight_decay")
      h.weight_decay = v.cast<double>();
    else if (key == "momentum")
      h.momentum = v.cast<double>();
    else if (key == "dampening")
      h.dampening = v.cast<double>();
    else if (key == "nesterov")
      h.nesterov = v.cast<bool>();
    else
      throw Error(ErrorKind::kInvalidArgument, "unknown hyper-parameter '" + key + "'");
  }
  return h;
}

py::dict HyperParamsToDict(const HyperParams& h) {
  py::dict d;
  d["lr_scale"] = h.lr_scale;
  d["beta1"] = h.beta1;
  d["beta2"] = h.beta2;
  d["eps"] = h.eps;
  d["weight_decay"] = h.weight_decay;
  d["momentum"] = h.momentum;
  d["dampening"] = h.dampening;
  d["nesterov"] = h.nesterov;
  return d;
}

const char* ModeName(ExecutionMode m) {
  switch (m) {
    case ExecutionMode::kGpu:
      return "gpu";
    case ExecutionMode::kHost:
      return "host";
    default:
      return "auto";
  }
}

namespace {

std::string Repr(py::handle v) { return py::repr(v).cast<std::string>(); }

[[noreturn]] void Refuse(const std::string& field, const std::string& rule, py::handle v) {
  throw Error(ErrorKind::kInvalidArgument, field + " must be " + rule + ", got " + Repr(v));
}

// isinstance(v, numbers.<abc>), a bool never counting as a number.
bool IsNumber(py::handle v, const char* abc) {
  if (PyBool_Check(v.ptr())) return false;
  return py::isinstance(v, py::module_::import("numbers").attr(abc));
}

int64_t Integer(const std::string& field, py::handle v, int64_t lo, int64_t hi,
                const std::string& rule) {
  if (!IsNumber(v, "Integral")) Refuse(field, rule, v);
  long long x = 0;
  try {
    x = py::int_(py::reinterpret_borrow<py::object>(v)).cast<long long>();
  } catch (const py::cast_error&) {
    Refuse(field, rule, v);
  }
  if (x < lo || x > hi) Refuse(field, rule, v);
  return x;
}

double Real(const std::string& field, py::handle v, double lo, double hi, const std::string& rule) {
  if (!IsNumber(v, "Real")) Refuse(field, rule, v);
  const double x = py::float_(py::reinterpret_borrow<py::object>(v)).cast<double>();
  if (!(x >= lo && x <= hi)) Refuse(field, rule, v);  // NaN fails both
  return x;
}

std::string Text(const std::string& field, py::handle v, const std::string& rule) {
  if (!py::isinstance<py::str>(v)) Refuse(field, rule, v);
  return v.cast<std::string>();
}

constexpr int64_t kMaxInt64 = std::numeric_limits<int64_t>::max();
constexpr const char* kRateKeys[] = {"h2d_gbps", "d2h_gbps", "host_gparams", "gpu_gparams"};

std::optional<MachineRates> RatesFrom(py::handle v) {
  if (v.is_none()) return std::nullopt;
  const std::string rule =
      "None or a dict with exactly the keys h2d_gbps, d2h_gbps, host_gparams, gpu_gparams";
  if (!py::isinstance<py::dict>(v) || py::len(v) != 4) Refuse("machine_rates", rule, v);
  const py::dict d = py::reinterpret_borrow<py::dict>(v);
  double values[4];
  for (int i = 0; i < 4; ++i) {
    if (!d.contains(kRateKeys[i])) Refuse("machine_rates", rule, v);
    const py::handle x = d[kRateKeys[i]];
    values[i] = Real(std::string("machine_rates['") + kRateKeys[i] + "']", x, 0.0,
                     std::numeric_limits<double>::max(), "finite and > 0");
    if (values[i] <= 0)
      Refuse(std::string("machine_rates['") + kRateKeys[i] + "']", "finite and > 0", x);
  }
  MachineRates r;
  r.h2d_gbps = values[0];
  r.d2h_gbps = values[1];
  r.host_gparams = values[2];
  r.gpu_gparams = values[3];
  return r;
}

}  // namespace

py::object RatesTo(const std::optional<MachineRates>& r) {
  if (!r) return py::none();
  py::dict d;
  d["h2d_gbps"] = r->h2d_gbps;
  d["d2h_gbps"] = r->d2h_gbps;
  d["host_gparams"] = r->host_gparams;
  d["gpu_gparams"] = r->gpu_gparams;
  return d;
}

namespace {

double OffloadComputeFrom(py::handle v) {
  const std::string rule = "\"auto\", \"host\", \"gpu\" or a share in [0, 1]";
  if (py::isinstance<py::str>(v)) {
    try {
      return ParseOffloadCompute(v.cast<std::string>());
    } catch (const Error&) {
      Refuse("offload_compute", rule, v);
    }
  }
  return Real("offload_compute", v, 0.0, 1.0, rule);
}

struct Field {
  const char* name;
  const char* doc;
  std::function<py::object(const OptimizerConfig&)> get;
  std::function<void(OptimizerConfig&, py::handle)> set;
};

const std::vector<Field>& Fields() {
  static const std::vector<Field> fields = {
      {"algorithm", "\"adamw\", \"adam\", \"lion\" or \"sgd\"",
       [](const OptimizerConfig& c) { return py::str(Name(c.algorithm)); },
       [](OptimizerConfig& c, py::handle v) {
         c.algorithm = ParseAlgorithm(Text("algorithm", v, "an algorithm name (a str)"));
       }},
      {"groups", "per-group hyper-parameters: a non-empty list of dicts of HyperParams fields",
       [](const OptimizerConfig& c) {
         py::list out;
         for (const HyperParams& h : c.groups) out.append(HyperParamsToDict(h));
         return py::object(std::move(out));
       },
       [](OptimizerConfig& c, py::handle v) {
         const std::string rule = "a non-empty list of dicts of hyper-parameters";
         if (!py::isinstance<py::list>(v) && !py::isinstance<py::tuple>(v))
           Refuse("groups", rule, v);
         std::vector<HyperParams> groups;
         for (auto g : py::reinterpret_borrow<py::sequence>(v)) {
           if (!py::isinstance<py::dict>(g)) Refuse("groups", rule, v);
           groups.push_back(HyperParamsFromDict(py::reinterpret_borrow<py::dict>(g)));
         }
         if (groups.empty()) Refuse("groups", rule, v);
         c.groups = std::move(groups);
       }},
      {"master", "master weight format: f32, bf16, bf16+ecc8, bf16+ecc16",
       [](const OptimizerConfig& c) { return py::str(Name(c.formats.master)); },
       [](OptimizerConfig& c, py::handle v) {
         c.formats.master = ParseMasterFormat(Text("master", v, "a format name (a str)"));
       }},
      {"momentum", "first moment format: f32 or q8",
       [](const OptimizerConfig& c) { return py::str(Name(c.formats.momentum)); },
       [](OptimizerConfig& c, py::handle v) {
         c.formats.momentum = ParseMomentFormat(Text("momentum", v, "a format name (a str)"));
       }},
      {"variance", "second moment format: f32 or q8",
       [](const OptimizerConfig& c) { return py::str(Name(c.formats.variance)); },
       [](OptimizerConfig& c, py::handle v) {
         c.formats.variance = ParseMomentFormat(Text("variance", v, "a format name (a str)"));
       }},
      {"offload_fraction", "fraction of the elements whose state lives in host memory",
       [](const OptimizerConfig& c) { return py::float_(c.offload_fraction); },
       [](OptimizerConfig& c, py::handle v) {
         c.offload_fraction = Real("offload_fraction", v, 0.0, 1.0, "a number in [0, 1]");
       }},
      {"placement", "backward_order, forward_order or largest_first",
       [](const OptimizerConfig& c) { return py::str(Name(c.placement)); },
       [](OptimizerConfig& c, py::handle v) {
         c.placement = ParsePlacementPolicy(Text("placement", v, "a policy name (a str)"));
       }},
      {"mode", "\"auto\", \"gpu\" or \"host\"",
       [](const OptimizerConfig& c) { return py::str(ModeName(c.mode)); },
       [](OptimizerConfig& c, py::handle v) {
         const std::string s = Text("mode", v, "\"auto\", \"gpu\" or \"host\"");
         if (s == "auto")
           c.mode = ExecutionMode::kAuto;
         else if (s == "gpu")
           c.mode = ExecutionMode::kGpu;
         else if (s == "host")
           c.mode = ExecutionMode::kHost;
         else
           Refuse("mode", "\"auto\", \"gpu\" or \"host\"", v);
       }},
      {"host_threads", "host kernel threads, 0 (all cores) up to max_host_threads()",
       [](const OptimizerConfig& c) { return py::int_(c.host_threads); },
       [](OptimizerConfig& c, py::handle v) {
         const int limit = MaxHostThreads();
         c.host_threads = static_cast<int>(
             Integer("host_threads", v, 0, limit,
                     "an integer in [0, " + std::to_string(limit) + "] (0: all cores)"));
       }},
      {"host_cpus", "CPU ids the host threads run on ([]: anywhere)",
       [](const OptimizerConfig& c) { return py::object(py::cast(c.host_cpus)); },
       [](OptimizerConfig& c, py::handle v) {
         const std::string rule = "a list of CPU ids (integers >= 0, each once)";
         if (!py::isinstance<py::list>(v) && !py::isinstance<py::tuple>(v))
           Refuse("host_cpus", rule, v);
         std::vector<int> cpus;
         std::set<int> seen;
         for (auto x : py::reinterpret_borrow<py::sequence>(v)) {
           const int cpu = static_cast<int>(Integer("host_cpus", x, 0, 1 << 20, rule));
           if (!seen.insert(cpu).second) Refuse("host_cpus", rule, v);
           cpus.push_back(cpu);
         }
         c.host_cpus = std::move(cpus);
       }},
      {"pinned_budget_bytes", "the most host bytes the state may take (0: no limit)",
       [](const OptimizerConfig& c) { return py::int_(c.pinned_budget_bytes); },
       [](OptimizerConfig& c, py::handle v) {
         c.pinned_budget_bytes = static_cast<uint64_t>(Integer(
             "pinned_budget_bytes", v, 0, kMaxInt64, "an integer >= 0 (bytes; 0: no limit)"));
       }},
      {"chunk_elements", "offload pipeline chunk, a positive multiple of 32",
       [](const OptimizerConfig& c) { return py::int_(c.chunk_elements); },
       [](OptimizerConfig& c, py::handle v) {
         const std::string rule = "a positive multiple of 32";
         const int64_t n = Integer("chunk_elements", v, 1, kMaxInt64, rule);
         if (n % kQuantGroup != 0) Refuse("chunk_elements", rule, v);
         c.chunk_elements = static_cast<uint64_t>(n);
       }},
      {"pipeline_slots", "pinned gradient slots in flight, >= 2",
       [](const OptimizerConfig& c) { return py::int_(c.pipeline_slots); },
       [](OptimizerConfig& c, py::handle v) {
         c.pipeline_slots =
             static_cast<int>(Integer("pipeline_slots", v, 2, 1 << 20, "an integer >= 2"));
       }},
      {"offload_compute",
       "where host-resident elements are computed: \"auto\", \"host\", \"gpu\" or a share",
       [](const OptimizerConfig& c) {
         return c.offload_compute == kOffloadComputeAuto
                    ? py::object(py::str("auto"))
                    : py::object(py::float_(c.offload_compute));
       },
       [](OptimizerConfig& c, py::handle v) { c.offload_compute = OffloadComputeFrom(v); }},
      {"machine_rates", "None or {h2d_gbps, d2h_gbps, host_gparams, gpu_gparams} for auto",
       [](const OptimizerConfig& c) { return RatesTo(c.machine_rates); },
       [](OptimizerConfig& c, py::handle v) { c.machine_rates = RatesFrom(v); }},
      {"stream_chunk_bytes", "the most bytes of streamed state one chunk moves, >= 4096",
       [](const OptimizerConfig& c) { return py::int_(c.stream_chunk_bytes); },
       [](OptimizerConfig& c, py::handle v) {
         c.stream_chunk_bytes = static_cast<uint64_t>(
             Integer("stream_chunk_bytes", v, 4096, kMaxInt64, "an integer >= 4096"));
       }},
      {"stream_slots", "device slots streamed chunks rotate through, >= 2",
       [](const OptimizerConfig& c) { return py::int_(c.stream_slots); },
       [](OptimizerConfig& c, py::handle v) {
         c.stream_slots =
             static_cast<int>(Integer("stream_slots", v, 2, 1 << 20, "an integer >= 2"));
       }},
      {"cuda_stream", "the CUDA stream handle the engine runs on (0: the legacy default)",
       [](const OptimizerConfig& c) {
         return py::int_(static_cast<uint64_t>(reinterpret_cast<uintptr_t>(c.cuda_stream)));
       },
       [](OptimizerConfig& c, py::handle v) {
         const auto handle = static_cast<uintptr_t>(
             Integer("cuda_stream", v, 0, kMaxInt64, "a CUDA stream handle (an integer >= 0)"));
         c.cuda_stream = reinterpret_cast<void*>(handle);
       }},
      {"speculative_early_start", "allocate what begin_step needs (speculative early start)",
       [](const OptimizerConfig& c) { return py::bool_(c.speculative_early_start); },
       [](OptimizerConfig& c, py::handle v) {
         if (!PyBool_Check(v.ptr())) Refuse("speculative_early_start", "a bool", v);
         c.speculative_early_start = v.cast<bool>();
       }},
      {"speculative_stream_bytes", "the most streamed state speculated on the GPU, >= 0",
       [](const OptimizerConfig& c) { return py::int_(c.speculative_stream_bytes); },
       [](OptimizerConfig& c, py::handle v) {
         c.speculative_stream_bytes = static_cast<uint64_t>(
             Integer("speculative_stream_bytes", v, 0, kMaxInt64, "an integer >= 0"));
       }},
      {"speculative_host_bytes",
       "the most host-computed state speculated (backed up) on the host, >= 0; 0: all of it",
       [](const OptimizerConfig& c) { return py::int_(c.speculative_host_bytes); },
       [](OptimizerConfig& c, py::handle v) {
         c.speculative_host_bytes = static_cast<uint64_t>(
             Integer("speculative_host_bytes", v, 0, kMaxInt64, "an integer >= 0"));
       }},
      {"in_place_grad_bytes",
       "with release_grads and speculation: the most handed-over gradient bytes kept on the "
       "GPU for speculative kernels to read in place, >= 0",
       [](const OptimizerConfig& c) { return py::int_(c.in_place_grad_bytes); },
       [](OptimizerConfig& c, py::handle v) {
         c.in_place_grad_bytes = static_cast<uint64_t>(
             Integer("in_place_grad_bytes", v, 0, kMaxInt64, "an integer >= 0"));
       }},
      {"device_allocator",
       "None (cudaMalloc) or a DeviceAllocator the engine's device memory comes from",
       [](const OptimizerConfig& c) {
         const auto mine = std::dynamic_pointer_cast<PyDeviceAllocator>(c.device_allocator);
         return mine ? py::cast(mine) : py::none();
       },
       [](OptimizerConfig& c, py::handle v) {
         if (v.is_none()) {
           c.device_allocator = nullptr;
           return;
         }
         if (!py::isinstance<PyDeviceAllocator>(v))
           Refuse("device_allocator", "None or a tandem._C.DeviceAllocator", v);
         c.device_allocator = v.cast<std::shared_ptr<PyDeviceAllocator>>();
       }},
      {"release_grads",
       "gradient release: grad_ready takes what the engine needs of a gradient, whose "
       "memory may be reused once grad_consumed says so",
       [](const OptimizerConfig& c) { return py::bool_(c.release_grads); },
       [](OptimizerConfig& c, py::handle v) {
         if (!PyBool_Check(v.ptr())) Refuse("release_grads", "a bool", v);
         c.release_grads = v.cast<bool>();
       }},
  };
  return fields;
}

const Field* FindField(const std::string& name) {
  for (const Field& f : Fields())
    if (name == f.name) return &f;
  return nullptr;
}

std::string ConfigRepr(const OptimizerConfig& c) {
  std::string out = "OptimizerConfig(";
  bool first = true;
  for (const Field& f : Fields()) {
    if (!first) out += ", ";
    first = false;
    out += std::string(f.name) + "=" + Repr(f.get(c));
  }
  return out + ")";
}

void SetStepField(PyStepOptions& o, const std::string& name, py::handle v) {
  if (name == "max_grad_norm") {
    o.max_grad_norm =
        Real("max_grad_norm", v, 0.0, std::numeric_limits<double>::max(), "finite and >= 0");
  } else if (name == "loss_scale") {
    const double x =
        Real("loss_scale", v, 0.0, std::numeric_limits<double>::max(), "finite and > 0");
    if (x <= 0) Refuse("loss_scale", "finite and > 0", v);
    o.loss_scale = x;
  } else if (name == "active") {
    o.active = py::reinterpret_borrow<py::object>(v);
  } else if (name == "combine") {
    if (!v.is_none() && !PyCallable_Check(v.ptr())) Refuse("combine", "None or a callable", v);
    o.combine = py::reinterpret_borrow<py::object>(v);
  } else if (name == "groups" || name == "grads") {
    if (!v.is_none() && !py::isinstance<py::list>(v) && !py::isinstance<py::tuple>(v))
      Refuse(name,
             "None or a list (one entry per " + std::string(name == "groups" ? "group" : "tensor") +
                 ")",
             v);
    (name == "groups" ? o.groups : o.grads) = py::reinterpret_borrow<py::object>(v);
  } else {
    throw py::type_error("StepOptions got an unexpected keyword argument '" + name + "'");
  }
}

}  // namespace

void SetConfigFields(OptimizerConfig& cfg, const py::kwargs& kwargs) {
  for (auto item : kwargs) {
    const std::string name = py::str(item.first);
    const Field* f = FindField(name);
    if (f == nullptr)
      throw py::type_error("OptimizerConfig got an unexpected keyword argument '" + name + "'");
    f->set(cfg, item.second);
  }
}

PyStepOptions StepOptionsFrom(const py::object& options, const py::kwargs& kwargs) {
  PyStepOptions o = options.is_none() ? PyStepOptions() : options.cast<PyStepOptions>();
  for (auto item : kwargs) SetStepField(o, py::str(item.first), item.second);
  return o;
}

void BindConfig(py::module_& m) {
  py::class_<OptimizerConfig> config(
      m, "OptimizerConfig",
      "The engine's options (tandem::OptimizerConfig): OptimizerConfig(**fields), every "
      "field keeping the C++ default unless given, each checked when set "
      "(InvalidArgumentError, a ValueError, naming it). fields() lists them with their "
      "meaning.");
  config.def(py::init([](const py::kwargs& kwargs) {
    OptimizerConfig cfg;
    SetConfigFields(cfg, kwargs);
    return cfg;
  }));
  for (const Field& f : Fields()) {
    const Field* field = &f;
    config.def_property(
        f.name, [field](const OptimizerConfig& c) { return field->get(c); },
        [field](OptimizerConfig& c, const py::object& v) { field->set(c, v); }, f.doc);
  }
  config.def_static(
      "fields",
      [] {
        py::dict out;
        for (const Field& f : Fields()) out[f.name] = f.doc;
        return out;
      },
      "{field name: meaning} of every option, in declaration order.");
  config.def("__repr__", &ConfigRepr);
  config.def("__copy__", [](const OptimizerConfig& c) { return OptimizerConfig(c); });

  py::class_<PyStepOptions>(
      m, "StepOptions",
      "One step's options (tandem::StepOptions): max_grad_norm (> 0 clips the global "
      "gradient norm; default 0: off), loss_scale (gradients are divided by it; default 1), "
      "active (None: every tensor, or bytes/list of 0/1 per tensor), combine (None or "
      "the gradient-statistics callable of sharded training), groups (None or each group's "
      "hyper-parameters for this step, dicts of HyperParams fields) and grads (None or each "
      "tensor's gradient pointer for this step); checked when set.")
      .def(py::init([](const py::kwargs& kwargs) {
        PyStepOptions o;
        for (auto item : kwargs) SetStepField(o, py::str(item.first), item.second);
        return o;
      }))
      .def_property(
          "max_grad_norm", [](const PyStepOptions& o) { return o.max_grad_norm; },
          [](PyStepOptions& o, const py::object& v) { SetStepField(o, "max_grad_norm", v); })
      .def_property(
          "loss_scale", [](const PyStepOptions& o) { return o.loss_scale; },
          [](PyStepOptions& o, const py::object& v) { SetStepField(o, "loss_scale", v); })
      .def_property(
          "active", [](const PyStepOptions& o) { return o.active; },
          [](PyStepOptions& o, const py::object& v) { SetStepField(o, "active", v); })
      .def_property(
          "combine", [](const PyStepOptions& o) { return o.combine; },
          [](PyStepOptions& o, const py::object& v) { SetStepField(o, "combine", v); })
      .def_property(
          "groups", [](const PyStepOptions& o) { return o.groups; },
          [](PyStepOptions& o, const py::object& v) { SetStepField(o, "groups", v); })
      .def_property(
          "grads", [](const PyStepOptions& o) { return o.grads; },
          [](PyStepOptions& o, const py::object& v) { SetStepField(o, "grads", v); })
      .def("__repr__", [](const PyStepOptions& o) {
        return "StepOptions(max_grad_norm=" + Repr(py::float_(o.max_grad_norm)) +
               ", loss_scale=" + Repr(py::float_(o.loss_scale)) + ")";
      });
}

}  // namespace tandem::python
