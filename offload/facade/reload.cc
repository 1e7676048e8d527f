// HybridOptimizer::ReloadParams: the parameter is the source of truth. After the caller
// wrote a parameter between steps, its master is re-derived from it (include/tandem/
// optimizer.h states the contract; docs/python.md says what tandem.torch detects).
#include <tbb/parallel_for.h>

#include <cstring>
#include <string>

#include "engine/dtype_io.h"
#include "engine/fp_bits.h"
#include "engine/grain.h"
#include "engine/master_codec.h"
#include "offload/facade/impl.h"
#include "tandem/error.h"

namespace tandem {
namespace {

// Note [What the master gives the parameter]: the bits every kernel writes to the
// parameter after an update. A bf16 parameter with a bf16-based master is the master's
// bf16 array itself (aliased, or uploaded from it); any other pairing is the decoded
// master converted to the parameter's dtype.
bool ParamMatchesMaster(const TensorSnapshot& ts, MasterFormat f, const uint8_t* raw, size_t i) {
  const DType d = ts.param_dtype;
  if (d == DType::kBF16 && f != MasterFormat::kF32)
    return reinterpret_cast<const uint16_t*>(raw)[i] == ts.master_bf16[i];
  const float w = num::DecodeMaster(f, ts.master_f32.data(), ts.master_bf16.data(), ts.ecc8.data(),
                                    ts.ecc16.data(), i);
  uint8_t expect[4] = {0, 0, 0, 0};
  num::StoreFromF32(expect, d, 0, w);
  return std::memcmp(expect, raw + i * DTypeSize(d), DTypeSize(d)) == 0;
}

// Element i of the master takes the parameter's value (correction reset).
void EncodeFromParam(TensorSnapshot& ts, MasterFormat f, float w, size_t i) {
  switch (f) {
    case MasterFormat::kF32:
      ts.master_f32[i] = w;
      break;
    case MasterFormat::kBF16:
      ts.master_bf16[i] = num::F32ToBf16(w);
      break;
    case MasterFormat::kBF16Ecc8:
      num::EncodeEcc8(w, &ts.master_bf16[i], &ts.ecc8[i]);
      break;
    case MasterFormat::kBF16Ecc16:
      num::EncodeEcc16(w, &ts.master_bf16[i], &ts.ecc16[i]);
      break;
  }
}

}  // namespace

void HybridOptimizer::Impl::ReloadParams(std::span<const size_t> tensors) {
  RequireNoBegunStep("ReloadParams");
  for (size_t t : tensors)
    if (t >= specs_.size())
      throw Error(ErrorKind::kInvalidArgument, "ReloadParams: tensor index " + std::to_string(t) +
                                                   " of " + std::to_string(specs_.size()));
  Quiesce("(reload: waiting for the caller's writes)");
  for (size_t t : tensors) {
    const TensorSpec& s = specs_[t];
    const MasterFormat f = formats_[t].master;
    if (s.numel == 0) continue;
    const size_t n = s.numel;
    std::vector<uint8_t> raw(n * DTypeSize(s.param_dtype));
    CopyOut(raw.data(), s.param, raw.size(), gpu());
    TensorSnapshot ts = ReadTensorState(t, /*masters_only=*/true);
    // The hot prefix of a bf16 parameter with a bf16+ecc master *is* the master's bf16
    // array: which elements the caller changed cannot be told, so every correction there
    // is reset (the master becomes the parameter exactly). Elsewhere the master is
    // compared element by element with the parameter it gives.
    // The streamed elements that follow the prefix alias it the same way.
    bool alias = false;
    for (const auto& e : executors_.all()) alias = alias || e->MasterIsParam(t);
    const uint64_t aliased =
        alias ? placement_.tensors[t].device_count + placement_.tensors[t].stream_count : 0;
    driver_.Execute([&] {  // on the optimizer's own (pinned) threads
      tbb::parallel_for(tbb::blocked_range<size_t>(0, n, kGrainElements),
                        [&](const tbb::blocked_range<size_t>& r) {
                          for (size_t i = r.begin(); i < r.end(); ++i) {
                            if (i < aliased) {
                              if (!ts.ecc8.empty()) ts.ecc8[i] = 0;
                              if (!ts.ecc16.empty()) ts.ecc16[i] = 0;
                            } else if (!ParamMatchesMaster(ts, f, raw.data(), i)) {
                              EncodeFromParam(ts, f, num::LoadAsF32(raw.data(), s.param_dtype, i),
                                              i);
                            }
                          }
                        });
    });
    WriteTensorState(t, ts, /*masters_only=*/true);
  }
}

}  // namespace tandem
