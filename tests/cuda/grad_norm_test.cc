// The gradient-norm pre-pass on the GPU: the exact sum (Note [Exact sum of squares]) equals
// the host pre-pass's to the bit for every run length, any split of a tensor between runs
// gives the same integer, repeated runs give the same bits, and the non-finite flag
// catches NaN and Inf anywhere in any dtype.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <utility>
#include <vector>

#include "cuda/gpu_step.h"
#include "engine/exact_sum.h"
#include "engine/fp_bits.h"
#include "offload/prepass/grad_stats.h"
#include "tandem/error.h"
#include "tests/cuda/device_buffer.h"

namespace tandem::gpu {
namespace {

using testing::MirroredBuffer;

class GradNorm : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!DeviceAvailable()) GTEST_SKIP() << "no CUDA device";
  }

  // Builds tensors of the given sizes with dtypes cycling f32, bf16, f16, every third
  // start off 16-byte alignment; host_sum gets the double sum of squares.
  void Build(const std::vector<size_t>& sizes, uint32_t seed) {
    std::mt19937 rng(seed);
    std::normal_distribution<float> nd;
    const DType dtypes[3] = {DType::kF32, DType::kBF16, DType::kF16};
    for (size_t k = 0; k < sizes.size(); ++k) {
      const DType t = dtypes[k % 3];
      offsets_.push_back(buf_.Reserve(sizes[k] * DTypeSize(t), k % 3 == 2 ? 2 : 0));
    }
    buf_.Allocate();
    ASSERT_FALSE(HasFatalFailure());
    host_sum_ = 0.0;
    for (size_t k = 0; k < sizes.size(); ++k) {
      const DType t = dtypes[k % 3];
      for (size_t i = 0; i < sizes[k]; ++i) {
        const float x = nd(rng) * (k % 2 ? 3.0f : 0.01f);
        float stored;
        if (t == DType::kF32) {
          std::memcpy(buf_.host(offsets_[k]) + 4 * i, &x, 4);
          stored = x;
        } else {
          const uint16_t b = t == DType::kBF16 ? num::F32ToBf16(x) : num::F32ToF16(x);
          std::memcpy(buf_.host(offsets_[k]) + 2 * i, &b, 2);
          stored = t == DType::kBF16 ? num::Bf16ToF32(b) : num::F16ToF32(b);
        }
        host_sum_ += static_cast<long double>(stored) * stored;
      }
      refs_.push_back(GradRef{buf_.dev(offsets_[k]), sizes[k], t});
    }
    buf_.Upload();
  }

  GradNormPlan::Result Run(GradNormPlan& plan) {
    plan.Launch(nullptr);
    EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    return plan.Read();
  }

  MirroredBuffer buf_;
  std::vector<size_t> offsets_;
  std::vector<GradRef> refs_;
  long double host_sum_ = 0.0L;  // 64-bit mantissa: a reference for the sums below
};

TEST_F(GradNorm, MatchesHostSumAndRepeatsBitForBit) {
  std::vector<size_t> sizes = {0, 1, 17, 16384, 16385, 100003, 3, 1 << 20, 0, 777};
  for (int i = 0; i < 500; ++i) sizes.push_back(i % 37);
  Build(sizes, 5);
  ASSERT_FALSE(HasFatalFailure());
  GradNormPlan plan(refs_);
  const GradNormPlan::Result first = Run(plan);
  EXPECT_FALSE(first.nonfinite);
  const double ref = static_cast<double>(host_sum_);
  EXPECT_NEAR(first.sum_squares, ref, 1e-13 * ref);
  for (int r = 0; r < 5; ++r) {
    const GradNormPlan::Result again = Run(plan);
    EXPECT_EQ(std::memcmp(&again.sum_squares, &first.sum_squares, sizeof(double)), 0)
        << again.sum_squares << " vs " << first.sum_squares;
  }
  // A second plan over the same tensors gives the same bits too.
  GradNormPlan plan2(refs_);
  const GradNormPlan::Result other = Run(plan2);
  EXPECT_EQ(std::memcmp(&other.sum_squares, &first.sum_squares, sizeof(double)), 0);
}

// The host pre-pass over the host copies of refs_ (with the refs' runs).
offload::NormResult HostOf(MirroredBuffer& buf, const std::vector<size_t>& offsets,
                           const std::vector<GradRef>& refs) {
  std::vector<offload::HostGrad> grads;
  for (size_t k = 0; k < refs.size(); ++k)
    grads.push_back({buf.host(offsets[k]), refs[k].n, refs[k].dtype, refs[k].run});
  return offload::HostGradNorm(grads);
}

bool SameExact(const exact::Acc& a, const exact::Acc& b) {
  return std::memcmp(a.limb, b.limb, sizeof(a.limb)) == 0;
}

TEST_F(GradNorm, EqualsTheHostPrePassForEveryRunLength) {
  // 3 x 4096 rows, 7 x 40, one 1-D vector summed element by element, a long flat tensor
  // (pieces of 8192), odd sizes.
  const std::vector<size_t> sizes = {3 * 4096, 7 * 40, 4096, 100003, 1 << 20, 17, 0, 20000};
  const std::vector<uint64_t> runs = {4096, 40, 1, 0, 32768, 0, 0, 10000};
  Build(sizes, 11);
  ASSERT_FALSE(HasFatalFailure());
  for (size_t k = 0; k < refs_.size(); ++k) refs_[k].run = runs[k];
  GradNormPlan plan(refs_);
  const GradNormPlan::Result gpu = Run(plan);
  const offload::NormResult host = HostOf(buf_, offsets_, refs_);
  EXPECT_TRUE(SameExact(gpu.exact, host.exact));
  EXPECT_EQ(std::memcmp(&gpu.sum_squares, &host.sum_squares, sizeof(double)), 0)
      << gpu.sum_squares << " vs " << host.sum_squares;
  // The pieces are summed in double (at most 256 additions per lane): within 1e-13.
  const double ref = static_cast<double>(host_sum_);
  EXPECT_NEAR(gpu.sum_squares, ref, 1e-13 * ref);
}

TEST_F(GradNorm, ShardsCutBetweenRunsGiveTheSameInteger) {
  // One [9, 4096] tensor and one 1-D vector of 1000, cut into "shards" between runs.
  Build({9 * 4096, 1000}, 13);
  ASSERT_FALSE(HasFatalFailure());
  refs_[0].run = 4096;
  refs_[1].run = 1;
  GradNormPlan whole(refs_);
  const GradNormPlan::Result all = Run(whole);
  const size_t row_bytes = 4096 * DTypeSize(refs_[0].dtype);
  const size_t el_bytes = DTypeSize(refs_[1].dtype);
  for (const auto& [rows, elems] : {std::pair<size_t, size_t>{1, 1}, {4, 333}, {8, 999}}) {
    const auto* r0 = static_cast<const uint8_t*>(refs_[0].ptr);
    const auto* r1 = static_cast<const uint8_t*>(refs_[1].ptr);
    std::vector<GradRef> a = {{r0, rows * 4096, refs_[0].dtype, 4096},
                              {r1, elems, refs_[1].dtype, 1}};
    std::vector<GradRef> b = {{r0 + rows * row_bytes, (9 - rows) * 4096, refs_[0].dtype, 4096},
                              {r1 + elems * el_bytes, 1000 - elems, refs_[1].dtype, 1}};
    GradNormPlan pa(a), pb(b);
    exact::Acc sum = Run(pa).exact;
    exact::Merge(sum, Run(pb).exact);
    ASSERT_TRUE(exact::Normalize(sum));
    EXPECT_TRUE(SameExact(sum, all.exact)) << rows << " rows, " << elems << " elements";
  }
}

TEST_F(GradNorm, FlagsNanAndInfAnywhere) {
  const std::vector<size_t> sizes = {1000, 40000, 5, 70000};
  Build(sizes, 9);
  ASSERT_FALSE(HasFatalFailure());
  GradNormPlan plan(refs_);
  EXPECT_FALSE(Run(plan).nonfinite);
  const float bad[3] = {std::numeric_limits<float>::quiet_NaN(),
                        std::numeric_limits<float>::infinity(),
                        -std::numeric_limits<float>::infinity()};
  for (size_t k = 0; k < sizes.size(); ++k) {
    for (const float x : bad) {
      const size_t at = sizes[k] - 1 - (k * 7919) % sizes[k];
      const size_t sz = DTypeSize(refs_[k].dtype);
      uint8_t* slot = static_cast<uint8_t*>(const_cast<void*>(refs_[k].ptr)) + at * sz;
      uint8_t saved[4];
      ASSERT_EQ(cudaMemcpy(saved, slot, sz, cudaMemcpyDeviceToHost), cudaSuccess);
      uint8_t bits[4];
      if (refs_[k].dtype == DType::kF32) {
        std::memcpy(bits, &x, 4);
      } else {
        const uint16_t h = refs_[k].dtype == DType::kBF16 ? num::F32ToBf16(x) : num::F32ToF16(x);
        std::memcpy(bits, &h, 2);
      }
      ASSERT_EQ(cudaMemcpy(slot, bits, sz, cudaMemcpyHostToDevice), cudaSuccess);
      EXPECT_TRUE(Run(plan).nonfinite) << "tensor " << k << " value " << x;
      ASSERT_EQ(cudaMemcpy(slot, saved, sz, cudaMemcpyHostToDevice), cudaSuccess);
    }
  }
  EXPECT_FALSE(Run(plan).nonfinite);
}

TEST_F(GradNorm, InactiveTensorsAreNotReadAndRepeatBitForBit) {
  const std::vector<size_t> sizes = {1000, 40000, 5, 70000, 16384};
  Build(sizes, 13);
  ASSERT_FALSE(HasFatalFailure());
  GradNormPlan plan(refs_);
  const GradNormPlan::Result all = Run(plan);
  // Tensor 1 out: a NaN in it is not seen, and the sum is the host sum of the others.
  const std::vector<uint8_t> mask = {1, 0, 1, 1, 0};
  double host_active = 0.0;
  for (size_t k = 0; k < sizes.size(); ++k) {
    if (!mask[k]) continue;
    for (size_t i = 0; i < sizes[k]; ++i) {
      const uint8_t* p = buf_.host(offsets_[k]);
      float x;
      if (refs_[k].dtype == DType::kF32) {
        std::memcpy(&x, p + 4 * i, 4);
      } else {
        uint16_t h;
        std::memcpy(&h, p + 2 * i, 2);
        x = refs_[k].dtype == DType::kBF16 ? num::Bf16ToF32(h) : num::F16ToF32(h);
      }
      host_active += double(x) * double(x);
    }
  }
  const float nan = std::numeric_limits<float>::quiet_NaN();
  ASSERT_EQ(cudaMemcpy(const_cast<void*>(refs_[1].ptr), &nan, 4, cudaMemcpyHostToDevice),
            cudaSuccess);
  plan.SetActive(mask, nullptr);
  const GradNormPlan::Result masked = Run(plan);
  EXPECT_FALSE(masked.nonfinite);
  EXPECT_NEAR(masked.sum_squares, host_active, 1e-12 * host_active);
  const GradNormPlan::Result again = Run(plan);
  EXPECT_EQ(std::memcmp(&again.sum_squares, &masked.sum_squares, sizeof(double)), 0);
  // Every tensor back in: the NaN is seen; a wrong-sized mask is refused.
  plan.SetActive({}, nullptr);
  EXPECT_TRUE(Run(plan).nonfinite);
  EXPECT_THROW(plan.SetActive({1, 0}, nullptr), Error);
  (void)all;
}

TEST_F(GradNorm, EmptyListIsZero) {
  GradNormPlan plan({});
  const GradNormPlan::Result r = Run(plan);
  EXPECT_EQ(r.sum_squares, 0.0);
  EXPECT_FALSE(r.nonfinite);
}

TEST_F(GradNorm, RejectsNullPointer) {
  EXPECT_THROW(GradNormPlan({GradRef{nullptr, 5, DType::kF32}}), Error);
}

}  // namespace
}  // namespace tandem::gpu
