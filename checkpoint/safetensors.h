// Internal: safetensors files (format: https://github.com/huggingface/safetensors,
// "Format"): writing F32 tensors and reading a checked header, shared by
// Export/ImportSafetensorsMasters and tandem-ckpt's torch layout
// (tools/ckpt/torch_layout.h). Thread-compatible free functions.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "tandem/checkpoint.h"

namespace tandem::ckpt {

// One F32 tensor of a safetensors file being written.
struct SafetensorsTensor {
  std::string name;
  std::vector<uint64_t> shape;  // its product is numel
  uint64_t numel = 0;
  // The tensor's numel values, asked for once, in file order, while the data is written.
  // They may live in `scratch` (e.g. decoded there), which the writer keeps until the
  // next tensor's call.
  std::function<std::span<const float>(std::vector<float>* scratch)> values;
};

// The header of a file holding `tensors`: a JSON object of "__metadata__" (`metadata`'s
// string pairs, in order) and one entry per tensor, in order ({"dtype": "F32", "shape",
// "data_offsets"}, the data back to back from offset 0), padded with spaces so that the
// data starts 8-byte aligned. The caller checks that names are unique and none is
// "__metadata__" (naming its own rule in the error). Throws nlohmann::json::exception if a
// name or a value is not valid UTF-8.
std::string SafetensorsF32Header(const std::vector<std::pair<std::string, std::string>>& metadata,
                                 const std::vector<SafetensorsTensor>& tensors);

// Writes the 8-byte little-endian header length, `header` (from SafetensorsF32Header for
// the same tensors) and each tensor's values to `path` with WriteFileAtomically (synced).
// Throws Error(kInvalidArgument) if a tensor yields other than numel values, Error(kIO);
// `path` is untouched then.
void WriteSafetensorsFile(const std::string& header, const std::vector<SafetensorsTensor>& tensors,
                          const std::string& path, Env* env);

// One tensor entry of a safetensors header, checked.
struct SafetensorsEntry {
  std::string name;
  int elem = 0;  // 4 = F32, 2 = BF16, -2 = F16
  std::vector<uint64_t> shape;
  uint64_t begin = 0, end = 0;  // data_offsets, relative to the data area
  uint64_t numel = 1;           // the product of shape
};

struct SafetensorsHeader {
  std::map<std::string, std::string> metadata;      // __metadata__, empty where absent
  std::map<std::string, SafetensorsEntry> tensors;  // by name
  uint64_t data_start = 0;                          // file offset of the data area
};

// Reads and checks the header of safetensors file `f`, named `path` in errors: its
// length, JSON, __metadata__ (string values), each entry's dtype (F32, BF16, F16), shape
// and data_offsets (inside the data area, matching shape and dtype), and that the data
// areas neither overlap nor leave holes. Reads no tensor data. Throws
// Error(kCorruption) naming the file and the entry at fault, or Error(kIO).
SafetensorsHeader ReadSafetensorsHeader(const RandomAccessFile& f, const std::string& path);

}  // namespace tandem::ckpt
