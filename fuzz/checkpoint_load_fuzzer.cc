// libFuzzer target for the checkpoint loader (docs/checkpoint_format.md, "Fuzzing").
//
// An input that starts with the header magic is a checkpoint file as is. Any other input is
// "manifest text, a zero byte, data bytes": the harness frames it into a file (header, the
// data at offset 32, the manifest at the next 64-byte boundary, footer) with valid header,
// manifest and footer CRCs, so that mutations reach the manifest parser and the section
// checks behind the CRCs instead of stopping at the first CRC. The file lies in an
// in-memory Env. Properties checked:
//  * LoadCheckpoint, VerifyCheckpoint and InspectCheckpoint either succeed or throw
//    tandem::Error (anything else escapes and libFuzzer reports it), with no sanitizer report;
//  * Verify passes exactly when Load succeeds, and Inspect succeeds whenever Load does;
//  * a loaded snapshot saves and loads back bit for bit.
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>

#include "checkpoint/crc.h"
#include "checkpoint/format.h"
#include "checkpoint/frame.h"
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
  if (a.tensors.size() != b.tensors.size() || a.step != b.step || !(a.formats == b.formats) ||
      a.metadata != b.metadata)
    return false;
  for (size_t i = 0; i < a.tensors.size(); ++i) {
    const auto& x = a.tensors[i];
    const auto& y = b.tensors[i];
    if (x.name != y.name || x.numel != y.numel || x.shape != y.shape || x.step != y.step ||
        !SameBytes(x.master_f32, y.master_f32) ||
        !SameBytes(x.master_bf16, y.master_bf16) || !SameBytes(x.ecc8, y.ecc8) ||
        !SameBytes(x.ecc16, y.ecc16) || !SameBytes(x.m_f32, y.m_f32) ||
        !SameBytes(x.v_f32, y.v_f32) || !SameBytes(x.m_codes, y.m_codes) ||
        !SameBytes(x.v_codes, y.v_codes) || !SameBytes(x.m_scales, y.m_scales) ||
        !SameBytes(x.v_scales, y.v_scales))
      return false;
  }
  return true;
}

std::string Frame(const uint8_t* data, size_t size) {
  namespace ck = tandem::ckpt;
  const std::string in(reinterpret_cast<const char*>(data), size);
  const size_t zero = in.find('\0');
  const std::string manifest = in.substr(0, zero);
  const std::string body = zero == std::string::npos ? "" : in.substr(zero + 1);
  const auto h = ck::EncodeHeader();
  std::string f(reinterpret_cast<const char*>(h.data()), h.size());
  f += body;
  f.append((ck::kAlignment - f.size() % ck::kAlignment) % ck::kAlignment, '\0');
  ck::Footer ft;
  ft.manifest_offset = f.size();
  ft.manifest_length = manifest.size();
  ft.manifest_crc = ck::SectionCrc(ck::SectionKind::kManifest, ck::kNoTensor, ck::Codec::kNone,
                                   manifest.size(), manifest.data(), manifest.size());
  f += manifest;
  ft.file_length = f.size() + ck::kFooterSize;
  const auto fb = ck::EncodeFooter(ft);
  f.append(reinterpret_cast<const char*>(fb.data()), fb.size());
  return f;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto env = tandem::NewMemEnv();
  {
    auto f = env->NewWritableFile("in");
    if (size >= 8 && memcmp(data, tandem::ckpt::kHeaderMagic, 8) == 0) {
      f->Append(data, size);
    } else {
      const std::string framed = Frame(data, size);
      f->Append(framed.data(), framed.size());
    }
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
