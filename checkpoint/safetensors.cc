// Export of fp32 masters to safetensors and import from it
// (format: https://github.com/huggingface/safetensors, "Format").
#include "checkpoint/safetensors.h"

#include <algorithm>
#include <cstring>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

#include "checkpoint/atomic_file.h"
#include "engine/fp_bits.h"
#include "tandem/checkpoint.h"
#include "tandem/error.h"

namespace tandem {
namespace {

using nlohmann::json;
using nlohmann::ordered_json;

constexpr uint64_t kMaxHeader = uint64_t{100} << 20;  // the reference implementation's limit

[[noreturn]] void Bad(const std::string& path, const std::string& what) {
  throw Error(ErrorKind::kCorruption, "safetensors '" + path + "': " + what);
}

}  // namespace

namespace ckpt {

std::string SafetensorsF32Header(const std::vector<std::pair<std::string, std::string>>& metadata,
                                 const std::vector<SafetensorsTensor>& tensors) {
  ordered_json h = ordered_json::object();
  ordered_json& meta = h["__metadata__"] = ordered_json::object();
  for (const auto& [key, value] : metadata) meta[key] = value;
  uint64_t offset = 0;
  for (const SafetensorsTensor& t : tensors) {
    h[t.name] = {
        {"dtype", "F32"}, {"shape", t.shape}, {"data_offsets", {offset, offset + 4 * t.numel}}};
    offset += 4 * t.numel;
  }
  std::string header = h.dump();
  header.append((8 - header.size() % 8) % 8, ' ');  // data starts 8-byte aligned
  return header;
}

void WriteSafetensorsFile(const std::string& header, const std::vector<SafetensorsTensor>& tensors,
                          const std::string& path, Env* env) {
  WriteFileAtomically(env, path, /*sync=*/true, [&](WritableFile* f) {
    const uint64_t len = header.size();
    unsigned char lb[8];
    memcpy(lb, &len, 8);  // little-endian host (checkpoint/format.h asserts it)
    f->Append(lb, 8);
    f->Append(header.data(), header.size());
    std::vector<float> scratch;
    for (const SafetensorsTensor& t : tensors) {
      const std::span<const float> v = t.values(&scratch);
      if (v.size() != t.numel)
        throw Error(ErrorKind::kInvalidArgument,
                    "safetensors '" + path + "': tensor '" + t.name + "' has " +
                        std::to_string(v.size()) + " values, its shape " + std::to_string(t.numel));
      f->Append(v.data(), v.size() * 4);
    }
  });
}

}  // namespace ckpt

void ExportSafetensorsMasters(const OptimizerSnapshot& s, const std::string& path, Env* env) {
  if (env == nullptr) env = Env::Default();
  ValidateSnapshot(s);
  std::set<std::string> names;
  std::vector<ckpt::SafetensorsTensor> tensors;
  for (const TensorSnapshot& t : s.tensors) {
    if (t.name == "__metadata__" || !names.insert(t.name).second)
      throw Error(
          ErrorKind::kInvalidArgument,
          "safetensors export '" + path + "': duplicate or reserved tensor name '" + t.name + "'");
    tensors.push_back({t.name, t.shape.empty() ? std::vector<uint64_t>{t.numel} : t.shape, t.numel,
                       [&t](std::vector<float>* scratch) {
                         *scratch = DecodeMasterF32(t, t.formats);
                         return std::span<const float>(*scratch);
                       }});
  }
  std::string header;
  try {
    header = ckpt::SafetensorsF32Header({{"format", "pt"},
                                         {"producer", "tandem"},
                                         {"tandem_algorithm", Name(s.algo)},
                                         {"tandem_formats", Name(s.formats)},
                                         {"tandem_step", std::to_string(s.step)}},
                                        tensors);
  } catch (const json::exception& e) {
    throw Error(ErrorKind::kInvalidArgument,
                "safetensors export '" + path + "': bad tensor name: " + e.what());
  }
  ckpt::WriteSafetensorsFile(header, tensors, path, env);
}

namespace ckpt {

SafetensorsHeader ReadSafetensorsHeader(const RandomAccessFile& f, const std::string& path) {
  const uint64_t size = f.Size();
  if (size < 8) Bad(path, "file is " + std::to_string(size) + " bytes, too short for a header");
  unsigned char lb[8];
  if (f.Read(0, 8, lb) != 8) Bad(path, "short read of the header length");
  uint64_t hlen;
  memcpy(&hlen, lb, 8);
  if (hlen > kMaxHeader || hlen > size - 8)
    Bad(path, "header length " + std::to_string(hlen) + " exceeds the file (" +
                  std::to_string(size) + " bytes) or the 100 MiB limit");
  std::string text(hlen, '\0');
  if (f.Read(8, hlen, text.data()) != hlen) Bad(path, "short read of the header");
  const json h = json::parse(text, nullptr, false);
  if (h.is_discarded() || !h.is_object()) Bad(path, "header is not a JSON object");
  SafetensorsHeader out;
  out.data_start = 8 + hlen;
  const uint64_t data_size = size - out.data_start;
  using Entry = SafetensorsEntry;
  for (auto it = h.begin(); it != h.end(); ++it) {
    const std::string& name = it.key();
    const json& e = it.value();
    if (name == "__metadata__") {
      if (!e.is_object()) Bad(path, "__metadata__ is not an object");
      for (const auto& m : e.items()) {
        if (!m.value().is_string()) Bad(path, "__metadata__ value '" + m.key() + "' is not a string");
        out.metadata[m.key()] = m.value().get<std::string>();
      }
      continue;
    }
    const std::string w = "tensor '" + name + "': ";
    if (!e.is_object() || !e.contains("dtype") || !e.contains("shape") ||
        !e.contains("data_offsets"))
      Bad(path, w + "entry needs dtype, shape and data_offsets");
    const json& dt = e["dtype"];
    const json& shape = e["shape"];
    const json& off = e["data_offsets"];
    if (!dt.is_string()) Bad(path, w + "dtype is not a string");
    Entry en{name, 0, {}, 0, 0, 1};
    const std::string d = dt.get<std::string>();
    if (d == "F32") en.elem = 4;
    else if (d == "BF16") en.elem = 2;
    else if (d == "F16") en.elem = -2;
    else Bad(path, w + "dtype " + d + " is not F32, BF16 or F16");
    if (!shape.is_array()) Bad(path, w + "shape is not an array");
    for (const json& dim : shape) {
      if (!dim.is_number_unsigned()) Bad(path, w + "shape has a non-integer or negative entry");
      const uint64_t v = dim.get<uint64_t>();
      if (v != 0 && en.numel > (uint64_t{1} << 60) / v) Bad(path, w + "shape overflows");
      en.numel *= v;
      en.shape.push_back(v);
    }
    if (!off.is_array() || off.size() != 2 || !off[0].is_number_unsigned() ||
        !off[1].is_number_unsigned())
      Bad(path, w + "data_offsets is not [begin, end]");
    en.begin = off[0].get<uint64_t>();
    en.end = off[1].get<uint64_t>();
    const uint64_t bytes = en.numel * static_cast<uint64_t>(en.elem < 0 ? -en.elem : en.elem);
    if (en.begin > en.end || en.end > data_size)
      Bad(path, w + "data_offsets [" + std::to_string(en.begin) + ", " + std::to_string(en.end) +
                    ") outside the data area of " + std::to_string(data_size) + " bytes");
    if (en.end - en.begin != bytes)
      Bad(path, w + "data_offsets span " + std::to_string(en.end - en.begin) +
                    " bytes, shape and dtype need " + std::to_string(bytes));
    out.tensors[name] = std::move(en);
  }
  std::vector<const Entry*> order;
  for (const auto& entry : out.tensors) order.push_back(&entry.second);
  std::sort(order.begin(), order.end(),
            [](const Entry* a, const Entry* b) { return a->begin < b->begin || (a->begin == b->begin && a->end < b->end); });
  uint64_t pos = 0;
  for (const Entry* e : order) {
    if (e->begin != pos)
      Bad(path, "tensor '" + e->name + "' starts at data offset " + std::to_string(e->begin) +
                    ", expected " + std::to_string(pos) + " (overlap or hole)");
    pos = e->end;
  }
  if (pos != data_size)
    Bad(path, std::to_string(data_size - pos) + " bytes after the last tensor's data");
  return out;
}

}  // namespace ckpt

std::map<std::string, std::vector<float>> ImportSafetensorsMasters(const std::string& path,
                                                                   Env* env) {
  if (env == nullptr) env = Env::Default();
  std::unique_ptr<RandomAccessFile> f = env->NewRandomAccessFile(path);
  const ckpt::SafetensorsHeader header = ckpt::ReadSafetensorsHeader(*f, path);
  const uint64_t data_start = header.data_start;
  std::map<std::string, std::vector<float>> out;
  std::vector<uint16_t> half;
  for (const auto& [name, e] : header.tensors) {
    std::vector<float>& v = out[name];
    v.resize(e.numel);
    const uint64_t bytes = e.end - e.begin;
    if (e.elem == 4) {
      if (f->Read(data_start + e.begin, bytes, v.data()) != bytes)
        Bad(path, "tensor '" + e.name + "': short read");
    } else {
      half.resize(e.numel);
      if (f->Read(data_start + e.begin, bytes, half.data()) != bytes)
        Bad(path, "tensor '" + e.name + "': short read");
      for (uint64_t i = 0; i < e.numel; ++i)
        v[i] = e.elem == 2 ? num::Bf16ToF32(half[i]) : num::F16ToF32(half[i]);
    }
  }
  return out;
}

}  // namespace tandem
