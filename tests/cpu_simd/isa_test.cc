// ISA selection and the resolution of HostKernelOptions: names, choosing an ISA, errors,
// and how each tuning field is applied.
#include <gtest/gtest.h>

#include <string>
#include <utility>

#if defined(__aarch64__)
#include <sys/auxv.h>
#endif

#include "cpu_simd/host_kernels.h"
#include "cpu_simd/span_kernels.h"
#include "engine/reference_step.h"
#include "tandem/error.h"
#include "tests/cpu_simd/test_util.h"

namespace tandem::cpu::testing {
namespace {

TEST(Isa, Names) {
  EXPECT_STREQ(IsaName(Isa::kSse), "sse");
  EXPECT_STREQ(IsaName(Isa::kAvx2), "avx2");
  EXPECT_STREQ(IsaName(Isa::kAvx512), "avx512");
  EXPECT_STREQ(IsaName(Isa::kNeon), "neon");
  EXPECT_STREQ(IsaName(Isa::kSve), "sve");
  for (Isa i : kAllIsas) EXPECT_EQ(ParseIsa(IsaName(i)), i);
  try {
    ParseIsa("avx1024");
    FAIL() << "ParseIsa accepted an unknown name";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kInvalidArgument);
    EXPECT_NE(std::string(e.what()).find("avx1024"), std::string::npos) << e.what();
  }
}

TEST(Isa, BaselineSupportedAndBestIsSupported) {
  EXPECT_TRUE(IsaSupported(BaselineIsa()));
  EXPECT_TRUE(IsaSupported(BestIsa()));
  EXPECT_EQ(Resolve({}).isa, BestIsa());
}

// The kernel entry point of each ISA of this build's architecture.
SpanKernel KernelOf(Isa isa) {
  switch (isa) {
#if defined(__aarch64__)
    case Isa::kNeon:
      return &StepSpanNeon;
    case Isa::kSve:
      return &StepSpanSve;
#else
    case Isa::kSse:
      return &StepSpanSse;
    case Isa::kAvx2:
      return &StepSpanAvx2;
    case Isa::kAvx512:
      return &StepSpanAvx512;
#endif
    default:
      return nullptr;
  }
}

// Each supported ISA, asked for, is the one whose kernel runs.
TEST(Isa, ForceEverySupportedIsa) {
  for (Isa i : SupportedIsas()) {
    EXPECT_EQ(Resolve(OptionsFor(i)).isa, i);
    EXPECT_EQ(ResolveHostKernel(OptionsFor(i)).run, KernelOf(i)) << IsaName(i);
    EXPECT_EQ(HostDriver(1, 64, {}, OptionsFor(i)).options().isa, i);
  }
}

// Each build has only its own architecture's kernels.
TEST(Isa, OtherArchitectureUnsupported) {
#if defined(__aarch64__)
  for (Isa i : {Isa::kSse, Isa::kAvx2, Isa::kAvx512}) EXPECT_FALSE(IsaSupported(i)) << IsaName(i);
  EXPECT_TRUE(BestIsa() == Isa::kSve || BestIsa() == Isa::kNeon);
#else
  for (Isa i : {Isa::kNeon, Isa::kSve}) EXPECT_FALSE(IsaSupported(i)) << IsaName(i);
  EXPECT_EQ(SveVectorBits(), 0u);
#endif
}

TEST(Isa, ForcingAnUnsupportedIsaThrowsUnsupported) {
  for (Isa i : kAllIsas) {
    if (IsaSupported(i)) continue;
    try {
      Resolve(OptionsFor(i));
      FAIL() << "Resolve(" << IsaName(i) << ") did not throw";
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::kUnsupported);
    }
    EXPECT_THROW(HostDriver(1, 64, {}, OptionsFor(i)), Error);
    HostDriver driver(1, 64);
    EXPECT_THROW(driver.set_options(OptionsFor(i)), Error);
    EXPECT_EQ(driver.options().isa, BestIsa());
  }
  try {
    Resolve(OptionsFor(static_cast<Isa>(7)));
    FAIL() << "unknown ISA value accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kInvalidArgument);
  }
}

// Note [VBMI momentum decode]: the option can switch the decode off everywhere, and on only
// where the CPU has AVX-512 with VBMI and the AVX-512 kernels run.
TEST(Isa, VbmiDecodeOnlyWhereTheCpuHasIt) {
#if defined(__x86_64__)
  __builtin_cpu_init();
  const bool cpu = IsaSupported(Isa::kAvx512) && __builtin_cpu_supports("avx512vbmi");
#else
  const bool cpu = false;
#endif
  EXPECT_EQ(VbmiSupported(), cpu);
  HostKernelOptions o;
  o.vbmi_decode = false;
  EXPECT_FALSE(Resolve(o).vbmi_decode);
  EXPECT_FALSE(ResolveHostKernel(o).tuning.vbmi_decode);
  o.vbmi_decode = true;
  EXPECT_EQ(Resolve(o).vbmi_decode, cpu);
  EXPECT_EQ(ResolveHostKernel(o).tuning.vbmi_decode, cpu);
  for (Isa i : SupportedIsas()) {
    if (i == Isa::kAvx512) continue;
    EXPECT_FALSE(Resolve(OptionsFor(i)).vbmi_decode) << IsaName(i);
  }
}

// Note [Software prefetch]: the kernels have a case for 0, 8, 16, 32 and 64 groups; any
// other distance is rounded up to one of them.
TEST(Isa, PrefetchDistanceIsASupportedCase) {
  const std::pair<int, int> cases[] = {{-3, 0},  {0, 0},   {1, 8},   {8, 8},   {9, 16},
                                       {16, 16}, {17, 32}, {32, 32}, {64, 64}, {1000, 64}};
  for (const auto& [in, want] : cases) {
    HostKernelOptions o;
    o.prefetch_groups = in;
    EXPECT_EQ(Resolve(o).prefetch_groups, want) << "prefetch_groups " << in;
    EXPECT_EQ(ResolveHostKernel(o).tuning.prefetch_groups, want) << "prefetch_groups " << in;
  }
}

// The defaults are the measured ones (docs/host_kernels.md), and the other fields reach the
// kernels' tuning as given.
TEST(Isa, DefaultsAndTuningAsGiven) {
  const HostKernelOptions d;
  EXPECT_FALSE(d.isa.has_value());
  EXPECT_EQ(d.prefetch_groups, 32);
  EXPECT_TRUE(d.nt_param_stores);
  EXPECT_EQ(d.paired_groups, PairedGroups::kAllQ8);
  EXPECT_TRUE(d.vbmi_decode);
  for (PairedGroups mode :
       {PairedGroups::kOff, PairedGroups::kAllQ8, PairedGroups::kWithoutQ8Var}) {
    for (bool nt : {false, true}) {
      HostKernelOptions o;
      o.paired_groups = mode;
      o.nt_param_stores = nt;
      const SpanTuning t = ResolveHostKernel(o).tuning;
      EXPECT_EQ(t.paired, mode);
      EXPECT_EQ(t.nt_param, nt);
    }
  }
  HostKernelOptions bad;
  bad.paired_groups = static_cast<PairedGroups>(3);
  try {
    Resolve(bad);
    FAIL() << "paired_groups 3 accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kInvalidArgument);
    EXPECT_NE(std::string(e.what()).find("paired_groups"), std::string::npos) << e.what();
  }
}

#if defined(__aarch64__)
// Note [SVE vector lengths]: SVE is supported, and best, exactly at the vector lengths
// with a build; StepSpanSve runs the build of the calling thread's length (each is tested
// byte for byte in parity_test.cc) and the NEON kernels at any other, so a span stepped
// at an unbuilt length still gets the reference's bytes.
TEST(Isa, SveOnlyAtBuiltVectorLengths) {
  if ((getauxval(AT_HWCAP) & HWCAP_SVE) == 0) {
    EXPECT_FALSE(IsaSupported(Isa::kSve));
    EXPECT_EQ(SveVectorBits(), 0u);
    EXPECT_EQ(BestIsa(), Isa::kNeon);
    GTEST_SKIP() << "no SVE on this CPU";
  }
  for (unsigned bits : kSveVectorBits) {
    ScopedSveVectorLength vl(bits);
    if (!vl.ok()) continue;
    EXPECT_EQ(SveVectorBits(), bits);
    EXPECT_EQ(SveVectorBitsNow(), bits);
    EXPECT_TRUE(IsaSupported(Isa::kSve)) << bits;
    EXPECT_EQ(BestIsa(), Isa::kSve) << bits;
  }
  ScopedSveVectorLength unbuilt(1024);
  if (!unbuilt.ok()) GTEST_SKIP() << "this CPU cannot run SVE at 1024 bits";
  EXPECT_FALSE(IsaSupported(Isa::kSve));
  EXPECT_EQ(BestIsa(), Isa::kNeon);
  try {
    Resolve(OptionsFor(Isa::kSve));
    FAIL() << "Resolve(sve) accepted a vector length without a build";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kUnsupported);
    EXPECT_NE(std::string(e.what()).find("1024 bits"), std::string::npos) << e.what();
  }
  const AlgoCase& c = AlgoCases()[0];
  const StateFormats f{MasterFormat::kBF16Ecc8, MomentFormat::kQ8, MomentFormat::kQ8};
  std::mt19937 rng(5);
  const std::vector<float> w0 = RandomWeights(rng, 1000);
  TensorState ref(c.algo, c.h, f, w0.data(), 1000);
  TensorState got = ref;
  const auto grad = RandomGrad(rng, 1000, DType::kBF16);
  const StepScalars s = ComputeStepScalars(c.algo, c.h, c.lr, 1, 1.0);
  ReferenceStep(s, ref.Span(0, 1000, grad.data(), DType::kBF16, nullptr, DType::kF32));
  StepSpanSve(s, got.Span(0, 1000, grad.data(), DType::kBF16, nullptr, DType::kF32),
              ResolveHostKernel(OptionsFor(Isa::kNeon)).tuning);
  ExpectSameState(ref, got);
}
#endif

}  // namespace
}  // namespace tandem::cpu::testing
