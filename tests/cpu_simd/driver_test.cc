// HostDriver: results independent of thread count and grain, many tiny tensors in one
// Run, FTZ/DAZ in the caller, and all-or-nothing validation.
#include <gtest/gtest.h>

#include <memory>

#include "cpu_simd/host_kernels.h"
#include "engine/reference_step.h"
#include "tandem/error.h"
#include "tests/cpu_simd/test_util.h"

namespace tandem::cpu::testing {
namespace {

// A few tensors with their gradients and bf16 parameter buffers.
struct Tensors {
  std::vector<std::unique_ptr<TensorState>> states;
  std::vector<std::vector<unsigned char>> grads;
  std::vector<std::vector<uint16_t>> params;
};

Tensors MakeTensors(const AlgoCase& c, const StateFormats& f, const std::vector<size_t>& sizes,
                    uint32_t seed) {
  std::mt19937 rng(seed);
  Tensors t;
  for (size_t n : sizes) {
    const auto w0 = RandomWeights(rng, n);
    t.states.push_back(std::make_unique<TensorState>(c.algo, c.h, f, w0.data(), n));
    t.grads.push_back(RandomGrad(rng, n, DType::kBF16));
    t.params.emplace_back(n + 1);
  }
  return t;
}

Tensors Clone(const Tensors& a) {
  Tensors t;
  for (const auto& s : a.states) t.states.push_back(std::make_unique<TensorState>(*s));
  t.grads = a.grads;
  t.params = a.params;
  return t;
}

std::vector<HostWork> Work(Tensors& t, const StepScalars* s) {
  std::vector<HostWork> w;
  for (size_t i = 0; i < t.states.size(); ++i)
    w.push_back(HostWork{s, t.states[i]->Span(0, t.states[i]->size(), t.grads[i].data(),
                                              DType::kBF16, t.params[i].data(), DType::kF16)});
  return w;
}

void ExpectSame(const Tensors& want, const Tensors& got) {
  for (size_t i = 0; i < want.states.size(); ++i) {
    SCOPED_TRACE("tensor " + std::to_string(i));
    ExpectSameState(*want.states[i], *got.states[i]);
    ExpectSameBytes(want.params[i], got.params[i], "param");
  }
}

// Steps `base` 3 times with the reference and with a driver (with options `o`); compares
// after each step.
void CheckDriver(const AlgoCase& c, const StateFormats& f, const std::vector<size_t>& sizes,
                 int threads, size_t grain, bool ftz_daz, const HostKernelOptions& o = {}) {
  Tensors ref = MakeTensors(c, f, sizes, 7), got = Clone(ref);
  HostDriver driver(threads, grain, {}, o);
  for (int t = 1; t <= 3; ++t) {
    const StepScalars s = ComputeStepScalars(c.algo, c.h, c.lr, t, 0.25);
    auto wr = Work(ref, &s);
    for (const auto& w : wr) ReferenceStep(s, w.span);
    auto wg = Work(got, &s);
    {
      ScopedCallerFlushToZero ftz(ftz_daz);
      driver.Run(wg.data(), wg.size());
    }
    ExpectSame(ref, got);
    if (::testing::Test::HasFailure()) return;
  }
}

const StateFormats kEcc8Q8{MasterFormat::kBF16Ecc8, MomentFormat::kQ8, MomentFormat::kQ8};
const StateFormats kF32{};

TEST(HostDriver, ThreadAndGrainInvariance) {
  const auto& cases = AlgoCases();
  for (int threads : {1, 2, 3}) {
    for (size_t grain : {32, 96, 4096}) {
      for (size_t ci : {0, 2, 4}) {
        const AlgoCase& c = cases[ci];
        for (const StateFormats& f : {kF32, kEcc8Q8}) {
          StateFormats ff = f;
          if (c.algo != Algorithm::kAdamW) ff.variance = MomentFormat::kF32;
          SCOPED_TRACE(std::string(c.name) + " " + Name(ff) + " threads " +
                       std::to_string(threads) + " grain " + std::to_string(grain));
          CheckDriver(c, ff, {10000, 4097, 33, 0, 1000}, threads, grain, false);
          if (HasFailure()) return;
        }
      }
    }
  }
}

TEST(HostDriver, EveryIsa) {
  for (Isa isa : SupportedIsas()) {
    SCOPED_TRACE(IsaName(isa));
    CheckDriver(AlgoCases()[0], kEcc8Q8, {20000, 77}, 2, 96, false, OptionsFor(isa));
  }
}

// The options belong to the driver: two drivers with different ones, stepping in turn,
// each keep theirs and both write the reference's bytes; set_options changes the kernels
// for later Runs, and a refused set_options changes nothing.
TEST(HostDriver, OptionsArePerDriver) {
  const AlgoCase c = AlgoCases()[0];
  HostKernelOptions slow = OptionsFor(BaselineIsa());
  slow.prefetch_groups = 0;
  slow.nt_param_stores = false;
  slow.paired_groups = PairedGroups::kOff;
  HostDriver a(2, 96, {}, slow), b(2, 96);
  EXPECT_EQ(a.options().isa, BaselineIsa());
  EXPECT_EQ(a.options().prefetch_groups, 0);
  EXPECT_FALSE(a.options().nt_param_stores);
  EXPECT_EQ(a.options().paired_groups, PairedGroups::kOff);
  EXPECT_EQ(b.options().isa, BestIsa());
  EXPECT_EQ(b.options().prefetch_groups, 32);
  Tensors ref = MakeTensors(c, kEcc8Q8, {20000, 77}, 11), ga = Clone(ref), gb = Clone(ref);
  for (int t = 1; t <= 3; ++t) {
    const StepScalars s = ComputeStepScalars(c.algo, c.h, c.lr, t, 0.25);
    for (const auto& w : Work(ref, &s)) ReferenceStep(s, w.span);
    auto wa = Work(ga, &s), wb = Work(gb, &s);
    a.Run(wa.data(), wa.size());
    b.Run(wb.data(), wb.size());
    if (t == 2) a.set_options(OptionsFor(BestIsa()));
  }
  ExpectSame(ref, ga);
  ExpectSame(ref, gb);
  EXPECT_EQ(a.options().isa, BestIsa());
  EXPECT_EQ(b.options().isa, BestIsa());
  HostKernelOptions bad;
  bad.paired_groups = static_cast<PairedGroups>(5);
  EXPECT_THROW(a.set_options(bad), Error);
  EXPECT_EQ(a.options().paired_groups, PairedGroups::kAllQ8);
  EXPECT_THROW(HostDriver(1, 96, {}, bad), Error);
}

TEST(HostDriver, IndependentOfCallerFtzDaz) {
  CheckDriver(AlgoCases()[0], kEcc8Q8, {20000, 77}, 2, 96, true);
  CheckDriver(AlgoCases()[1], kF32, {20000, 77}, 3, 32, true);
}

TEST(HostDriver, ManyTinyTensorsInOneRun) {
  std::vector<size_t> sizes;
  for (size_t i = 0; i < 300; ++i) sizes.push_back(i % 71);
  CheckDriver(AlgoCases()[0], kEcc8Q8, sizes, 2, 32, false);
  CheckDriver(AlgoCases()[5],
              StateFormats{MasterFormat::kBF16Ecc16, MomentFormat::kQ8, MomentFormat::kF32}, sizes,
              3, 4096, false);
}

TEST(HostDriver, BadItemThrowsAndTouchesNothing) {
  const AlgoCase c = AlgoCases()[0];
  Tensors t = MakeTensors(c, kEcc8Q8, {1000, 1000, 1000}, 9);
  const Tensors before = Clone(t);
  const StepScalars s = ComputeStepScalars(c.algo, c.h, c.lr, 1, 1.0);
  auto w = Work(t, &s);
  w[1].span.m.codes = nullptr;
  HostDriver driver(2, 64);
  try {
    driver.Run(w.data(), w.size());
    FAIL() << "Run accepted a null m.codes";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kInvalidArgument);
    EXPECT_NE(std::string(e.what()).find("item 1"), std::string::npos) << e.what();
  }
  ExpectSame(before, t);
  w = Work(t, &s);
  w[2].scalars = nullptr;
  EXPECT_THROW(driver.Run(w.data(), w.size()), Error);
  ExpectSame(before, t);
  EXPECT_THROW(driver.Run(nullptr, 2), Error);
  driver.Run(nullptr, 0);
}

TEST(HostDriver, ThreadsAndGrain) {
  EXPECT_EQ(HostDriver(3, 100).threads(), 3);
  EXPECT_EQ(HostDriver(3, 100).grain_elements(), 128u);
  EXPECT_EQ(HostDriver(1, 0).grain_elements(), 32u);
  EXPECT_GE(HostDriver().threads(), 1);
  EXPECT_THROW(HostDriver(-1), Error);
}

TEST(StepSpanHost, ValidatesLikeReference) {
  const AlgoCase c = AlgoCases()[0];
  Tensors t = MakeTensors(c, kF32, {100}, 3);
  const StepScalars s = ComputeStepScalars(c.algo, c.h, c.lr, 1, 1.0);
  StepSpan sp = t.states[0]->Span(0, 100, nullptr, DType::kF32);
  EXPECT_THROW(StepSpanHost(s, sp), Error);
}

// Options StepSpanHost cannot apply: an error, and the span untouched.
TEST(StepSpanHost, BadOptionsThrowAndTouchNothing) {
  const AlgoCase c = AlgoCases()[0];
  Tensors t = MakeTensors(c, kEcc8Q8, {100}, 4);
  const Tensors before = Clone(t);
  const StepScalars s = ComputeStepScalars(c.algo, c.h, c.lr, 1, 1.0);
  const auto w = Work(t, &s);
  HostKernelOptions bad;
  bad.isa = static_cast<Isa>(7);
  EXPECT_THROW(StepSpanHost(s, w[0].span, bad), Error);
  for (Isa isa : kAllIsas) {
    if (IsaSupported(isa)) continue;
    EXPECT_THROW(StepSpanHost(s, w[0].span, OptionsFor(isa)), Error) << IsaName(isa);
  }
  ExpectSame(before, t);
}

}  // namespace
}  // namespace tandem::cpu::testing
