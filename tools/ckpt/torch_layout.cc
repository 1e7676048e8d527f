#include "tools/ckpt/torch_layout.h"

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <set>
#include <span>
#include <vector>

#include "checkpoint/safetensors.h"
#include "tandem/error.h"

namespace tandem::tool {
namespace {

using nlohmann::json;

constexpr const char* kExpAvg = ".exp_avg";
constexpr const char* kExpAvgSq = ".exp_avg_sq";
constexpr const char* kMomentumBuffer = ".momentum_buffer";

[[noreturn]] void Invalid(const std::string& path, const std::string& what) {
  throw Error(ErrorKind::kInvalidArgument, "torch state '" + path + "': " + what);
}

// The state tensors `algo` keeps for a parameter of group h, as name suffixes, with the
// snapshot array each one is.
struct StateTensor {
  const char* suffix;
  bool variance;  // v_f32, else m_f32
};
std::vector<StateTensor> StateOf(Algorithm algo, const HyperParams& h) {
  switch (algo) {
    case Algorithm::kAdamW:
    case Algorithm::kAdam:
      return {{kExpAvg, false}, {kExpAvgSq, true}};
    case Algorithm::kLion:
      return {{kExpAvg, false}};
    case Algorithm::kSGD:
      if (HasMomentum(algo, h)) return {{kMomentumBuffer, false}};
      return {};
  }
  return {};
}

std::vector<uint64_t> ShapeOf(const TensorSnapshot& t) {
  return t.shape.empty() ? std::vector<uint64_t>{t.numel} : t.shape;
}

json HyperJson(const HyperParams& h) {
  return {{"lr_scale", h.lr_scale},
          {"beta1", h.beta1},
          {"beta2", h.beta2},
          {"eps", h.eps},
          {"weight_decay", h.weight_decay},
          {"momentum", h.momentum},
          {"dampening", h.dampening},
          {"nesterov", h.nesterov}};
}

// Fields present override `base`.
HyperParams HyperFromJson(const json& o, HyperParams h, const std::string& path,
                          const std::string& ctx) {
  if (!o.is_object()) Invalid(path, ctx + " is not a JSON object");
  for (const auto& [key, v] : o.items()) {
    double* field = key == "lr_scale"       ? &h.lr_scale
                    : key == "beta1"        ? &h.beta1
                    : key == "beta2"        ? &h.beta2
                    : key == "eps"          ? &h.eps
                    : key == "weight_decay" ? &h.weight_decay
                    : key == "momentum"     ? &h.momentum
                    : key == "dampening"    ? &h.dampening
                                            : nullptr;
    if (key == "nesterov") {
      if (!v.is_boolean()) Invalid(path, ctx + ".nesterov is not a boolean");
      h.nesterov = v.get<bool>();
    } else if (field != nullptr) {
      if (!v.is_number()) Invalid(path, ctx + "." + key + " is not a number");
      *field = v.get<double>();
    } else {
      Invalid(path, ctx + " has an unknown field '" + key + "'");
    }
  }
  return h;
}

// Parses metadata value `key` as JSON, or returns a discarded value if absent.
json MetaJson(const std::map<std::string, std::string>& meta, const char* key,
              const std::string& path) {
  auto it = meta.find(key);
  if (it == meta.end()) return json(json::value_t::discarded);
  json j = json::parse(it->second, nullptr, false);
  if (j.is_discarded()) Invalid(path, std::string("__metadata__ ") + key + " is not valid JSON");
  return j;
}

// A JSON list of one entry per parameter.
const json& PerParam(const json& j, const char* key, size_t n, const std::string& path) {
  if (!j.is_array() || j.size() != n)
    Invalid(path, std::string("__metadata__ ") + key + " is not a JSON list of " +
                      std::to_string(n) + " entries (one per parameter)");
  return j;
}

int64_t ParseStep(const std::string& text, const std::string& path, const std::string& ctx) {
  size_t used = 0;
  long long v = 0;
  try {
    v = std::stoll(text, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used == 0 || used != text.size()) Invalid(path, ctx + " '" + text + "' is not an integer");
  return v;
}

}  // namespace

void WriteTorchState(const OptimizerSnapshot& snapshot, const std::string& path) {
  const StateFormats f32{};
  // Every tensor to fp32, those with formats of their own too.
  const OptimizerSnapshot s = ConvertSnapshot(snapshot, f32, ConvertTensors::kAll);
  // Names: every parameter and its state tensors, none twice.
  std::vector<ckpt::SafetensorsTensor> tensors;
  std::set<std::string> names;
  auto add = [&](std::string name, const TensorSnapshot& t, const std::vector<float>& v) {
    if (name == "__metadata__" || !names.insert(name).second)
      Invalid(path, "tensor name '" + name +
                        "' is reserved or used twice (a parameter named "
                        "like another parameter's state)");
    tensors.push_back({std::move(name), ShapeOf(t), t.numel,
                       [&v](std::vector<float>*) { return std::span<const float>(v); }});
  };
  json steps = json::array(), tgroups = json::array(), groups = json::array(),
       tnames = json::array(), pdt = json::array(), gdt = json::array();
  for (const TensorSnapshot& t : s.tensors) {
    add(t.name, t, t.master_f32);
    for (const StateTensor& st : StateOf(s.algo, s.groups[t.group]))
      add(t.name + st.suffix, t, st.variance ? t.v_f32 : t.m_f32);
    steps.push_back(t.step);
    tgroups.push_back(t.group);
    tnames.push_back(t.name);
    pdt.push_back(Name(t.param_dtype));
    gdt.push_back(Name(t.grad_dtype));
  }
  for (const HyperParams& h : s.groups) groups.push_back(HyperJson(h));

  std::string header;
  try {
    header = ckpt::SafetensorsF32Header({{"format", "pt"},
                                         {"tandem_algorithm", Name(s.algo)},
                                         {"tandem_step", std::to_string(s.step)},
                                         {"tandem_names", tnames.dump()},
                                         {"tandem_tensor_steps", steps.dump()},
                                         {"tandem_tensor_groups", tgroups.dump()},
                                         {"tandem_groups", groups.dump()},
                                         {"tandem_param_dtypes", pdt.dump()},
                                         {"tandem_grad_dtypes", gdt.dump()},
                                         {"tandem_formats", Name(snapshot.formats)},
                                         {"tandem_metadata", s.metadata}},
                                        tensors);
  } catch (const json::exception& e) {
    Invalid(path, std::string("a name or the metadata is not valid UTF-8: ") + e.what());
  }
  ckpt::WriteSafetensorsFile(header, tensors, path, Env::Default());
}

OptimizerSnapshot ReadTorchState(const std::string& path, const TorchDefaults& d) {
  std::map<std::string, std::vector<float>> values = ImportSafetensorsMasters(path);
  const ckpt::SafetensorsHeader hdr =
      ckpt::ReadSafetensorsHeader(*Env::Default()->NewRandomAccessFile(path), path);
  const auto& meta = hdr.metadata;
  OptimizerSnapshot s;

  // Algorithm: the file's, which --algorithm may repeat but not contradict.
  auto alg = meta.find("tandem_algorithm");
  if (alg != meta.end()) {
    try {
      s.algo = ParseAlgorithm(alg->second);
    } catch (const Error&) {
      Invalid(path, "__metadata__ tandem_algorithm '" + alg->second + "' is not an algorithm");
    }
    if (d.algorithm && *d.algorithm != s.algo)
      Invalid(path, std::string("--algorithm ") + Name(*d.algorithm) + " contradicts the file's " +
                        Name(s.algo));
  } else if (d.algorithm) {
    s.algo = *d.algorithm;
  } else {
    Invalid(path, "no tandem_algorithm in __metadata__: give --algorithm");
  }

  // Parameters: tandem_names, else every tensor that is not another one's state, in the
  // order of their data.
  std::vector<std::string> params;
  const json names = MetaJson(meta, "tandem_names", path);
  if (!names.is_discarded()) {
    if (!names.is_array()) Invalid(path, "__metadata__ tandem_names is not a JSON list");
    for (const json& n : names) {
      if (!n.is_string()) Invalid(path, "__metadata__ tandem_names holds a non-string");
      params.push_back(n.get<std::string>());
    }
  } else {
    auto is_state = [&](const std::string& k) {
      for (const char* suf : {kExpAvg, kExpAvgSq, kMomentumBuffer}) {
        const size_t n = std::strlen(suf);
        if (k.size() > n && k.compare(k.size() - n, n, suf) == 0 &&
            hdr.tensors.count(k.substr(0, k.size() - n)))
          return true;
      }
      return false;
    };
    for (const auto& [k, e] : hdr.tensors)
      if (!is_state(k)) params.push_back(k);
    std::sort(params.begin(), params.end(), [&](const std::string& a, const std::string& b) {
      return hdr.tensors.at(a).begin < hdr.tensors.at(b).begin;
    });
  }
  const size_t n = params.size();

  const json groups = MetaJson(meta, "tandem_groups", path);
  if (groups.is_discarded()) {
    s.groups = {d.hyper};
  } else {
    if (!groups.is_array() || groups.empty())
      Invalid(path, "__metadata__ tandem_groups is not a non-empty JSON list");
    for (size_t g = 0; g < groups.size(); ++g)
      s.groups.push_back(
          HyperFromJson(groups[g], d.hyper, path, "tandem_groups[" + std::to_string(g) + "]"));
  }
  auto st = meta.find("tandem_step");
  s.step = st == meta.end() ? 0 : ParseStep(st->second, path, "__metadata__ tandem_step");
  auto md = meta.find("tandem_metadata");
  if (md != meta.end()) s.metadata = md->second;

  // Lists with one entry per parameter, or discarded where absent.
  auto per_param = [&](const char* key) {
    json j = MetaJson(meta, key, path);
    if (!j.is_discarded()) (void)PerParam(j, key, n, path);
    return j;
  };
  const json steps = per_param("tandem_tensor_steps");
  const json tgroups = per_param("tandem_tensor_groups");
  const json pdt = per_param("tandem_param_dtypes");
  const json gdt = per_param("tandem_grad_dtypes");

  std::set<std::string> used;
  for (size_t i = 0; i < n; ++i) {
    const std::string& name = params[i];
    const std::string ctx = "parameter '" + name + "'";
    auto it = hdr.tensors.find(name);
    if (it == hdr.tensors.end()) Invalid(path, ctx + " has no tensor");
    TensorSnapshot t;
    t.name = name;
    t.master_f32 = std::move(values.at(name));
    t.numel = t.master_f32.size();
    if (it->second.shape.size() >= 2) t.shape = it->second.shape;
    used.insert(name);
    try {
      if (!steps.is_discarded()) {
        if (!steps[i].is_number_integer())
          Invalid(path, ctx + ": its tandem_tensor_steps entry is not an integer");
        t.step = steps[i].get<int64_t>();
      } else {
        t.step = s.step;
      }
      if (!tgroups.is_discarded()) {
        if (!tgroups[i].is_number_unsigned())
          Invalid(path, ctx + ": its tandem_tensor_groups entry is not an integer >= 0");
        t.group = tgroups[i].get<uint32_t>();
      }
      if (!pdt.is_discarded())
        t.param_dtype = ParseDType(pdt[i].get<std::string>());
      else
        t.param_dtype = d.param_dtype;
      if (!gdt.is_discarded())
        t.grad_dtype = ParseDType(gdt[i].get<std::string>());
      else
        t.grad_dtype = d.grad_dtype;
    } catch (const json::exception& e) {
      Invalid(path, ctx + ": a per-parameter __metadata__ entry has the wrong type: " + e.what());
    } catch (const Error& e) {
      Invalid(path, ctx + ": " + e.message());
    }
    if (t.group >= s.groups.size())
      Invalid(path, ctx + ": group " + std::to_string(t.group) + " of " +
                        std::to_string(s.groups.size()));
    for (const StateTensor& sp : StateOf(s.algo, s.groups[t.group])) {
      const std::string sn = name + sp.suffix;
      auto e = hdr.tensors.find(sn);
      if (e == hdr.tensors.end())
        Invalid(path, ctx + ": no tensor '" + sn + "' (" + Name(s.algo) + " keeps it)");
      if (e->second.shape != it->second.shape)
        Invalid(path, "tensor '" + sn + "' has another shape than its parameter");
      (sp.variance ? t.v_f32 : t.m_f32) = std::move(values.at(sn));
      used.insert(sn);
    }
    s.tensors.push_back(std::move(t));
  }
  for (const auto& [k, e] : hdr.tensors)
    if (!used.count(k))
      Invalid(path, "tensor '" + k + "' is neither a parameter nor a state " + Name(s.algo) +
                        " keeps of one");
  return s;
}

}  // namespace tandem::tool
