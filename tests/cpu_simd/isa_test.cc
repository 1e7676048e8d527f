// ISA selection: names, forcing, and errors.
#include <gtest/gtest.h>

#include <utility>

#include "cpu_simd/host_kernels.h"
#include "cpu_simd/tuning.h"
#include "tandem/error.h"
#include "tests/cpu_simd/test_util.h"

namespace tandem::cpu::testing {
namespace {

TEST(Isa, Names) {
  EXPECT_STREQ(IsaName(Isa::kSse), "sse");
  EXPECT_STREQ(IsaName(Isa::kAvx2), "avx2");
  EXPECT_STREQ(IsaName(Isa::kAvx512), "avx512");
}

TEST(Isa, BaselineSupportedAndBestIsSupported) {
  EXPECT_TRUE(IsaSupported(Isa::kSse));
  EXPECT_TRUE(IsaSupported(BestIsa()));
}

TEST(Isa, ForceEverySupportedIsa) {
  IsaRestorer restore;
  for (Isa i : SupportedIsas()) {
    ForceIsa(i);
    EXPECT_EQ(ActiveIsa(), i);
  }
}

TEST(Isa, ForcingAnUnsupportedIsaThrowsUnsupported) {
  IsaRestorer restore;
  const Isa before = ActiveIsa();
  for (Isa i : {Isa::kSse, Isa::kAvx2, Isa::kAvx512}) {
    if (IsaSupported(i)) continue;
    try {
      ForceIsa(i);
      FAIL() << "ForceIsa(" << IsaName(i) << ") did not throw";
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::kUnsupported);
    }
    EXPECT_EQ(ActiveIsa(), before);
  }
  try {
    ForceIsa(static_cast<Isa>(7));
    FAIL() << "unknown ISA value accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kInvalidArgument);
  }
}

// Note [VBMI momentum decode]: the knob can switch the decode off everywhere, and on only
// where the CPU has AVX-512 with VBMI.
TEST(Isa, VbmiDecodeOnlyWhereTheCpuHasIt) {
  const bool saved = VbmiDecode();
  __builtin_cpu_init();
  const bool cpu = IsaSupported(Isa::kAvx512) && __builtin_cpu_supports("avx512vbmi");
  SetVbmiDecode(false);
  EXPECT_FALSE(VbmiDecode());
  SetVbmiDecode(true);
  EXPECT_EQ(VbmiDecode(), cpu);
  SetVbmiDecode(saved);
}

// Note [Software prefetch]: the kernels have a case for 0, 8, 16, 32 and 64 groups; any
// other distance is rounded up to one of them.
TEST(Isa, PrefetchDistanceIsASupportedCase) {
  const int saved = PrefetchGroups();
  const std::pair<int, int> cases[] = {{-3, 0}, {0, 0},  {1, 8},   {8, 8},   {9, 16},
                                       {16, 16}, {17, 32}, {32, 32}, {64, 64}, {1000, 64}};
  for (const auto& [in, want] : cases) {
    SetPrefetchGroups(in);
    EXPECT_EQ(PrefetchGroups(), want) << "SetPrefetchGroups(" << in << ")";
  }
  SetPrefetchGroups(saved);
}

}  // namespace
}  // namespace tandem::cpu::testing
