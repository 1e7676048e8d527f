#include "planner/step_time.h"

#include <gtest/gtest.h>

#include <cmath>

namespace tandem::planner {
namespace {

PlanInputs Flash() {
  PlanInputs in;
  in.formats = {MasterFormat::kBF16Ecc8, MomentFormat::kQ8, MomentFormat::kQ8};
  in.param_dtype = in.grad_dtype = DType::kBF16;
  return in;
}

PlanInputs Flash(ModelDescription model) {
  PlanInputs in = Flash();
  in.model = std::move(model);
  return in;
}

TEST(KernelBytes, MatchesTheDesignFigures) {
  HyperParams h;
  EXPECT_DOUBLE_EQ(
      KernelBytesPerElement(Algorithm::kAdamW, h,
                            {MasterFormat::kBF16Ecc8, MomentFormat::kQ8, MomentFormat::kQ8},
                            DType::kBF16, DType::kBF16),
      12.25);
  EXPECT_DOUBLE_EQ(KernelBytesPerElement(Algorithm::kAdamW, h, {}, DType::kF32, DType::kF32), 28);
  // fp32 master with bf16 parameters also writes the bf16 parameter.
  EXPECT_DOUBLE_EQ(KernelBytesPerElement(Algorithm::kAdamW, h, {}, DType::kBF16, DType::kBF16),
                   28);  // 2 grad + 8 master + 2 param + 16 moments
  // SGD without momentum: gradient, master, nothing else.
  EXPECT_DOUBLE_EQ(KernelBytesPerElement(Algorithm::kSGD, h, {}, DType::kF32, DType::kF32), 12);
}

TEST(KernelKeyParse, RoundTrips) {
  Algorithm a;
  StateFormats f;
  DType g;
  ASSERT_TRUE(ParseKernelKey("lion/bf16+ecc16/q8/f32/f16", &a, &f, &g));
  EXPECT_EQ(a, Algorithm::kLion);
  EXPECT_EQ(f.master, MasterFormat::kBF16Ecc16);
  EXPECT_EQ(g, DType::kF16);
  EXPECT_FALSE(ParseKernelKey("adamw/bf16/q8/q8", &a, &f, &g));
  EXPECT_FALSE(ParseKernelKey("adamw/bf17/q8/q8/bf16", &a, &f, &g));
}

TEST(Rates, DefaultProfileUsesRooflinesAt90Percent) {
  const Rates r = ResolveRates(Flash());
  EXPECT_DOUBLE_EQ(r.gpu_gparams_per_s, 4260 * 0.9 / 12.25);
  EXPECT_DOUBLE_EQ(r.host_gparams_per_s, 146 * 0.9 / 12.25);
  EXPECT_NE(r.gpu_source.find("roofline"), std::string::npos);
}

TEST(Rates, MeasuredKeyAndClosestEfficiency) {
  PlanInputs in = Flash();
  in.profile.gpu.kernels["adamw/bf16+ecc8/q8/q8/bf16"].gparams_per_s = 250;
  // Host: only fp32 AdamW measured (28 B/elem) at 50% of the triad roofline.
  in.profile.host.kernels["adamw/f32/f32/f32/f32"].gparams_per_s = 146 * 0.5 / 28;
  in.profile.host.kernels["garbage key"].gparams_per_s = 1000;
  const Rates r = ResolveRates(in);
  EXPECT_DOUBLE_EQ(r.gpu_gparams_per_s, 250);
  EXPECT_EQ(r.gpu_source, "measured adamw/bf16+ecc8/q8/q8/bf16");
  EXPECT_NEAR(r.host_gparams_per_s, 146 * 0.5 / 12.25, 1e-9);
  // Eight ranks share one host.
  in.gpus_per_node = 8;
  EXPECT_NEAR(ResolveRates(in).host_gparams_per_s, 146 * 0.5 / 12.25 / 8, 1e-9);
}

TEST(StepTime, AllOnGpu) {
  const PlanInputs in = Flash();
  const Rates r = ResolveRates(in);
  const StepTime t = PredictStepTime(in, r, 1000000000, 0, 1000000000);
  EXPECT_EQ(t.bottleneck, Stage::kGpu);
  // No measured pre-pass rate: kDefaultPrepassBytesPerElement (4) at the HBM copy rate,
  // twice a bf16 gradient's read (the exact sum of squares is compute-bound).
  EXPECT_DOUBLE_EQ(t.prepass_ms, 1e3 * 4e9 / 4260e9);
  EXPECT_DOUBLE_EQ(t.gpu_ms, 1e3 / r.gpu_gparams_per_s);
  EXPECT_DOUBLE_EQ(t.step_ms, t.prepass_ms + t.gpu_ms);
  EXPECT_EQ(t.d2h_ms, 0);
}

TEST(StepTime, AllOnHostSharesBidirectionalPcie) {
  const PlanInputs in = Flash();
  const Rates r = ResolveRates(in);
  const uint64_t n = 1000000000;
  const StepTime t = PredictStepTime(in, r, 0, n, n);
  // bf16 both ways: each direction gets half of 101.7 GB/s.
  EXPECT_DOUBLE_EQ(t.d2h_ms, 1e3 * 2e9 / (101.7e9 / 2));
  EXPECT_DOUBLE_EQ(t.h2d_ms, 1e3 * 2e9 / (101.7e9 / 2));
  // Note [Host stage in the pipeline]: kernel time scaled by (kernel + DMA bytes) /
  // kernel bytes (2 + 2 bytes of bf16 gradient and parameter over 12.25), plus 29 us per
  // 2 Mi-element chunk.
  const double chunks = std::ceil(double(n) / double(1 << 21));
  EXPECT_NEAR(t.host_ms, 1e3 / r.host_gparams_per_s * (1 + 4.0 / 12.25) + chunks * 0.029,
              1e-9 * t.host_ms);
  EXPECT_EQ(t.bottleneck, Stage::kHost);
  const double chunk = static_cast<double>(1 << 21) / n;
  EXPECT_DOUBLE_EQ(t.fill_ms, chunk * t.d2h_ms + chunk * t.h2d_ms);
  EXPECT_DOUBLE_EQ(t.step_ms, t.prepass_ms + t.host_ms + t.fill_ms);
}

TEST(StepTime, PcieBottleneckWithFastHost) {
  PlanInputs in = Flash();
  in.profile.host.kernels["adamw/bf16+ecc8/q8/q8/bf16"].gparams_per_s = 1000;
  in.grad_dtype = DType::kF32;  // 4 bytes down, 2 up: down gets 2/3 of 101.7, capped at 55.5
  const Rates r = ResolveRates(in);
  const StepTime t = PredictStepTime(in, r, 0, 1000000, 1000000);
  EXPECT_EQ(t.bottleneck, Stage::kD2H);
  EXPECT_DOUBLE_EQ(t.d2h_ms, 1e3 * 4e6 / 55.5e9);
  EXPECT_DOUBLE_EQ(t.h2d_ms, 1e3 * 2e6 / (101.7e9 / 3));
  // One chunk holds everything: fill is the other two stages in full.
  EXPECT_DOUBLE_EQ(t.fill_ms, t.host_ms + t.h2d_ms);
}

TEST(StepTime, PrepassAtTheMeasuredRateNeverFasterThanTheRead) {
  PlanInputs in = Flash();
  in.profile.gpu.prepass_gparams_per_s = 500;
  Rates r = ResolveRates(in);
  EXPECT_EQ(r.prepass_source, "measured");
  EXPECT_DOUBLE_EQ(PredictStepTime(in, r, 1000000000, 0, 1000000000).prepass_ms, 1e3 / 500);
  // Faster than the gradients can be read: the read (2 bytes at 4260 GB/s) sets it.
  in.profile.gpu.prepass_gparams_per_s = 1e5;
  r = ResolveRates(in);
  EXPECT_DOUBLE_EQ(PredictStepTime(in, r, 1000000000, 0, 1000000000).prepass_ms,
                   1e3 * 2e9 / 4260e9);
  in.profile.gpu.prepass_gparams_per_s = 0;
  EXPECT_NE(ResolveRates(in).prepass_source.find("not in the profile"), std::string::npos);
}

// Note [Fixed step cost]: per step + per tensor, each part where the profile has it.
TEST(StepTime, FixedCostPerStepAndPerTensor) {
  PlanInputs in = Flash(ModelFromParamCount(1ull << 28, 8));
  const uint64_t tensors = in.model.tensors.size();
  ASSERT_GT(tensors, 1u);
  const uint64_t n = in.model.total_params();
  Rates r = ResolveRates(in);
  const StepTime none = PredictStepTime(in, r, n / 2, n / 2, n, n / 2);
  EXPECT_EQ(none.engine_overhead_ms, 0);
  EXPECT_EQ(none.binding_overhead_ms, 0);
  EXPECT_NE(r.engine_overhead_source.find("counted as 0"), std::string::npos);
  EXPECT_NE(r.binding_overhead_source.find("counted as 0"), std::string::npos);
  in.profile.step_overhead.engine = {true, 0.25, 2.0};
  in.profile.step_overhead.binding = {true, 0.5, 8.0};
  r = ResolveRates(in);
  EXPECT_NE(r.engine_overhead_source.find("measured: 0.250 ms + 2.00 us"), std::string::npos);
  for (uint64_t streamed : {uint64_t{0}, n / 4, n / 2}) {
    const StepTime base = PredictStepTime(Flash(ModelFromParamCount(1ull << 28, 8)),
                                          ResolveRates(Flash(ModelFromParamCount(1ull << 28, 8))),
                                          n / 2, n / 2, n, streamed);
    const StepTime t = PredictStepTime(in, r, n / 2, n / 2, n, streamed);
    EXPECT_DOUBLE_EQ(t.engine_overhead_ms, 0.25 + 2e-3 * tensors);
    EXPECT_DOUBLE_EQ(t.binding_overhead_ms, 0.5 + 8e-3 * tensors);
    EXPECT_NEAR(t.step_ms, base.step_ms + t.engine_overhead_ms + t.binding_overhead_ms, 1e-9);
  }
  // Nothing offloaded: still paid.
  const StepTime gpu_only = PredictStepTime(in, r, n, 0, n);
  EXPECT_DOUBLE_EQ(gpu_only.step_ms, gpu_only.prepass_ms + gpu_only.gpu_ms + 0.75 +
                                         10e-3 * static_cast<double>(tensors));
}

// Note [Fill at both ends]: every streamed element (the host computes none), the chain
// h2d -> kernel -> d2h pays the slowest stage in full and one chunk of each other.
TEST(StepTime, StreamedFillCoversBothEnds) {
  PlanInputs in = Flash();
  in.profile.pcie.h2d_concurrent_gbps = 50;  // upload the slowest
  in.profile.pcie.d2h_concurrent_gbps = 52;
  const Rates r = ResolveRates(in);
  const uint64_t cold = 320000000, hot = 960000000;
  const StepTime t = PredictStepTime(in, r, hot, cold, hot + cold, cold);
  const double chunk =
      std::floor(double(in.stream_chunk_bytes) / r.stream_bytes_per_element) / double(cold);
  const double kernel_ms = double(cold) / (r.machine.gpu_gparams * 1e6);
  EXPECT_EQ(t.bottleneck, Stage::kH2D);
  EXPECT_DOUBLE_EQ(t.h2d_ms, 1e3 * cold * 3.125 / 50e9);
  // The upload runs from the first chunk on; the last chunk's kernel and download follow.
  EXPECT_NEAR(t.fill_ms, chunk * (t.d2h_ms + kernel_ms), 1e-12);
  EXPECT_NEAR(t.step_ms, t.prepass_ms + t.h2d_ms + t.fill_ms, 1e-9);
  // Download the slowest: the first chunk's upload and kernel come before it.
  in.profile.pcie.h2d_concurrent_gbps = 54;
  const StepTime d = PredictStepTime(in, ResolveRates(in), hot, cold, hot + cold, cold);
  EXPECT_EQ(d.bottleneck, Stage::kD2H);
  EXPECT_NEAR(d.fill_ms, chunk * (d.h2d_ms + kernel_ms), 1e-12);
  // One 32 MiB chunk (the default) each end at ~50 GB/s: about 0.68 ms, not 1.36 (the
  // slowest stage's own first or last chunk is in its whole time).
  EXPECT_NEAR(t.fill_ms, 0.68, 0.03);
}

}  // namespace
}  // namespace tandem::planner
