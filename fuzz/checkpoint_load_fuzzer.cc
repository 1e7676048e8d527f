// libFuzzer target for the checkpoint loader (docs/checkpoint_format.md, "Fuzzing").
//
// The input bytes are a checkpoint file in an in-memory Env. Properties checked:
//  * LoadCheckpoint, VerifyCheckpoint and InspectCheckpoint either succeed or throw
//    tandem::Error (anything else escapes and libFuzzer reports it), with no sanitizer report;
//  * Verify passes exactly when Load succeeds, and Inspect succeeds whenever Load does;
//  * a loaded snapshot saves and loads back bit for bit.
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>

#include "tandem/checkpoint.h"
#include "tandem/error.h"

namespace {

void Check(bool ok, const char* what) {
  if (!ok) {
    fprintf(stderr, "property failed: %s\n", what);
    __builtin_trap();
  }
}

template <typename V>
bool SameBytes(const V& a, const V& b) {
  return a.size() == b.size() && (a.empty() || memcmp(a.data(), b.data(), a.size() * sizeof(a[0])) == 0);
}

bool SameBits(const tandem::OptimizerSnapshot& a, const tandem::OptimizerSnapshot& b) {
  if (a.tensors.size() != b.tensors.size() || a.step != b.step || !(a.formats == b.formats)) return false;
  for (size_t i = 0; i < a.tensors.size(); ++i) {
    const auto& x = a.tensors[i];
    const auto& y = b.tensors[i];
    if (x.name != y.name || x.numel != y.numel || !SameBytes(x.master_f32, y.master_f32) ||
        !SameBytes(x.master_bf16, y.master_bf16) || !SameBytes(x.ecc8, y.ecc8) ||
        !SameBytes(x.ecc16, y.ecc16) || !SameBytes(x.m_f32, y.m_f32) ||
        !SameBytes(x.v_f32, y.v_f32) || !SameBytes(x.m_codes, y.m_codes) ||
        !SameBytes(x.v_codes, y.v_codes) || !SameBytes(x.m_scales, y.m_scales) ||
        !SameBytes(x.v_scales, y.v_scales))
      return false;
  }
  return true;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto env = tandem::NewMemEnv();
  {
    auto f = env->NewWritableFile("in");
    f->Append(data, size);
    f->Close();
  }
  bool loaded = false;
  tandem::OptimizerSnapshot s;
  try {
    s = tandem::LoadCheckpoint("in", env.get());
    loaded = true;
  } catch (const tandem::Error&) {
  }
  const tandem::VerifyReport r = tandem::VerifyCheckpoint("in", env.get());
  Check(r.ok == loaded, "VerifyCheckpoint agrees with LoadCheckpoint");
  try {
    (void)tandem::InspectCheckpoint("in", env.get());
  } catch (const tandem::Error&) {
    Check(!loaded, "InspectCheckpoint succeeds when LoadCheckpoint does");
  }
  if (loaded) {
    tandem::SaveCheckpoint(s, "out", {}, env.get());
    Check(SameBits(tandem::LoadCheckpoint("out", env.get()), s), "save/load round trip");
  }
  return 0;
}
