// Byte-for-byte parity of StepSpanHost with ReferenceStep: every algorithm x master
// format x moment formats x gradient dtype x parameter dtype, spans of 0, 1, 31, 32, 33,
// 77 and 1000 elements, 5 steps (the q8 state evolves), for each ISA this CPU has (SVE at
// each vector length it can run at).
#include <gtest/gtest.h>

#include <initializer_list>

#include "cpu_simd/host_kernels.h"
#include "engine/reference_step.h"
#include "tests/cpu_simd/test_util.h"

namespace tandem::cpu::testing {
namespace {

constexpr int kSteps = 5;

unsigned char* AlignUp64(unsigned char* p) {
  return p + (64 - reinterpret_cast<uintptr_t>(p) % 64) % 64;
}
constexpr size_t kLengths[] = {0, 1, 31, 32, 33, 77, 1000};

// Runs kSteps steps of `c` with `f` on both sides (the host kernels with options `o`) and
// compares every array after each. param_dtype < 0: no parameter; alias: the parameter is
// the master's bf16.
void CheckParity(const HostKernelOptions& o, const AlgoCase& c, const StateFormats& f, DType gt,
                 int param_dtype, bool alias, size_t n, uint32_t seed, bool ftz_daz) {
  std::mt19937 rng(seed);
  const std::vector<float> w0 = RandomWeights(rng, n);
  TensorState ref(c.algo, c.h, f, w0.data(), n);
  TensorState got = ref;
  const DType pt = param_dtype < 0 ? DType::kF32 : static_cast<DType>(param_dtype);
  // Parameter buffers 64-byte aligned (the non-temporal store path) for even seeds,
  // 4 bytes off for odd ones (the ordinary store path).
  std::vector<unsigned char> store_ref(n * 4 + 128), store_got(n * 4 + 128);
  const size_t skew = seed % 2 ? 4 : 0;
  unsigned char* p_ref_ptr = AlignUp64(store_ref.data()) + skew;
  unsigned char* p_got_ptr = AlignUp64(store_got.data()) + skew;
  for (int t = 1; t <= kSteps; ++t) {
    const auto grad = RandomGrad(rng, n, gt);
    const StepScalars s = ComputeStepScalars(c.algo, c.h, c.lr, t, t == 3 ? 1.0 / 1024 : 0.5);
    void* pr = param_dtype < 0 ? nullptr : (alias ? (void*)ref.master_bf16.data() : p_ref_ptr);
    void* pg = param_dtype < 0 ? nullptr : (alias ? (void*)got.master_bf16.data() : p_got_ptr);
    ReferenceStep(s, ref.Span(0, n, grad.data(), gt, pr, pt));
    {
      ScopedCallerFlushToZero ftz(ftz_daz);
      StepSpanHost(s, got.Span(0, n, grad.data(), gt, pg, pt), o);
    }
    SCOPED_TRACE("step " + std::to_string(t));
    ExpectSameState(ref, got);
    const size_t pbytes = param_dtype < 0 ? 0 : n * DTypeSize(pt);
    ExpectSameBytes(std::vector<unsigned char>(p_ref_ptr, p_ref_ptr + pbytes),
                    std::vector<unsigned char>(p_got_ptr, p_got_ptr + pbytes), "param");
    if (::testing::Test::HasFailure()) return;
  }
}

// Each test runs on one thread at the SVE vector length of its target (kSve).
class Parity : public ::testing::TestWithParam<IsaTarget> {
 protected:
  void SetUp() override {
    if (GetParam().sve_bits != 0) {
      ASSERT_TRUE(vl_.ok()) << TargetName(GetParam());
    }
  }
  // The default options with the ISA under test.
  HostKernelOptions Options() const {
    HostKernelOptions o;
    o.isa = GetParam().isa;
    return o;
  }

 private:
  ScopedSveVectorLength vl_{GetParam().sve_bits};
};

void EveryCombination(const HostKernelOptions& o) {
  uint32_t seed = 1;
  for (const AlgoCase& c : AlgoCases()) {
    for (const StateFormats& f : FormatsFor(c)) {
      for (DType gt : {DType::kF32, DType::kBF16, DType::kF16}) {
        for (int pt = -1; pt < 3; ++pt) {
          for (size_t n : kLengths) {
            SCOPED_TRACE(std::string(c.name) + " " + Name(f) + " grad " + Name(gt) + " param " +
                         (pt < 0 ? "none" : Name(static_cast<DType>(pt))) + " n " +
                         std::to_string(n));
            CheckParity(o, c, f, gt, pt, false, n, seed++, false);
            if (::testing::Test::HasFailure()) return;
          }
        }
      }
    }
  }
}

TEST_P(Parity, EveryCombination) { EveryCombination(Options()); }

void ParamAliasesMasterBf16(const HostKernelOptions& o) {
  uint32_t seed = 1000;
  for (const AlgoCase& c : AlgoCases()) {
    for (const StateFormats& f : FormatsFor(c)) {
      if (f.master == MasterFormat::kF32) continue;
      SCOPED_TRACE(std::string(c.name) + " " + Name(f));
      CheckParity(o, c, f, DType::kBF16, static_cast<int>(DType::kBF16), true, 1000, seed++, false);
      if (::testing::Test::HasFailure()) return;
    }
  }
}

TEST_P(Parity, ParamAliasesMasterBf16) { ParamAliasesMasterBf16(Options()); }

TEST_P(Parity, IndependentOfCallerFtzDaz) {
  uint32_t seed = 2000;
  for (const AlgoCase& c : AlgoCases()) {
    for (const StateFormats& f : FormatsFor(c)) {
      SCOPED_TRACE(std::string(c.name) + " " + Name(f));
      CheckParity(Options(), c, f, DType::kF32, static_cast<int>(DType::kF16), false, 1000, seed++,
                  true);
      if (HasFailure()) return;
    }
  }
}

// Note [Two groups per iteration]: EveryCombination runs the default pairing mode (every
// q8 kernel paired); here modes kOff and kAllQ8 (kWithoutQ8Var runs one of the two in each
// kernel), on the dtypes with static instantiations
// (bf16/f32 gradient; no, aliased or bf16 parameter) and lengths with pairs, a single
// group after them and a partial tail (77 = 2 + 0.4 groups, 1000 = 31 + 0.25).
// Both pairing modes, with the other options of `base`; every algorithm and format,
// f32/bf16 gradients, no or a bf16 parameter (also aliasing the master), spans of the
// given lengths.
void EveryPairingMode(const HostKernelOptions& base,
                      std::initializer_list<size_t> lengths = {77, 1000}) {
  uint32_t seed = 3000;
  for (PairedGroups mode : {PairedGroups::kOff, PairedGroups::kAllQ8}) {
    HostKernelOptions o = base;
    o.paired_groups = mode;
    for (const AlgoCase& c : AlgoCases()) {
      for (const StateFormats& f : FormatsFor(c)) {
        for (DType gt : {DType::kF32, DType::kBF16}) {
          for (int pt : {-1, static_cast<int>(DType::kBF16)}) {
            for (size_t n : lengths) {
              SCOPED_TRACE("paired " + std::to_string(static_cast<int>(mode)) + " " + c.name + " " +
                           Name(f) + " grad " + Name(gt) + " param " + (pt < 0 ? "none" : "bf16") +
                           " n " + std::to_string(n));
              CheckParity(o, c, f, gt, pt, false, n, seed++, false);
              if (f.master != MasterFormat::kF32 && pt >= 0)
                CheckParity(o, c, f, gt, pt, true, n, seed++, false);
              if (::testing::Test::HasFailure()) return;
            }
          }
        }
      }
    }
  }
}

TEST_P(Parity, EveryPairingMode) { EveryPairingMode(Options()); }

// Note [VBMI momentum decode]: on a CPU with AVX512-VBMI the tests above run the AVX-512
// kernels with the VBMI decode (spans with a q8 momentum); here the same spans again with
// it switched off, i.e. the plain AVX-512 kernels that every other CPU runs.
TEST_P(Parity, WithoutVbmiDecode) {
  if (GetParam().isa != Isa::kAvx512) GTEST_SKIP() << "the VBMI decode is an AVX-512 path";
  if (!VbmiSupported()) GTEST_SKIP() << "no AVX512-VBMI on this CPU";
  HostKernelOptions o = Options();
  o.vbmi_decode = false;
  EveryCombination(o);
  if (!HasFailure()) ParamAliasesMasterBf16(o);
  if (!HasFailure()) EveryPairingMode(o);
}

// Note [Software prefetch]: prefetches change no bit, whatever the distance and the
// pairing mode; spans of 4133 elements (129 groups: an odd last group and a tail), long
// enough for the farthest distance (64 groups) to prefetch.
TEST_P(Parity, WithSoftwarePrefetch) {
  for (int groups : {8, 16, 32, 64}) {
    SCOPED_TRACE("prefetch " + std::to_string(groups) + " groups");
    HostKernelOptions o = Options();
    o.prefetch_groups = groups;
    EveryPairingMode(o, {4133});
    if (HasFailure()) break;
  }
}

INSTANTIATE_TEST_SUITE_P(SupportedIsas, Parity, ::testing::ValuesIn(SupportedTargets()),
                         [](const ::testing::TestParamInfo<IsaTarget>& i) {
                           return TargetName(i.param);
                         });

}  // namespace
}  // namespace tandem::cpu::testing
