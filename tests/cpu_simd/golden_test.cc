// The same bytes on every architecture: a fixed workload whose inputs are made from
// integers only (no libm, no <random> distributions, whose floating point differs between
// x86-64 and aarch64: long double is 80-bit there and 128-bit here) is stepped by the
// reference and by every ISA this CPU has, and the digest of every byte written must be
// the one recorded on x86-64. With the per-machine parity tests this makes NEON and SVE
// byte-identical to SSE, AVX2 and AVX-512, not only each to its own machine's reference.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "cpu_simd/host_kernels.h"
#include "engine/reference_step.h"
#include "tests/cpu_simd/test_util.h"

namespace tandem::cpu::testing {
namespace {

// The digest of the workload's bytes, from the reference on x86-64 (every x86 ISA gives
// it too). Recorded 2026-11-29; a change of any step's bits changes it.
constexpr uint64_t kGoldenDigest = 0x3D87DDCF1CEEA1DCull;

// SplitMix64: integers only.
uint64_t Mix(uint64_t& s) {
  uint64_t z = (s += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// A float from bits: magnitudes 2^-30 .. 2^3, some zeros, negative zeros and denormals.
float BitsFloat(uint64_t& s) {
  const uint64_t r = Mix(s);
  const uint32_t kind = r % 50;
  uint32_t bits;
  if (kind == 0)
    bits = 0;
  else if (kind == 1)
    bits = 0x80000000u;
  else if (kind == 2)
    bits = static_cast<uint32_t>(r >> 16) & 0x807FFFFFu;  // denormal
  else
    bits = static_cast<uint32_t>((r >> 8) & 0x807FFFFFu) | ((97u + (r >> 40) % 33u) << 23);
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

void Fnv(uint64_t& h, const void* p, size_t n) {
  const auto* b = static_cast<const unsigned char*>(p);
  for (size_t i = 0; i < n; ++i) h = (h ^ b[i]) * 0x100000001B3ull;
}
template <class T>
void Fnv(uint64_t& h, const std::vector<T>& v) {
  Fnv(h, v.data(), v.size() * sizeof(T));
}

// Betas whose powers are exact in double (7/8 and 1 - 2^-10), so that the step scalars
// do not depend on the machine's pow.
std::vector<AlgoCase> GoldenCases() {
  HyperParams adam = Hyper(0.9990234375, 0.01, 0, 0, false);
  adam.beta1 = 0.875;
  HyperParams lion = Hyper(0.9990234375, 0.1, 0, 0, false);
  lion.beta1 = 0.875;
  return {{"adamw", Algorithm::kAdamW, adam, 1e-3},
          {"adam_l2", Algorithm::kAdam, adam, 1e-3},
          {"lion", Algorithm::kLion, lion, 1e-4},
          {"sgd_momentum", Algorithm::kSGD, Hyper(0, 0.01, 0.875, 0.125, false), 0.125},
          {"sgd_nesterov", Algorithm::kSGD, Hyper(0, 0.01, 0.875, 0.0, true), 0.125}};
}

// Steps the workload with `o` (the reference when null) and returns its digest.
uint64_t WorkloadDigest(const HostKernelOptions* o) {
  constexpr size_t n = 1000;  // 31 groups and a partial one
  uint64_t h = 0xCBF29CE484222325ull, seed = 46;
  for (const AlgoCase& c : GoldenCases()) {
    for (const StateFormats& f : FormatsFor(c)) {
      for (DType gt : {DType::kBF16, DType::kF32, DType::kF16}) {
        for (DType pt : {DType::kBF16, DType::kF16}) {
          std::vector<float> w0(n);
          for (float& x : w0) x = BitsFloat(seed);
          TensorState st(c.algo, c.h, f, w0.data(), n);
          std::vector<uint16_t> param(n);
          for (int t = 1; t <= 3; ++t) {
            std::vector<unsigned char> grad(n * DTypeSize(gt));
            for (size_t i = 0; i < n; ++i) {
              const float g = BitsFloat(seed);
              if (gt == DType::kF32) {
                std::memcpy(grad.data() + 4 * i, &g, 4);
              } else {
                const uint16_t b = gt == DType::kBF16 ? num::F32ToBf16(g) : num::F32ToF16(g);
                std::memcpy(grad.data() + 2 * i, &b, 2);
              }
            }
            const StepScalars s = ComputeStepScalars(c.algo, c.h, c.lr, t, t == 2 ? 0.25 : 1.0);
            const StepSpan span = st.Span(0, n, grad.data(), gt, param.data(), pt);
            if (o == nullptr)
              ReferenceStep(s, span);
            else
              StepSpanHost(s, span, *o);
          }
          Fnv(h, st.master_f32), Fnv(h, st.master_bf16), Fnv(h, st.ecc8), Fnv(h, st.ecc16);
          Fnv(h, st.m_f32), Fnv(h, st.v_f32), Fnv(h, st.m_codes), Fnv(h, st.v_codes);
          Fnv(h, st.m_scales), Fnv(h, st.v_scales), Fnv(h, param);
        }
      }
    }
  }
  return h;
}

TEST(Golden, ReferenceGivesTheX86Bytes) {
  EXPECT_EQ(WorkloadDigest(nullptr), kGoldenDigest) << std::hex << "0x" << WorkloadDigest(nullptr);
}

TEST(Golden, EveryIsaGivesTheX86Bytes) {
  for (const IsaTarget& t : SupportedTargets()) {
    ScopedSveVectorLength vl(t.sve_bits);
    const HostKernelOptions o = OptionsFor(t.isa);
    EXPECT_EQ(WorkloadDigest(&o), kGoldenDigest) << TargetName(t);
  }
}

}  // namespace
}  // namespace tandem::cpu::testing
