// The exact shortcuts of cuda/fast_codec.cuh against the engine's definitions, over
// every input (Note [Batched fallbacks]); the fused-step parity tests cover them in use.
#include <gtest/gtest.h>

#include "cuda/fast_codec_check.h"
#include "cuda/gpu_step.h"

namespace tandem::gpu {
namespace {

TEST(FastCodec, ExhaustiveAgainstEngine) {
  if (!DeviceAvailable()) GTEST_SKIP() << "no CUDA device";
  const detail::FastCodecCheck r = detail::RunFastCodecCheck();
  EXPECT_EQ(r.ecc8_mismatches, 0u) << "first bad fp32 bits 0x" << std::hex << r.ecc8_first_bad;
  EXPECT_EQ(r.ecc8_decode_mismatches, 0u)
      << "first bad (bf16 << 8 | ecc8) 0x" << std::hex << r.ecc8_decode_first_bad;
  EXPECT_EQ(r.sqrt_mismatches, 0u) << "first bad fp32 bits 0x" << std::hex << r.sqrt_first_bad;
  EXPECT_EQ(r.momentum_mismatches, 0u)
      << "first bad fp32 bits 0x" << std::hex << r.momentum_first_bad;
  // The guard is live (near half-integers and the 2^24 NaN patterns go to the fallback)
  // and narrow (a few in 2^13 of the rest).
  EXPECT_GT(r.momentum_fallbacks, uint64_t{1} << 24) << r.momentum_fallbacks;
  EXPECT_LT(r.momentum_fallbacks, uint64_t{1} << 25) << r.momentum_fallbacks;
}

}  // namespace
}  // namespace tandem::gpu
