// The torch.optim-style layout of an optimizer state in one safetensors file, used by
// `tandem-ckpt to-torch` and `from-torch` (docs/checkpoint_tool.md, "torch layout").
//
// For each parameter N, all F32 with N's shape: `N` (fp32 master), and per algorithm
// `N.exp_avg` + `N.exp_avg_sq` (AdamW, Adam), `N.exp_avg` (Lion), `N.momentum_buffer`
// (SGD with momentum). __metadata__ (strings): "format": "pt", "tandem_algorithm",
// "tandem_step", and JSON lists "tandem_names", "tandem_tensor_steps",
// "tandem_tensor_groups", "tandem_groups" (HyperParams objects), "tandem_param_dtypes",
// "tandem_grad_dtypes", then "tandem_formats" (informational) and "tandem_metadata" (the
// snapshot's metadata verbatim). Thread-compatible free functions.
#pragma once

#include <optional>
#include <string>

#include "tandem/checkpoint.h"

namespace tandem::tool {

// Writes s's state decoded to fp32 (ConvertSnapshot) in the torch layout to `path`,
// atomically (path + ".tmp", then rename). Throws Error(kInvalidArgument) if a name is
// reserved or collides with another parameter's state name, Error(kIO) on I/O failure.
void WriteTorchState(const OptimizerSnapshot& s, const std::string& path);

// What from-torch uses where the file's __metadata__ lacks a key.
struct TorchDefaults {
  std::optional<Algorithm> algorithm;  // required unless the file has tandem_algorithm
  HyperParams hyper;                   // the one group when there is no tandem_groups
  DType param_dtype = DType::kF32;     // when there is no tandem_param_dtypes
  DType grad_dtype = DType::kF32;      // when there is no tandem_grad_dtypes
};

// Reads a torch-layout file into an all-fp32 snapshot (formats f32). Metadata keys are
// optional: the algorithm then comes from `d`, one group of d.hyper, step 0 (or
// tandem_step), each tensor's step = the global step, parameters in the order of their
// data in the file. A 1-D or 0-D parameter gets no shape (one dimension). Every tensor
// must be a parameter or a state the algorithm keeps of one. Throws Error(kCorruption)
// for a malformed file, Error(kInvalidArgument) for a missing or extra tensor, a shape
// mismatch or a bad metadata value, and Error(kIO).
OptimizerSnapshot ReadTorchState(const std::string& path, const TorchDefaults& d);

}  // namespace tandem::tool
