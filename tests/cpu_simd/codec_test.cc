// Exhaustive checks of the code paths of the kernels that may be written otherwise than
// the reference (Note [Division-free decode] in cpu_simd/ops_avx512.h, and the compander
// of each ISA): every code value and every compander input of [0, ~1.008] must give the
// reference's bits, on each ISA (SVE at each vector length the CPU runs).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <sstream>
#include <string>
#include <vector>

#include <tbb/parallel_for.h>

#include "cpu_simd/span_kernels.h"
#include "engine/q8_codec.h"
#include "tests/cpu_simd/test_util.h"

namespace tandem::cpu::testing {
namespace {

struct Hooks {
  void (*code_values)(float*, float*);
  uint64_t (*compander_mismatches)(uint32_t, uint32_t);
};

Hooks HooksFor(Isa isa) {
  switch (isa) {
#if defined(__aarch64__)
    case Isa::kNeon:
      return {&CodeValuesNeon, &CompanderMismatchesNeon};
    case Isa::kSve:
      return {&CodeValuesSve, &CompanderMismatchesSve};
#else
    case Isa::kSse:
      return {&CodeValuesSse, &CompanderMismatchesSse};
    case Isa::kAvx2:
      return {&CodeValuesAvx2, &CompanderMismatchesAvx2};
    case Isa::kAvx512:
      return {&CodeValuesAvx512, &CompanderMismatchesAvx512};
#endif
    default:
      return {};
  }
}

// Each test runs on one thread at the SVE vector length of its target (kSve).
class Codec : public ::testing::TestWithParam<IsaTarget> {
 protected:
  void SetUp() override {
    if (GetParam().sve_bits != 0) {
      ASSERT_TRUE(vl_.ok()) << TargetName(GetParam());
    }
  }
  Hooks hooks() const { return HooksFor(GetParam().isa); }

 private:
  ScopedSveVectorLength vl_{GetParam().sve_bits};
};

TEST_P(Codec, EveryCodeValueIsTheReferenceQuotient) {
  float mom[256], var[256];
  hooks().code_values(mom, var);
  for (int c = -127; c <= 127; ++c) {
    const float want = num::MomentumCodeValue(c);
    EXPECT_EQ(0, std::memcmp(&want, &mom[c + 128], 4)) << "momentum code " << c;
  }
  for (int c = 0; c < 256; ++c) {
    const float want = num::VarianceCodeValue(c);
    EXPECT_EQ(0, std::memcmp(&want, &var[c], 4)) << "variance code " << c;
  }
}

// All 1.07e9 floats from +0 to 1.0078125 (a <= 1 up to a rounding of |m| * (1/s)).
TEST_P(Codec, CompanderMatchesDivisionForEveryInputUpToOne) {
  if (GetParam().isa != Isa::kAvx512) GTEST_SKIP() << "division is used directly on this ISA";
  EXPECT_EQ(hooks().compander_mismatches(0, 0x3F810000u), 0u);
}

// The compander hooks of the ISA of `t` (CompanderCodes, span_kernels.h).
using CodesHook = void (*)(const float*, size_t, int8_t*, int8_t*, uint8_t*);
CodesHook CodesHookFor(Isa isa) {
  switch (isa) {
#if defined(__aarch64__)
    case Isa::kNeon:
      return &CompanderCodesNeon;
    case Isa::kSve:
      return &CompanderCodesSve;
#else
    case Isa::kSse:
      return &CompanderCodesSse;
    case Isa::kAvx2:
      return &CompanderCodesAvx2;
    case Isa::kAvx512:
      return &CompanderCodesAvx512;
#endif
    default:
      return nullptr;
  }
}

// Note [Every compander input]: a group's codes take a = |m| * (1/scale) in [0, 1 + 2^-23]
// (Note [Scales in vector registers], ops_avx512.h). This test gives every such a, as
// m = a and m = -a at scale 1, to every ISA's momentum and variance encode and compares
// the codes with q8_codec.h's: the momentum compander over the 1.07e9 floats from +0 up
// to 1.0078125 (as CompanderMatchesDivisionForEveryInputUpToOne, above), the variance code
// up to 1 + 2^-23 (past it the AVX-512 code drops a clamp that cannot fire). The negative
// code is the positive one negated in the reference (EncodeMomentum's sign), so that is
// what it is compared with. Under emulation (TANDEM_EMULATED set: scripts/test-aarch64.sh),
// where every input would take hours, and in the sanitizer build, a sample instead: every
// input within 512 ulps of a rounding tie of either code (t = k + 1/2: where
// round-half-even and the other roundings differ), every input from 0.99609375 up (the
// clamps), and every 997th besides.
constexpr uint32_t kCompanderEnd = 0x3F810000u;  // 1.0078125
constexpr uint32_t kVarianceEnd = 0x3F800002u;   // past 1 + 2^-23

std::vector<uint32_t> CompanderSample() {
  std::vector<uint32_t> bits;
  auto around = [&](double center) {
    uint32_t c;
    const float f = static_cast<float>(center);
    std::memcpy(&c, &f, 4);
    for (uint32_t b = c - 512; b <= c + 512 && b < kCompanderEnd; ++b) bits.push_back(b);
  };
  for (int k = 0; k < 127; ++k) around((k + 0.5) / (253.5 - k));  // 254a / (1 + a) = k + 1/2
  for (int k = 0; k < 255; ++k) around((k + 0.5) / 255.0);        // 255a = k + 1/2
  for (uint32_t b = 0x3F7F0000u; b < kCompanderEnd; ++b) bits.push_back(b);
  for (uint32_t b = 0; b < kCompanderEnd; b += 997) bits.push_back(b);
  return bits;
}

// Compares every target's codes of the inputs [start, start + n) of `bits` (or of all
// floats, when bits is empty) with the reference's; "" or the first difference.
std::string CheckCompanderBlock(const std::vector<uint32_t>& bits, uint64_t start, size_t n,
                                const std::vector<IsaTarget>& targets) {
  constexpr size_t kBlock = 1 << 16;  // a multiple of every ISA's width
  std::vector<float> a(kBlock);
  std::vector<int8_t> want_m(kBlock), got_p(kBlock), got_n(kBlock);
  std::vector<uint8_t> want_v(kBlock), got_v(kBlock);
  for (size_t i = 0; i < kBlock; ++i) {
    const uint32_t b = i >= n         ? 0u
                       : bits.empty() ? static_cast<uint32_t>(start + i)
                                      : bits[start + i];
    std::memcpy(&a[i], &b, 4);
    want_m[i] = num::EncodeMomentum(a[i], 1.0f);
    want_v[i] = b < kVarianceEnd ? num::EncodeSqrtVariance(a[i], 1.0f) : 0;
  }
  for (const IsaTarget& t : targets) {
    ScopedSveVectorLength vl(t.sve_bits);
    CodesHookFor(t.isa)(a.data(), kBlock, got_p.data(), got_n.data(), got_v.data());
    for (size_t i = 0; i < n; ++i) {
      uint32_t b;
      std::memcpy(&b, &a[i], 4);
      const bool v_ok = b >= kVarianceEnd || got_v[i] == want_v[i];
      if (got_p[i] == want_m[i] && got_n[i] == -want_m[i] && v_ok) continue;
      std::ostringstream os;
      os << TargetName(t) << ": a = " << a[i] << " (bits 0x" << std::hex << b << std::dec
         << "): momentum codes " << +got_p[i] << " / " << +got_n[i] << ", variance code "
         << +got_v[i] << "; the reference's " << +want_m[i] << " / " << -want_m[i] << ", "
         << +want_v[i];
      return os.str();
    }
  }
  return "";
}

// A part of the compander check, for running it in pieces (several processes or machines;
// docs/building.md, "The exhaustive compander check in shards"). TANDEM_EXHAUSTIVE_SHARD=i/n
// (0 <= i < n) checks the blocks k with k % n == i, so that the n shards together check
// every input once; TANDEM_EXHAUSTIVE_TARGET=NAME (TargetName: neon, sve128, sve256, ...)
// checks only that kernel build, which must be supported. Unset: every block, every target.
struct CompanderShard {
  uint64_t index = 0, count = 1;
  std::string target;  // "" for every supported target
  std::string error;   // why the variables cannot be used; "" when they can
};

CompanderShard CompanderShardFromEnv() {
  CompanderShard s;
  if (const char* v = std::getenv("TANDEM_EXHAUSTIVE_SHARD")) {
    unsigned long long i = 0, n = 0;
    char end = 0;
    if (std::sscanf(v, "%llu/%llu%c", &i, &n, &end) != 2 || n == 0 || i >= n) {
      s.error = std::string("TANDEM_EXHAUSTIVE_SHARD='") + v + "' is not i/n with 0 <= i < n";
      return s;
    }
    s.index = i;
    s.count = n;
  }
  if (const char* v = std::getenv("TANDEM_EXHAUSTIVE_TARGET")) s.target = v;
  return s;
}

TEST(CodecEveryIsa, CompanderCodesMatchReferenceForEveryInput) {
  // The sanitizer build looks for memory errors, which the sample finds as well.
#if defined(__SANITIZE_ADDRESS__)
  const bool sampled = true;
#else
  const bool sampled = std::getenv("TANDEM_EMULATED") != nullptr;
#endif
  const CompanderShard shard = CompanderShardFromEnv();
  ASSERT_EQ(shard.error, "");
  std::vector<IsaTarget> targets = SupportedTargets();
  if (!shard.target.empty()) {
    std::vector<IsaTarget> named;
    for (const IsaTarget& t : targets)
      if (TargetName(t) == shard.target) named.push_back(t);
    ASSERT_EQ(named.size(), 1u) << "TANDEM_EXHAUSTIVE_TARGET=" << shard.target
                                << " is not a kernel build this CPU runs";
    targets = named;
  }
  const std::vector<uint32_t> bits = sampled ? CompanderSample() : std::vector<uint32_t>();
  const uint64_t total = sampled ? bits.size() : kCompanderEnd;
  constexpr uint64_t kBlock = 1 << 16;
  const uint64_t blocks = (total + kBlock - 1) / kBlock;
  // This shard's blocks: shard.index, shard.index + shard.count, ...
  const uint64_t mine = blocks / shard.count + (shard.index < blocks % shard.count ? 1 : 0);
  std::mutex mu;
  std::string first;
  uint64_t checked = 0;
  // Blocks in parallel: each task sets its own thread's SVE vector length.
  tbb::parallel_for(uint64_t{0}, mine, [&](uint64_t j) {
    const uint64_t k = shard.index + j * shard.count;
    const size_t n = static_cast<size_t>(std::min(kBlock, total - k * kBlock));
    const std::string bad = CheckCompanderBlock(bits, k * kBlock, n, targets);
    std::lock_guard<std::mutex> lock(mu);
    checked += n;
    if (!bad.empty() && first.empty()) first = bad;
  });
  EXPECT_EQ(first, "");
  std::string names;
  for (const IsaTarget& t : targets) {
    if (!names.empty()) names += ' ';
    names += TargetName(t);
  }
  std::printf("compander inputs checked on %zu ISA builds (%s): %llu of %llu%s", targets.size(),
              names.c_str(), static_cast<unsigned long long>(checked),
              static_cast<unsigned long long>(total), sampled ? " (sampled: TANDEM_EMULATED)" : "");
  if (shard.count > 1)
    std::printf(" (shard %llu/%llu)", static_cast<unsigned long long>(shard.index),
                static_cast<unsigned long long>(shard.count));
  std::printf("\n");
}

#if defined(__x86_64__)  // the AVX-512 paths
// Note [Scales in vector registers]: the vector bf16 ceiling and 1/scale equal
// q8_codec.h's GroupScaleBits and 1.0f / scale for every binade and every kind of lower
// half (zero, one, the tie 0x8000, all ones: the carry cases), for zero, subnormals,
// FLT_MIN and Inf, and for a stride through all other non-negative floats.
TEST(CodecAvx512, GroupScaleInVectorRegistersMatchesReference) {
  if (!IsaSupported(Isa::kAvx512)) GTEST_SKIP() << "no AVX-512 on this CPU";
  auto check = [](uint32_t bits) {
    float amax;
    std::memcpy(&amax, &bits, 4);
    uint16_t got_bits = 0;
    float got_inv = 0.0f;
    GroupScaleAvx512(amax, &got_bits, &got_inv);
    const uint16_t want_bits = num::GroupScaleBits(amax);
    const float want_inv = 1.0f / num::Bf16ToF32(want_bits);
    ASSERT_EQ(got_bits, want_bits) << "amax bits 0x" << std::hex << bits;
    ASSERT_EQ(0, std::memcmp(&got_inv, &want_inv, 4)) << "amax bits 0x" << std::hex << bits;
  };
  for (uint32_t hi = 0; hi <= 0x7F80u; ++hi)
    for (uint32_t lo : {0x0000u, 0x0001u, 0x7FFFu, 0x8000u, 0x8001u, 0xFFFFu})
      if ((hi << 16 | lo) <= 0x7F800000u) check(hi << 16 | lo);
  for (uint64_t b = 0; b <= 0x7F800000u; b += 65521) check(static_cast<uint32_t>(b));
}

// Note [VBMI momentum decode]: the byte-plane lookups of one and of two groups give every
// code the reference's value, and code -128 (never written by the encoder) the per-register
// path's -0.0 (|-128| reads table entry 0 there too).
TEST(CodecAvx512Vbmi, GroupDecodeGivesEveryCodeValue) {
  if (!VbmiSupported()) GTEST_SKIP() << "no AVX512-VBMI on this CPU";
  float got[256];
  GroupCodeValuesAvx512Vbmi(got);
  for (int c = -127; c <= 127; ++c) {
    const float want = num::MomentumCodeValue(c);
    EXPECT_EQ(0, std::memcmp(&want, &got[c + 128], 4)) << "momentum code " << c;
  }
  const float minus_zero = -0.0f;
  EXPECT_EQ(0, std::memcmp(&minus_zero, &got[0], 4)) << "momentum code -128";
}

// Note [VBMI group I/O]: the VBMI group loads (bf16 gradient; bf16 + ecc8 master) and the
// master encode and stores give the per-register AVX-512 bits for every bf16 with every
// ecc8 byte, and for master values with every upper half and, per pass, lower halves at
// and around the bf16 and ecc8 rounding ties (where the ecc8 saturates) or pseudo-random.
TEST(CodecAvx512Vbmi, GroupIoMatchesPerRegisterForms) {
  if (!VbmiSupported()) GTEST_SKIP() << "no AVX512-VBMI on this CPU";
  constexpr uint32_t kLows[] = {0x0000, 0x0001, 0x007F, 0x0080, 0x0081, 0x017F, 0x0180, 0x0181,
                                0x7FFF, 0x8000, 0x8001, 0x807F, 0x8080, 0x8180, 0xFF7F, 0xFFFF};
  constexpr size_t n = 65536;
  std::vector<uint16_t> bf16(n);
  std::vector<int8_t> ecc(n);
  std::vector<float> w(n);
  for (uint32_t k = 0; k < 256; ++k) {
    for (uint32_t i = 0; i < n; ++i) {
      bf16[i] = static_cast<uint16_t>(i);
      ecc[i] = static_cast<int8_t>(static_cast<uint8_t>(i * 7 + k));
      const uint32_t low = k < 16 ? kLows[k] : (i * 2654435761u + k * 40503u) >> 16;
      const uint32_t bits = i << 16 | low;
      std::memcpy(&w[i], &bits, 4);
    }
    ASSERT_EQ(GroupIoMismatchesAvx512Vbmi(bf16.data(), ecc.data(), w.data(), n), 0u)
        << "pass " << k;
  }
}
#endif

INSTANTIATE_TEST_SUITE_P(SupportedIsas, Codec, ::testing::ValuesIn(SupportedTargets()),
                         [](const ::testing::TestParamInfo<IsaTarget>& i) {
                           return TargetName(i.param);
                         });

}  // namespace
}  // namespace tandem::cpu::testing
