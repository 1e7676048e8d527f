#include "checkpoint/manifest.h"

#include <nlohmann/json.hpp>

#include "checkpoint/sections.h"
#include "engine/snapshot_check.h"
#include "tandem/error.h"

namespace tandem::ckpt {
namespace {

using nlohmann::json;

[[noreturn]] void Bad(const std::string& where, const std::string& what) {
  throw Error(ErrorKind::kCorruption, where + ": manifest " + what);
}

const json& Field(const json& obj, const char* key, const std::string& ctx,
                  const std::string& where) {
  if (!obj.is_object()) Bad(where, ctx + " is not a JSON object");
  auto it = obj.find(key);
  if (it == obj.end()) Bad(where, ctx + " has no field '" + key + "'");
  return *it;
}

uint64_t U64(const json& obj, const char* key, const std::string& ctx, const std::string& w) {
  const json& v = Field(obj, key, ctx, w);
  if (!v.is_number_unsigned()) Bad(w, ctx + "." + key + " is not a non-negative integer");
  return v.get<uint64_t>();
}

uint32_t U32(const json& obj, const char* key, const std::string& ctx, const std::string& w) {
  const uint64_t v = U64(obj, key, ctx, w);
  if (v > 0xFFFFFFFFu) Bad(w, ctx + "." + key + " = " + std::to_string(v) + " exceeds 32 bits");
  return static_cast<uint32_t>(v);
}

double F64(const json& obj, const char* key, const std::string& ctx, const std::string& w) {
  const json& v = Field(obj, key, ctx, w);
  if (!v.is_number()) Bad(w, ctx + "." + key + " is not a number");
  return v.get<double>();
}

std::string Str(const json& obj, const char* key, const std::string& ctx, const std::string& w) {
  const json& v = Field(obj, key, ctx, w);
  if (!v.is_string()) Bad(w, ctx + "." + key + " is not a string");
  return v.get<std::string>();
}

const json& Arr(const json& obj, const char* key, const std::string& ctx, const std::string& w) {
  const json& v = Field(obj, key, ctx, w);
  if (!v.is_array()) Bad(w, ctx + "." + key + " is not an array");
  return v;
}

// Runs parse(), turning its kInvalidArgument (a bad name) into corruption.
template <typename F>
auto ParseName(F&& parse, const std::string& ctx, const std::string& w) {
  try {
    return parse();
  } catch (const Error& e) {
    Bad(w, ctx + ": " + e.what());
  }
}

// obj.formats: {"master", "momentum", "variance"}, each a format name.
StateFormats Formats(const json& obj, const std::string& ctx, const std::string& w) {
  const json& f = Field(obj, "formats", ctx, w);
  const std::string fc = ctx == "root" ? "formats" : ctx + ".formats";
  const std::string fm = Str(f, "master", fc, w), fmo = Str(f, "momentum", fc, w),
                    fv = Str(f, "variance", fc, w);
  StateFormats out;
  out.master = ParseName([&] { return ParseMasterFormat(fm); }, fc + ".master", w);
  out.momentum = ParseName([&] { return ParseMomentFormat(fmo); }, fc + ".momentum", w);
  out.variance = ParseName([&] { return ParseMomentFormat(fv); }, fc + ".variance", w);
  return out;
}

std::string Desc(const CheckpointSection& s) {
  return "tensor " + std::to_string(s.tensor) + " " + s.kind_name + " (" +
         std::to_string(s.raw_length) + " bytes)";
}

// SGD keeps a momentum buffer where its group's momentum is not 0: a manifest whose
// groups and momentum sections disagree (an SGD file edited, or written by another tool)
// is named as such, before the section list is compared entry by entry.
void CheckSgdMomentumSections(const CheckpointInfo& info, const json& sections,
                              const std::string& w) {
  if (info.algo != Algorithm::kSGD) return;
  std::vector<bool> listed(info.tensors.size(), false);
  for (const json& o : sections) {
    if (!o.is_object() || !o.contains("tensor") || !o.contains("kind")) continue;
    const json &t = o["tensor"], &k = o["kind"];
    if (!t.is_number_unsigned() || !k.is_number_unsigned()) continue;
    const uint64_t ti = t.get<uint64_t>(), kind = k.get<uint64_t>();
    if (ti < listed.size() && (kind == static_cast<uint64_t>(SectionKind::kMF32) ||
                               kind == static_cast<uint64_t>(SectionKind::kMCodes) ||
                               kind == static_cast<uint64_t>(SectionKind::kMScales)))
      listed[ti] = true;
  }
  for (size_t i = 0; i < info.tensors.size(); ++i) {
    const TensorSnapshot& t = info.tensors[i];
    const HyperParams& h = info.groups[t.group];
    if (t.numel > 0 && HasMomentum(info.algo, h) != listed[i])
      Bad(w, "tensor '" + t.name + "': " + SgdMomentumMismatch(t.group, h.momentum, listed[i]));
  }
}

}  // namespace

std::vector<CheckpointSection> ExpectedSections(const CheckpointInfo& info) {
  std::vector<CheckpointSection> out;
  for (uint32_t i = 0; i < info.tensors.size(); ++i) {
    const TensorSnapshot& t = info.tensors[i];
    const StateFormats& f = t.formats;  // the tensor's own (version 3; else the default)
    if (t.numel == 0) continue;
    const uint64_t n = t.numel, groups = (n + kQuantGroup - 1) / kQuantGroup;
    const bool hm = HasMomentum(info.algo, info.groups[t.group]), hv = HasVariance(info.algo);
    const bool mq = f.momentum == MomentFormat::kQ8, vq = f.variance == MomentFormat::kQ8;
    auto add = [&](SectionKind k, bool present, uint64_t count) {
      if (!present) return;
      CheckpointSection s;
      s.tensor = i;
      s.kind = static_cast<uint32_t>(k);
      s.kind_name = KindName(k);
      s.raw_length = count * KindElementSize(k);
      s.compression = "none";
      out.push_back(s);
    };
    add(SectionKind::kMasterF32, f.master == MasterFormat::kF32, n);
    add(SectionKind::kMasterBf16, f.master != MasterFormat::kF32, n);
    add(SectionKind::kEcc8, f.master == MasterFormat::kBF16Ecc8, n);
    add(SectionKind::kEcc16, f.master == MasterFormat::kBF16Ecc16, n);
    add(SectionKind::kMF32, hm && !mq, n);
    add(SectionKind::kMCodes, hm && mq, n);
    add(SectionKind::kMScales, hm && mq, groups);
    add(SectionKind::kVF32, hv && !vq, n);
    add(SectionKind::kVCodes, hv && vq, n);
    add(SectionKind::kVScales, hv && vq, groups);
  }
  return out;
}

std::string EncodeManifest(const CheckpointInfo& info) {
  json j;
  j["format"] = "tandem-checkpoint";
  j["algorithm"] = Name(info.algo);
  auto formats = [](const StateFormats& f) {
    return json{{"master", Name(f.master)}, {"momentum", Name(f.momentum)},
                {"variance", Name(f.variance)}};
  };
  j["formats"] = formats(info.formats);
  j["step"] = info.step;
  j["metadata"] = info.metadata;
  json groups = json::array();
  for (const HyperParams& h : info.groups)
    groups.push_back({{"lr_scale", h.lr_scale}, {"beta1", h.beta1}, {"beta2", h.beta2},
                      {"eps", h.eps}, {"weight_decay", h.weight_decay},
                      {"momentum", h.momentum}, {"dampening", h.dampening},
                      {"nesterov", h.nesterov}});
  j["groups"] = groups;
  json tensors = json::array();
  for (const TensorSnapshot& t : info.tensors)
    tensors.push_back({{"name", t.name}, {"numel", t.numel},
                       {"param_dtype", Name(t.param_dtype)}, {"grad_dtype", Name(t.grad_dtype)},
                       {"group", t.group}, {"shape", t.shape}, {"step", t.step},
                       {"formats", formats(t.formats)}});
  j["tensors"] = tensors;
  json sections = json::array();
  for (const CheckpointSection& s : info.sections)
    sections.push_back({{"tensor", s.tensor}, {"kind", s.kind}, {"offset", s.offset},
                        {"length", s.length}, {"raw_length", s.raw_length},
                        {"crc32c", s.crc32c}, {"compression", s.compression}});
  j["sections"] = sections;
  return j.dump();  // throws only for invalid UTF-8; SaveCheckpoint checks first
}

void DecodeManifest(const std::string& text, uint32_t version, uint64_t manifest_offset,
                    const std::string& w, CheckpointInfo* info) {
  const json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) Bad(w, "is not valid JSON");
  // An lvalue, not a literal: GCC 14 takes Field(j, ..., "root", w) for a dangling reference.
  const std::string root = "root";
  if (Str(j, "format", root, w) != "tandem-checkpoint") Bad(w, "format is not tandem-checkpoint");
  const std::string algo = Str(j, "algorithm", root, w);
  info->algo = ParseName([&] { return ParseAlgorithm(algo); }, "algorithm", w);
  info->formats = Formats(j, root, w);
  const json& step = Field(j, "step", root, w);
  if (!step.is_number_integer() || step.get<int64_t>() < 0) Bad(w, "step is not an integer >= 0");
  info->step = step.get<int64_t>();
  const bool v2 = version >= kVersion2;
  info->metadata = v2 ? Str(j, "metadata", root, w) : std::string();

  const json& groups = Arr(j, "groups", root, w);
  if (groups.empty()) Bad(w, "has no parameter groups");
  info->groups.clear();
  for (size_t g = 0; g < groups.size(); ++g) {
    const std::string ctx = "groups[" + std::to_string(g) + "]";
    const json& o = groups[g];
    HyperParams h;
    h.lr_scale = F64(o, "lr_scale", ctx, w);
    h.beta1 = F64(o, "beta1", ctx, w);
    h.beta2 = F64(o, "beta2", ctx, w);
    h.eps = F64(o, "eps", ctx, w);
    h.weight_decay = F64(o, "weight_decay", ctx, w);
    h.momentum = F64(o, "momentum", ctx, w);
    h.dampening = F64(o, "dampening", ctx, w);
    const json& nest = Field(o, "nesterov", ctx, w);
    if (!nest.is_boolean()) Bad(w, ctx + ".nesterov is not a boolean");
    h.nesterov = nest.get<bool>();
    ParseName([&] { ValidateHyperParams(info->algo, h, ctx); return 0; }, ctx, w);
    info->groups.push_back(h);
  }

  const json& tensors = Arr(j, "tensors", root, w);
  info->tensors.clear();
  for (size_t i = 0; i < tensors.size(); ++i) {
    const std::string ctx = "tensors[" + std::to_string(i) + "]";
    const json& o = tensors[i];
    TensorSnapshot t;
    t.name = Str(o, "name", ctx, w);
    t.numel = U64(o, "numel", ctx, w);
    if (t.numel > (uint64_t{1} << 48)) Bad(w, ctx + " ('" + t.name + "') numel is absurd");
    const std::string pd = Str(o, "param_dtype", ctx, w), gd = Str(o, "grad_dtype", ctx, w);
    t.param_dtype = ParseName([&] { return ParseDType(pd); }, ctx + ".param_dtype", w);
    t.grad_dtype = ParseName([&] { return ParseDType(gd); }, ctx + ".grad_dtype", w);
    t.group = U32(o, "group", ctx, w);
    if (t.group >= info->groups.size())
      Bad(w, ctx + " ('" + t.name + "') group " + std::to_string(t.group) + " of " +
                 std::to_string(info->groups.size()));
    if (v2) {
      const json& shape = Arr(o, "shape", ctx, w);
      for (size_t d = 0; d < shape.size(); ++d) {
        if (!shape[d].is_number_unsigned())
          Bad(w, ctx + ".shape[" + std::to_string(d) + "] is not a non-negative integer");
        t.shape.push_back(shape[d].get<uint64_t>());
      }
      const json& ts = Field(o, "step", ctx, w);
      if (!ts.is_number_integer()) Bad(w, ctx + ".step is not an integer");
      // A value above INT64_MAX parses as unsigned; it is out of range either way.
      t.step = ts.is_number_unsigned() && ts.get<uint64_t>() > uint64_t{INT64_MAX}
                   ? INT64_MAX
                   : ts.get<int64_t>();
    } else {
      t.step = info->step;  // version 1 kept one step for all tensors
    }
    // Before version 3 every tensor had the file's formats.
    t.formats = version >= kVersion3 ? Formats(o, ctx, w) : info->formats;
    info->tensors.push_back(std::move(t));
  }

  const json& sections = Arr(j, "sections", root, w);
  CheckSgdMomentumSections(*info, sections, w);
  std::vector<CheckpointSection> want = ExpectedSections(*info);
  if (sections.size() != want.size())
    Bad(w, "lists " + std::to_string(sections.size()) + " sections, the tensors and formats need " +
               std::to_string(want.size()));
  uint64_t end = kHeaderSize;
  info->sections.clear();
  for (size_t i = 0; i < sections.size(); ++i) {
    const std::string ctx = "sections[" + std::to_string(i) + "]";
    const json& o = sections[i];
    CheckpointSection s;
    s.tensor = U32(o, "tensor", ctx, w);
    s.kind = U32(o, "kind", ctx, w);
    s.offset = U64(o, "offset", ctx, w);
    s.length = U64(o, "length", ctx, w);
    s.raw_length = U64(o, "raw_length", ctx, w);
    s.crc32c = U32(o, "crc32c", ctx, w);
    s.compression = Str(o, "compression", ctx, w);
    const std::optional<SectionKind> kind = KindFromId(s.kind);
    s.kind_name = kind ? KindName(*kind) : "unknown";
    if (s.tensor != want[i].tensor || s.kind != want[i].kind || s.raw_length != want[i].raw_length)
      Bad(w, ctx + " is " + Desc(s) + ", expected " + Desc(want[i]));
    const std::string named = ctx + " (tensor '" + info->tensors[s.tensor].name + "', " +
                              s.kind_name + ")";
    if (s.offset != AlignUp(end))
      Bad(w, named + " offset " + std::to_string(s.offset) + ", expected " +
                 std::to_string(AlignUp(end)));
    if (s.compression == "none") {
      if (s.length != s.raw_length)
        Bad(w, named + " uncompressed but length " + std::to_string(s.length) +
                   " != raw_length " + std::to_string(s.raw_length));
    } else if (s.compression == "deflate") {
      if (s.length == 0 || s.raw_length / kMaxDeflateRatio > s.length)
        Bad(w, named + " deflate length " + std::to_string(s.length) + " cannot give " +
                   std::to_string(s.raw_length) + " bytes");
    } else {
      Bad(w, named + " has unknown compression '" + s.compression + "'");
    }
    if (s.length > manifest_offset || s.offset > manifest_offset - s.length)
      Bad(w, named + " [" + std::to_string(s.offset) + ", +" + std::to_string(s.length) +
                 ") overlaps the manifest at " + std::to_string(manifest_offset));
    end = s.offset + s.length;
    info->sections.push_back(std::move(s));
  }
  if (AlignUp(end) != manifest_offset)
    Bad(w, "starts at " + std::to_string(manifest_offset) + ", expected " +
               std::to_string(AlignUp(end)) + " after the last section");
}

}  // namespace tandem::ckpt
