// DecodeMasterF32: the fp32 master weight of a tensor in any master format.
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
  if (f.master == MasterFormat::kBF16Ecc8) Expect(t, "ecc8", t.ecc8);
  if (f.master == MasterFormat::kBF16Ecc16) Expect(t, "ecc16", t.ecc16);
  std::vector<float> out(t.numel);
  for (size_t i = 0; i < out.size(); ++i)
    out[i] = num::DecodeMaster(f.master, nullptr, t.master_bf16.data(), t.ecc8.data(),
                               t.ecc16.data(), i);
  return out;
}

}  // namespace tandem
