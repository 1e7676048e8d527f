// The calibration profile "tandem-profile/1": reader, writer, built-in default.
// docs/planner.md "Profile schema" is the grammar; keep the two in step.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>

#include <nlohmann/json.hpp>

#include "checkpoint/atomic_file.h"
#include "planner/read_file.h"
#include "tandem/checkpoint.h"
#include "tandem/error.h"
#include "tandem/planner.h"

namespace tandem::planner {
namespace {

using nlohmann::json;

[[noreturn]] void Fail(std::string_view where, const std::string& what) {
  throw Error(ErrorKind::kInvalidArgument, std::string(where) + ": " + what);
}

// The path is a view, not a const std::string&: a reference parameter bound to a temporary
// makes g++ 13 take the returned reference for a dangling one (-Wdangling-reference).
const json& Member(const json& j, const char* key, std::string_view path_view,
                   std::string_view where) {
  const std::string path(path_view);
  if (!j.is_object()) Fail(where, "'" + path + "' must be an object");
  if (!j.contains(key))
    Fail(where, "missing field '" + path + (path.empty() ? "" : ".") + key + "'");
  return j.at(key);
}

double Rate(const json& j, const char* key, const std::string& path, std::string_view where) {
  const json& v = Member(j, key, path, where);
  if (!v.is_number() || !(v.get<double>() > 0))
    Fail(where, "field '" + path + "." + key + "' must be a positive number, got " + v.dump());
  return v.get<double>();
}

std::string Text(const json& j, const char* key, const std::string& path, std::string_view where) {
  const json& v = Member(j, key, path, where);
  if (!v.is_string())
    Fail(where, "field '" + path + (path.empty() ? "" : ".") + key + "' must be a string, got " +
                    v.dump());
  return v.get<std::string>();
}

// The kernel rates under `name` ("kernels", "kernels_under_dma"), empty where absent.
std::map<std::string, KernelRate> Kernels(const json& side, const std::string& path,
                                          std::string_view where, const char* name = "kernels") {
  std::map<std::string, KernelRate> out;
  if (!side.contains(name)) return out;
  const json& k = side.at(name);
  const std::string field = path + "." + name;
  if (!k.is_object()) Fail(where, "field '" + field + "' must be an object");
  for (const auto& [key, value] : k.items())
    out[key].gparams_per_s = Rate(value, "gparams_per_s", field + "." + key, where);
  return out;
}

// An optional positive rate: 0 where absent.
double OptionalRate(const json& j, const char* key, const std::string& path,
                    std::string_view where) {
  return j.contains(key) ? Rate(j, key, path, where) : 0.0;
}

// A non-negative number: the fixed step cost's figures may be 0.
double NonNegative(const json& j, const char* key, const std::string& path,
                   std::string_view where) {
  const json& v = Member(j, key, path, where);
  if (!v.is_number() || !(v.get<double>() >= 0) || !std::isfinite(v.get<double>()))
    Fail(where, "field '" + path + "." + key + "' must be a number >= 0, got " + v.dump());
  return v.get<double>();
}

// One part of "step_overhead" (Note [Fixed step cost]); not measured where absent.
Profile::Overhead OverheadPart(const json& overhead, const char* part, std::string_view where) {
  Profile::Overhead o;
  if (!overhead.contains(part)) return o;
  const std::string path = std::string("step_overhead.") + part;
  const json& j = overhead.at(part);
  if (!j.is_object()) Fail(where, "field '" + path + "' must be an object");
  o.per_step_ms = NonNegative(j, "per_step_ms", path, where);
  o.per_tensor_us = NonNegative(j, "per_tensor_us", path, where);
  o.measured = true;
  return o;
}

// A positive integer field; `fallback` when absent.
int Count(const json& j, const char* key, const std::string& path, std::string_view where,
          int fallback) {
  if (!j.contains(key)) return fallback;
  const json& v = j.at(key);
  if (!v.is_number_integer() || v.get<int64_t>() < 0 || v.get<int64_t>() > 1 << 20)
    Fail(where, "field '" + path + "." + key + "' must be an integer >= 0, got " + v.dump());
  return v.get<int>();
}

// "node": figures with N ranks busy at once (Note [The node is one machine]).
Profile::Node NodePart(const json& j, std::string_view where) {
  if (!j.is_object()) Fail(where, "field 'node' must be an object");
  Profile::Node n;
  n.ranks = Count(j, "ranks", "node", where, -1);
  if (n.ranks < 1) Fail(where, "field 'node.ranks' must be an integer >= 1");
  n.gpus = Count(j, "gpus", "node", where, 0);
  if (n.gpus > n.ranks)
    Fail(where, "field 'node.gpus' (" + std::to_string(n.gpus) + ") exceeds 'node.ranks' (" +
                    std::to_string(n.ranks) + ")");
  n.cpus_per_rank = Count(j, "cpus_per_rank", "node", where, 0);
  if (j.contains("host")) {
    const json& host = j.at("host");
    if (!host.is_object()) Fail(where, "field 'node.host' must be an object");
    n.host_kernels = Kernels(host, "node.host", where);
    n.host_kernels_under_dma = Kernels(host, "node.host", where, "kernels_under_dma");
  }
  if (j.contains("pcie")) {
    const json& pcie = j.at("pcie");
    if (!pcie.is_object()) Fail(where, "field 'node.pcie' must be an object");
    n.h2d_concurrent_gbps = OptionalRate(pcie, "h2d_concurrent_gbps", "node.pcie", where);
    n.d2h_concurrent_gbps = OptionalRate(pcie, "d2h_concurrent_gbps", "node.pcie", where);
  }
  return n;
}

json KernelsJson(const std::map<std::string, KernelRate>& kernels) {
  json k = json::object();
  for (const auto& [key, rate] : kernels) k[key] = {{"gparams_per_s", rate.gparams_per_s}};
  return k;
}

}  // namespace

Profile DefaultProfile() {
  Profile p;
  p.machine = "H200 reference (built-in default, not measured here)";
  p.date = "2026-11";
  p.source = "built-in: design brief reference figures; kernels at 90% of roofline";
  p.gpu.name = "NVIDIA H200";
  p.gpu.hbm_copy_gbps = 4260;
  p.host.threads = 16;
  p.host.isa = "avx512";
  p.host.copy_gbps = 146;
  p.host.triad_gbps = 146;
  p.host.dram_gbps = kDefaultNodeDramGbps;
  p.pcie = {55.6, 55.5, 101.7};
  p.builtin_default = true;
  return p;
}

Profile GraceHopperProfile() {
  Profile p;
  p.machine = "NVIDIA GH200 Grace Hopper (published figures, not measured)";
  p.date = "2024";
  p.source =
      "built-in: NVIDIA's published GH200 figures (HBM3e 4.9 TB/s, NVLink-C2C 900 GB/s, "
      "LPDDR5X 512 GB/s, 72 Neoverse V2 cores); peaks, not measurements";
  p.gpu.name = "NVIDIA GH200 (H100, 144 GB HBM3e)";
  p.gpu.hbm_copy_gbps = 4900;
  p.host.threads = 72;
  p.host.isa = "sve";
  p.host.copy_gbps = 512;
  p.host.triad_gbps = 512;
  p.pcie = {450, 450, 900};
  return p;
}

std::optional<Profile> BuiltinProfile(std::string_view name) {
  if (name == "h200") return DefaultProfile();
  if (name == "grace-hopper") return GraceHopperProfile();
  return std::nullopt;
}

Profile ProfileByNameOrPath(const std::string& name_or_path) {
  if (auto p = BuiltinProfile(name_or_path)) return *p;
  return ReadProfile(name_or_path);
}

Profile ParseProfile(std::string_view text, std::string_view where) {
  json j;
  try {
    j = json::parse(text);
  } catch (const json::exception& e) {
    Fail(where, std::string("not valid JSON: ") + e.what());
  }
  if (!j.is_object()) Fail(where, "profile must be a JSON object");
  const std::string schema = Text(j, "schema", "", where);
  if (schema != kProfileSchema)
    Fail(where, "schema '" + schema + "' is not '" + kProfileSchema + "'");
  Profile p;
  p.machine = Text(j, "machine", "", where);
  p.date = j.contains("date") ? Text(j, "date", "", where) : "";
  p.source = j.contains("source") ? Text(j, "source", "", where) : "";
  const json& gpu = Member(j, "gpu", "", where);
  p.gpu.name = gpu.contains("name") ? Text(gpu, "name", "gpu", where) : "";
  p.gpu.hbm_copy_gbps = Rate(gpu, "hbm_copy_gbps", "gpu", where);
  p.gpu.kernels = Kernels(gpu, "gpu", where);
  p.gpu.prepass_gparams_per_s = OptionalRate(gpu, "prepass_gparams_per_s", "gpu", where);
  p.gpu.train_tflops = OptionalRate(gpu, "train_tflops", "gpu", where);
  p.gpu.peak_tflops = OptionalRate(gpu, "peak_tflops", "gpu", where);
  const json& host = Member(j, "host", "", where);
  if (host.contains("threads")) {
    const json& t = host.at("threads");
    if (!t.is_number_integer() || t.get<int64_t>() <= 0)
      Fail(where, "field 'host.threads' must be a positive integer, got " + t.dump());
    p.host.threads = t.get<int>();
  }
  p.host.isa = host.contains("isa") ? Text(host, "isa", "host", where) : "";
  p.host.copy_gbps = host.contains("copy_gbps") ? Rate(host, "copy_gbps", "host", where) : 0;
  p.host.triad_gbps = Rate(host, "triad_gbps", "host", where);
  p.host.kernels = Kernels(host, "host", where);
  p.host.kernels_under_dma = Kernels(host, "host", where, "kernels_under_dma");
  p.host.dram_gbps = OptionalRate(host, "dram_gbps", "host", where);
  const json& pcie = Member(j, "pcie", "", where);
  p.pcie.h2d_gbps = Rate(pcie, "h2d_gbps", "pcie", where);
  p.pcie.d2h_gbps = Rate(pcie, "d2h_gbps", "pcie", where);
  p.pcie.bidir_gbps = Rate(pcie, "bidir_gbps", "pcie", where);
  p.pcie.h2d_concurrent_gbps = OptionalRate(pcie, "h2d_concurrent_gbps", "pcie", where);
  p.pcie.d2h_concurrent_gbps = OptionalRate(pcie, "d2h_concurrent_gbps", "pcie", where);
  if (j.contains("node")) p.node = NodePart(j.at("node"), where);
  if (j.contains("step_overhead")) {
    const json& o = j.at("step_overhead");
    if (!o.is_object()) Fail(where, "field 'step_overhead' must be an object");
    p.step_overhead.engine = OverheadPart(o, "engine", where);
    p.step_overhead.binding = OverheadPart(o, "binding", where);
  }
  return p;
}

Profile ReadProfile(const std::string& path) {
  return ParseProfile(ReadWholeFile(path, "profile"), path);
}

std::string ProfileToJson(const Profile& p) {
  json j = {
      {"schema", kProfileSchema},
      {"machine", p.machine},
      {"date", p.date},
      {"source", p.source},
      {"gpu",
       {{"name", p.gpu.name},
        {"hbm_copy_gbps", p.gpu.hbm_copy_gbps},
        {"kernels", KernelsJson(p.gpu.kernels)}}},
      {"host",
       {{"threads", p.host.threads},
        {"isa", p.host.isa},
        {"copy_gbps", p.host.copy_gbps},
        {"triad_gbps", p.host.triad_gbps},
        {"kernels", KernelsJson(p.host.kernels)},
        {"kernels_under_dma", KernelsJson(p.host.kernels_under_dma)}}},
      {"pcie",
       {{"h2d_gbps", p.pcie.h2d_gbps},
        {"d2h_gbps", p.pcie.d2h_gbps},
        {"bidir_gbps", p.pcie.bidir_gbps}}},
  };
  // Written only when measured (a reader takes absence as "not measured").
  if (p.pcie.h2d_concurrent_gbps > 0) j["pcie"]["h2d_concurrent_gbps"] = p.pcie.h2d_concurrent_gbps;
  if (p.pcie.d2h_concurrent_gbps > 0) j["pcie"]["d2h_concurrent_gbps"] = p.pcie.d2h_concurrent_gbps;
  if (p.gpu.prepass_gparams_per_s > 0)
    j["gpu"]["prepass_gparams_per_s"] = p.gpu.prepass_gparams_per_s;
  if (p.gpu.train_tflops > 0) j["gpu"]["train_tflops"] = p.gpu.train_tflops;
  if (p.gpu.peak_tflops > 0) j["gpu"]["peak_tflops"] = p.gpu.peak_tflops;
  if (p.host.dram_gbps > 0) j["host"]["dram_gbps"] = p.host.dram_gbps;
  if (p.node.ranks > 0) {
    json n = {{"ranks", p.node.ranks}, {"gpus", p.node.gpus}};
    if (p.node.cpus_per_rank > 0) n["cpus_per_rank"] = p.node.cpus_per_rank;
    n["host"] = {{"kernels", KernelsJson(p.node.host_kernels)},
                 {"kernels_under_dma", KernelsJson(p.node.host_kernels_under_dma)}};
    if (p.node.h2d_concurrent_gbps > 0 || p.node.d2h_concurrent_gbps > 0) {
      n["pcie"] = json::object();
      if (p.node.h2d_concurrent_gbps > 0)
        n["pcie"]["h2d_concurrent_gbps"] = p.node.h2d_concurrent_gbps;
      if (p.node.d2h_concurrent_gbps > 0)
        n["pcie"]["d2h_concurrent_gbps"] = p.node.d2h_concurrent_gbps;
    }
    j["node"] = n;
  }
  for (const auto& [name, part] : {std::pair{"engine", &p.step_overhead.engine},
                                   std::pair{"binding", &p.step_overhead.binding}})
    if (part->measured)
      j["step_overhead"][name] = {{"per_step_ms", part->per_step_ms},
                                  {"per_tensor_us", part->per_tensor_us}};
  return j.dump(2) + "\n";
}

void WriteProfile(const Profile& p, const std::string& path) {
  const std::string text = ProfileToJson(p);
  ckpt::WriteFileAtomically(Env::Default(), path, /*sync=*/true,
                            [&](WritableFile* file) { file->Append(text.data(), text.size()); });
}

Profile::Overhead FitStepOverhead(uint64_t few, double few_ms, uint64_t many, double many_ms) {
  if (!(few > 0 && few < many) || !(std::isfinite(few_ms) && few_ms >= 0) ||
      !(std::isfinite(many_ms) && many_ms >= 0))
    throw Error(ErrorKind::kInvalidArgument,
                "step overhead fit: needs 0 < few < many tensors and times >= 0, got " +
                    std::to_string(few) + " tensors " + std::to_string(few_ms) + " ms, " +
                    std::to_string(many) + " tensors " + std::to_string(many_ms) + " ms");
  Profile::Overhead o;
  o.measured = true;
  o.per_tensor_us = std::max(0.0, 1e3 * (many_ms - few_ms) / static_cast<double>(many - few));
  o.per_step_ms = std::max(0.0, few_ms - o.per_tensor_us * 1e-3 * static_cast<double>(few));
  return o;
}

std::string KernelKey(Algorithm algo, const StateFormats& f, DType grad_dtype) {
  return std::string(Name(algo)) + "/" + Name(f.master) + "/" + Name(f.momentum) + "/" +
         Name(f.variance) + "/" + Name(grad_dtype);
}

}  // namespace tandem::planner
