// The offload pipeline over the host device's copy queues: results equal the reference, a chunk is stepped
// only after its download landed, at most K downloads run ahead, staging slots are not
// overwritten before their upload, and a failed copy gives a clear error and leaves the
// pipeline usable.
#include "offload/pipeline/pipeline.h"

#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <random>
#include <stdexcept>
#include <string>

#include "engine/fp_bits.h"
#include "engine/reference_step.h"
#include "engine/tensor_state.h"
#include "offload/devices/host_stream_device.h"
#include "engine/layout/state_layout.h"
#include "tandem/error.h"
#include "tandem/faults.h"

namespace tandem::offload {
namespace {

struct Fixture {
  static constexpr size_t kN = 1000, kChunk = 96;
  StateFormats f{MasterFormat::kF32, MomentFormat::kQ8, MomentFormat::kQ8};
  HyperParams h;
  std::vector<float> w0 = std::vector<float>(kN), grad = std::vector<float>(kN);
  std::vector<uint16_t> device_param = std::vector<uint16_t>(kN, 0);  // bf16 params
  Fixture() {
    std::mt19937 rng(3);
    std::normal_distribution<float> nd;
    for (auto& x : w0) x = nd(rng);
    for (auto& x : grad) x = nd(rng);
  }
  std::vector<OffloadChunk> Chunks(TensorState& st) {
    std::vector<OffloadChunk> cs;
    for (size_t off = 0; off < kN; off += kChunk) {
      const size_t n = std::min(kChunk, kN - off);
      OffloadChunk c;
      c.device_grad = grad.data() + off;
      c.device_param = device_param.data() + off;
      c.grad_bytes = 4 * n;
      c.param_bytes = 2 * n;
      c.span = st.Span(off, n, nullptr, DType::kF32, nullptr, DType::kBF16);
      cs.push_back(c);
    }
    return cs;
  }
};

TEST(Pipeline, MatchesReferenceWithOrderingAndBackPressure) {
  for (int slots : {2, 3, 5}) {
    Fixture fx;
    TensorState st(Algorithm::kAdamW, fx.h, fx.f, fx.w0.data(), Fixture::kN);
    TensorState ref = st;
    std::vector<uint16_t> ref_param(Fixture::kN);
    const StepScalars s = ComputeStepScalars(Algorithm::kAdamW, fx.h, 1e-3, 1, 1.0);
    ReferenceStep(s, ref.Span(0, Fixture::kN, fx.grad.data(), DType::kF32, ref_param.data(),
                              DType::kBF16));

    HostStreamDevice tr(nullptr, {}, kCopyQueues);
    tr.SetDelayUs(200);
    std::vector<std::vector<uint8_t>> gmem(slots, std::vector<uint8_t>(4 * Fixture::kChunk));
    std::vector<std::vector<uint8_t>> pmem(slots, std::vector<uint8_t>(2 * Fixture::kChunk));
    std::vector<void*> gs, ps;
    for (auto& b : gmem) gs.push_back(b.data());
    for (auto& b : pmem) ps.push_back(b.data());
    Pipeline pipe(&tr, gs, ps);
    std::vector<OffloadChunk> chunks = fx.Chunks(st);
    size_t step_index = 0;
    bool ok = true;
    std::string why;
    auto host_step = [&](const StepScalars& sc, const StepSpan& span) {
      const size_t off = step_index * Fixture::kChunk;
      // The download of this chunk has landed in its slot.
      if (std::memcmp(span.grad, fx.grad.data() + off, span.n * 4) != 0) {
        ok = false;
        why = "chunk " + std::to_string(step_index) + " stepped before its download landed";
      }
      // Back-pressure: at most `slots` downloads beyond the chunks already stepped.
      const uint64_t downloads = tr.copies_enqueued() - step_index;  // uploads so far = index
      if (downloads > std::min<uint64_t>(chunks.size(), step_index + slots)) {
        ok = false;
        why = "more downloads in flight than slots";
      }
      ReferenceStep(sc, span);
      ++step_index;
    };
    std::vector<Event> last(1, 0);
    PipelineTimes times;
    pipe.Run(chunks, &s, host_step, &last, &times);
    tr.Drain();
    EXPECT_TRUE(ok) << why;
    EXPECT_EQ(step_index, chunks.size());
    EXPECT_EQ(st.m_codes, ref.m_codes);
    EXPECT_EQ(st.v_scales, ref.v_scales);
    EXPECT_EQ(st.master_f32, ref.master_f32);
    EXPECT_EQ(fx.device_param, ref_param) << "a staging slot was reused before its upload";
    EXPECT_GT(times.d2h_ms, 0);
    EXPECT_GT(times.h2d_ms, 0);
  }
}

TEST(Pipeline, FailedCopyIsReportedAndPipelineStaysUsable) {
  for (uint64_t fail_at : {1u, 4u, 9u}) {
    Fixture fx;
    TensorState st(Algorithm::kAdamW, fx.h, fx.f, fx.w0.data(), Fixture::kN);
    const auto faults = std::make_shared<FaultPlan>();
    HostStreamDevice tr(nullptr, {}, kCopyQueues, faults);
    std::vector<std::vector<uint8_t>> gmem(2, std::vector<uint8_t>(4 * Fixture::kChunk));
    std::vector<std::vector<uint8_t>> pmem(2, std::vector<uint8_t>(2 * Fixture::kChunk));
    Pipeline pipe(&tr, {gmem[0].data(), gmem[1].data()}, {pmem[0].data(), pmem[1].data()});
    std::vector<OffloadChunk> chunks = fx.Chunks(st);
    const StepScalars s = ComputeStepScalars(Algorithm::kAdamW, fx.h, 1e-3, 1, 1.0);
    auto step = [](const StepScalars& sc, const StepSpan& span) { ReferenceStep(sc, span); };
    faults->FailCopy(fail_at);
    try {
      pipe.Run(chunks, &s, step, nullptr, nullptr);
      FAIL() << "no error for failed copy " << fail_at;
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::kCuda);
      EXPECT_NE(std::string(e.what()).find("chunks applied"), std::string::npos) << e.what();
      // Context is added once, and so is the "tandem: CUDA error: " prefix.
      const std::string what = e.what();
      EXPECT_EQ(what.find("tandem:"), what.rfind("tandem:")) << what;
      if (fail_at == 1) {  // the very first download: nothing was stepped
        EXPECT_NE(std::string(e.what()).find("0 of"), std::string::npos) << e.what();
      }
    }
    // Usable afterwards: a full run succeeds and matches a fresh reference run.
    TensorState fresh(Algorithm::kAdamW, fx.h, fx.f, fx.w0.data(), Fixture::kN);
    std::vector<OffloadChunk> again = fx.Chunks(fresh);
    EXPECT_NO_THROW(pipe.Run(again, &s, step, nullptr, nullptr));
    TensorState ref(Algorithm::kAdamW, fx.h, fx.f, fx.w0.data(), Fixture::kN);
    ReferenceStep(s, ref.Span(0, Fixture::kN, fx.grad.data(), DType::kF32));
    EXPECT_EQ(fresh.master_f32, ref.master_f32);
  }
}

// A host step that throws something other than tandem::Error (here std::runtime_error)
// still drains the copies in flight before the error leaves Run, which names the chunks
// applied, and the pipeline stays usable.
TEST(Pipeline, AnyExceptionFromAHostStepDrainsAndIsReported) {
  Fixture fx;
  TensorState st(Algorithm::kAdamW, fx.h, fx.f, fx.w0.data(), Fixture::kN);
  HostStreamDevice tr(nullptr, {}, kCopyQueues);
  std::vector<std::vector<uint8_t>> gmem(3, std::vector<uint8_t>(4 * Fixture::kChunk));
  std::vector<std::vector<uint8_t>> pmem(3, std::vector<uint8_t>(2 * Fixture::kChunk));
  Pipeline pipe(&tr, {gmem[0].data(), gmem[1].data(), gmem[2].data()},
                {pmem[0].data(), pmem[1].data(), pmem[2].data()});
  std::vector<OffloadChunk> chunks = fx.Chunks(st);
  const StepScalars s = ComputeStepScalars(Algorithm::kAdamW, fx.h, 1e-3, 1, 1.0);
  int calls = 0;
  auto failing = [&](const StepScalars& sc, const StepSpan& span) {
    if (++calls == 3) throw std::runtime_error("host step blew up");
    ReferenceStep(sc, span);
  };
  try {
    pipe.Run(chunks, &s, failing, nullptr, nullptr);
    FAIL() << "no error from a throwing host step";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kInternal);
    EXPECT_NE(std::string(e.what()).find("host step blew up (offload pipeline: 2 of"),
              std::string::npos)
        << e.what();
  }
  TensorState fresh(Algorithm::kAdamW, fx.h, fx.f, fx.w0.data(), Fixture::kN);
  std::vector<OffloadChunk> again = fx.Chunks(fresh);
  auto step = [](const StepScalars& sc, const StepSpan& span) { ReferenceStep(sc, span); };
  EXPECT_NO_THROW(pipe.Run(again, &s, step, nullptr, nullptr));
}

}  // namespace
}  // namespace tandem::offload
