// DecodeMasterF32: the fp32 master weight of a tensor in any master format.
#include "engine/fp_bits.h"
#include "engine/master_codec.h"
#include "tandem/checkpoint.h"
#include "tandem/error.h"

namespace tandem {
namespace {

template <typename V>
void Expect(const TensorSnapshot& t, const char* field, const V& v) {
  if (v.size() != t.numel)
    throw Error(ErrorKind::kInvalidArgument, "tensor '" + t.name + "': " + field + " has " +
                                                 std::to_string(v.size()) + " entries, expected " +
                                                 std::to_string(t.numel));
}

}  // namespace

std::vector<float> DecodeMasterF32(const TensorSnapshot& t, const StateFormats& f) {
  if (f.master == MasterFormat::kF32) {
    Expect(t, "master_f32", t.master_f32);
    return t.master_f32;
  }
  Expect(t, "master_bf16", t.master_bf16);
  std::vector<float> out(t.numel);
  switch (f.master) {
    case MasterFormat::kBF16:
      for (size_t i = 0; i < out.size(); ++i) out[i] = num::Bf16ToF32(t.master_bf16[i]);
      break;
    case MasterFormat::kBF16Ecc8:
      Expect(t, "ecc8", t.ecc8);
      for (size_t i = 0; i < out.size(); ++i) out[i] = num::DecodeEcc8(t.master_bf16[i], t.ecc8[i]);
      break;
    case MasterFormat::kBF16Ecc16:
      Expect(t, "ecc16", t.ecc16);
      for (size_t i = 0; i < out.size(); ++i)
        out[i] = num::DecodeEcc16(t.master_bf16[i], t.ecc16[i]);
      break;
    case MasterFormat::kF32: break;
  }
  return out;
}

}  // namespace tandem
