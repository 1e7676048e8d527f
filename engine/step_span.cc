#include "engine/step_span.h"

#include <string>

#include "tandem/error.h"

namespace tandem {
namespace {

[[noreturn]] void Fail(const char* what, const std::string& msg) {
  throw Error(ErrorKind::kInvalidArgument, std::string(what) + ": " + msg);
}

bool ValidDType(DType t) { return t == DType::kF32 || t == DType::kBF16 || t == DType::kF16; }

// `need` says whether the pointer must be set (true) or must be null (false).
void Expect(const char* what, const char* field, const void* p, bool need, size_t n) {
  if (need && n > 0 && p == nullptr) Fail(what, std::string(field) + " is null");
  if (!need && p != nullptr)
    Fail(what, std::string(field) + " is set but unused by this format/algorithm");
}

void ExpectMoment(const char* what, const char* name, const MomentSpan& ms, bool used,
                  MomentFormat f, size_t n) {
  const std::string base(name);
  Expect(what, (base + ".f32").c_str(), ms.f32, used && f == MomentFormat::kF32, n);
  Expect(what, (base + ".codes").c_str(), ms.codes, used && f == MomentFormat::kQ8, n);
  Expect(what, (base + ".scales").c_str(), ms.scales, used && f == MomentFormat::kQ8, n);
}

}  // namespace

void ValidateStepSpan(const StepScalars& s, const StepSpan& sp, const char* what) {
  const StateFormats& f = sp.formats;
  if (static_cast<unsigned>(s.algo) > static_cast<unsigned>(Algorithm::kSGD))
    Fail(what, "unknown algorithm value " + std::to_string(static_cast<unsigned>(s.algo)));
  if (static_cast<unsigned>(f.master) > static_cast<unsigned>(MasterFormat::kBF16Ecc16))
    Fail(what, "unknown master format value " + std::to_string(static_cast<unsigned>(f.master)));
  if (static_cast<unsigned>(f.momentum) > static_cast<unsigned>(MomentFormat::kQ8))
    Fail(what,
         "unknown momentum format value " + std::to_string(static_cast<unsigned>(f.momentum)));
  if (static_cast<unsigned>(f.variance) > static_cast<unsigned>(MomentFormat::kQ8))
    Fail(what,
         "unknown variance format value " + std::to_string(static_cast<unsigned>(f.variance)));
  if (!ValidDType(sp.grad_dtype)) Fail(what, "unknown gradient dtype");
  if (!ValidDType(sp.param_dtype)) Fail(what, "unknown parameter dtype");

  const bool adam = s.algo == Algorithm::kAdamW || s.algo == Algorithm::kAdam;
  const bool has_m = s.has_momentum != 0;
  if (!adam && f.variance != MomentFormat::kF32)
    Fail(what, std::string("variance format ") + Name(f.variance) + " given, but " +
                   Name(s.algo) + " keeps no second moment");
  if (!has_m && f.momentum != MomentFormat::kF32)
    Fail(what, std::string("momentum format ") + Name(f.momentum) +
                   " given, but sgd with momentum 0 keeps no momentum buffer");

  Expect(what, "grad", sp.grad, true, sp.n);
  Expect(what, "master.f32", sp.master.f32, f.master == MasterFormat::kF32, sp.n);
  Expect(what, "master.bf16", sp.master.bf16, f.master != MasterFormat::kF32, sp.n);
  Expect(what, "master.ecc8", sp.master.ecc8, f.master == MasterFormat::kBF16Ecc8, sp.n);
  Expect(what, "master.ecc16", sp.master.ecc16, f.master == MasterFormat::kBF16Ecc16, sp.n);
  ExpectMoment(what, "m", sp.m, has_m, f.momentum, sp.n);
  ExpectMoment(what, "v", sp.v, adam, f.variance, sp.n);
}

}  // namespace tandem
