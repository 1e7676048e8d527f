// Note [What backward hides] (planner/overlap.cc): the step exposed after backward with
// early start, gradient release and speculation, term by term.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <string>

#include "planner/plan.h"

namespace tandem::planner {
namespace {

constexpr uint64_t kGiB = 1ull << 30;

// Llama-3-8B under FSDP2 on four GPUs, seq 2048, full recomputation: the run.
PlanInputs Run8B() {
  PlanInputs in;
  in.model = ModelFromPreset("llama3-8b");
  in.gpu_budget = 141 * kGiB;
  in.host_budget = 512 * kGiB;
  in.fsdp2 = true;
  in.gpus_per_node = 4;
  in.activation_shape.seq_len = 2048;
  in.recompute = Recompute::kFull;
  return in;
}

TEST(Overlap, WithoutEarlyStartTheWholeStepIsExposed) {
  const PlanInputs in = Run8B();
  const FractionPoint p = EvaluateFraction(in, 1.0);
  ASSERT_TRUE(p.iteration.modelled);
  EXPECT_EQ(p.iteration.exposed_ms, p.time.step_ms);
  EXPECT_EQ(p.iteration.exposed_abort_ms, p.time.step_ms);
  EXPECT_DOUBLE_EQ(p.iteration.iteration_ms,
                   p.iteration.forward_ms + p.iteration.backward_ms + p.time.step_ms);
  EXPECT_DOUBLE_EQ(p.iteration.tokens_per_s, 2048 / (p.iteration.iteration_ms * 1e-3));
}

TEST(Overlap, ReleaseDownloadsDuringBackwardAndUploadsAtStep) {
  PlanInputs in = Run8B();
  in.grad_release = Choice::kOn;
  in.offload_compute = 1.0;  // every offloaded element streamed
  const FractionPoint p = EvaluateFraction(in, 1.0);
  const Rates r = ResolveRates(in);
  const double n = static_cast<double>(p.cold_elements);
  const double d = r.machine.d2h_gbps * 1e6, u = r.machine.h2d_gbps * 1e6;
  // Each gradient down during backward, which is long enough: only the last block's
  // remain when it ends.
  EXPECT_NEAR(p.iteration.during_backward_ms, n * 2 / d, 1e-6);
  EXPECT_LT(p.iteration.during_backward_ms, p.iteration.backward_ms);
  const double last = static_cast<double>(ClassesOf(in, ComputePlacement(
                                               [&] {
                                                 std::vector<uint64_t> n;
                                                 for (const TensorSpec& t : ShardSpecs(in))
                                                   n.push_back(t.numel);
                                                 return n;
                                               }(),
                                               1.0, in.placement, 1.0))
                                           .tail_streamed);
  EXPECT_NEAR(p.iteration.backlog_ms, last * 2 / d, 1e-6);  // block 0 and the embedding
  EXPECT_LT(p.iteration.backlog_ms, p.iteration.during_backward_ms / 8);
  // At Step each streamed element's state goes both ways, its gradient up beside it.
  const double bs = r.stream_bytes_per_element;
  EXPECT_NEAR(p.iteration.at_step_ms, n * std::max(bs / d, (bs + 2) / u), 1e-6);
  // With release the step's streamed upload carries the gradient too: the same figure.
  EXPECT_NEAR(p.time.h2d_ms, n * (bs + 2) / u, 1e-6);
  // No speculation: nothing to roll back.
  EXPECT_EQ(p.iteration.exposed_abort_ms, p.iteration.exposed_ms);
}

TEST(Overlap, SpeculationHidesTheStepInBackward) {
  PlanInputs in = Run8B();
  in.grad_release = Choice::kOn;
  const FractionPoint released = EvaluateFraction(in, 1.0);
  in.speculative_early_start = true;
  const FractionPoint spec = EvaluateFraction(in, 1.0);
  EXPECT_GT(spec.speculated_host + spec.speculated_streamed, 0u);
  // With release a speculated chunk's gradient goes down and up again beside its state
  // during backward: backward covers fewer chunks than without release (30% here).
  EXPECT_LT(spec.iteration.exposed_ms, 0.8 * released.iteration.exposed_ms);
  EXPECT_LT(spec.iteration.exposed_ms, 0.5 * spec.iteration.iteration_ms);
  // The work handed during backward fits in it (the budget is what backward covers).
  EXPECT_LE(spec.iteration.during_backward_ms, spec.iteration.backward_ms);
  // A rollback pays the speculated work beyond backward and the whole step; streamed
  // chunks (auto streams them all here) copy nothing back: their spares are dropped.
  EXPECT_EQ(spec.speculated_host, 0u);
  EXPECT_GE(spec.iteration.exposed_abort_ms, released.iteration.exposed_ms);
  // Its spares and held parameters are counted: host and GPU.
  EXPECT_GT(spec.host.speculation, 0u);
  EXPECT_GT(spec.gpu.speculation, 0u);
  EXPECT_LE(spec.gpu.total(), UsableGpuBytes(in));
  // Host-computed chunks restore their backups at a rollback: that costs more.
  in.offload_compute = 0.0;
  const FractionPoint host = EvaluateFraction(in, 1.0);
  in.speculative_early_start = false;
  const FractionPoint host_released = EvaluateFraction(in, 1.0);
  EXPECT_GT(host.speculated_host, 0u);
  EXPECT_GT(host.iteration.exposed_abort_ms, host_released.iteration.exposed_ms);
}

TEST(Overlap, ReleasedGradientsOfSpeculatedChunksCrossTheLinkTwice) {
  // Every streamed element speculated: without release its state goes up and comes down
  // during backward; with release its gradient goes down (released) and up again beside
  // the state, so the same speculation takes (B_s + g) / B_s as long on the link. With
  // an in-place budget (in_place_grad_bytes) that many bytes' elements read it where it
  // was handed over instead: (B_s + g) down, B_s up; such a gradient waits on the GPU for
  // its kernel as another waits for its download (no more GPU memory).
  PlanInputs in = Run8B();
  in.speculative_early_start = true;
  in.offload_compute = 1.0;
  in.speculative_stream_bytes = 64 * kGiB;
  // The four-H200 node's links with every rank busy: up slower than down.
  in.profile.pcie.h2d_concurrent_gbps = 20.2;
  in.profile.pcie.d2h_concurrent_gbps = 29.3;
  in.profile.host.dram_gbps = 283;
  const FractionPoint kept = EvaluateFraction(in, 1.0);
  in.grad_release = Choice::kOn;
  const FractionPoint released = EvaluateFraction(in, 1.0);
  in.in_place_grad_bytes = 2 * kGiB;
  const FractionPoint in_place = EvaluateFraction(in, 1.0);
  // (the element count comes back from the spares' bytes: within one element)
  ASSERT_GE(kept.speculated_streamed + 1, kept.cold_elements);
  ASSERT_GE(released.speculated_streamed + 1, released.cold_elements);
  const Rates r = ResolveRates(in);
  const double n = static_cast<double>(kept.speculated_streamed);
  const double bs = r.stream_bytes_per_element;
  const double d = r.machine.d2h_gbps * 1e6, u = r.machine.h2d_gbps * 1e6;
  ASSERT_LT(u, d);
  const double link = std::min(d, u);
  EXPECT_NEAR(kept.iteration.during_backward_ms, n * bs / link, 1e-6 * n * bs / link);
  EXPECT_NEAR(released.iteration.during_backward_ms, n * (bs + 2) / link,
              1e-6 * n * bs / link);
  const double si = static_cast<double>(kGiB);  // 2 GiB of bf16 gradients
  ASSERT_LT(si, n);
  const double want = (n - si) * (bs + 2) / link + si * std::max((bs + 2) / d, bs / u);
  EXPECT_NEAR(in_place.iteration.during_backward_ms, want, 1e-6 * want);
  EXPECT_LT(in_place.iteration.during_backward_ms, released.iteration.during_backward_ms);
  // Where a backward long enough leaves nothing waiting for the link, the same gradients
  // on the GPU either way.
  in.profile.gpu.train_tflops = 1;
  const FractionPoint slow = EvaluateFraction(in, 1.0);
  in.in_place_grad_bytes = 0;
  const FractionPoint slow_released = EvaluateFraction(in, 1.0);
  EXPECT_EQ(slow.gpu.gradients, slow_released.gpu.gradients);
  EXPECT_LE(in_place.gpu.gradients, released.gpu.gradients);
}

TEST(Overlap, ThePlanSaysWhatReadingInPlaceWouldGive) {
  // Release and speculation with no in-place budget: the plan names the budget that reads
  // every speculated chunk's gradient in place and the iteration it gives; given one, no
  // such note.
  PlanInputs in = Run8B();
  in.grad_release = Choice::kOn;
  in.speculative_early_start = true;
  in.offload_compute = 1.0;
  in.speculative_stream_bytes = 64 * kGiB;
  in.fraction = 1.0;
  in.profile.pcie.h2d_concurrent_gbps = 20.2;
  in.profile.pcie.d2h_concurrent_gbps = 29.3;
  in.profile.host.dram_gbps = 283;
  auto note = [](const PlanResult& p) {
    for (const std::string& m : p.messages)
      if (m.rfind("note: with in_place_grad_bytes", 0) == 0) return m;
    return std::string();
  };
  const PlanResult without = MakePlan(in);
  ASSERT_TRUE(without.feasible) << without.messages[0];
  const std::string said = note(without);
  ASSERT_FALSE(said.empty());
  const FractionPoint& r = without.recommended;
  in.in_place_grad_bytes = r.speculated_streamed * 2;  // bf16 gradients
  const PlanResult with = MakePlan(in);
  char want[64];
  std::snprintf(want, sizeof want, "iteration %.2f ms", with.recommended.iteration.iteration_ms);
  EXPECT_NE(said.find(want), std::string::npos) << said;
  EXPECT_LT(with.recommended.iteration.iteration_ms, r.iteration.iteration_ms);
  EXPECT_TRUE(note(with).empty()) << note(with);
}

TEST(Overlap, SpeculationBudgetsAreHonoured) {
  PlanInputs in = Run8B();
  in.grad_release = Choice::kOn;
  in.speculative_early_start = true;
  in.offload_compute = 1.0;
  in.speculative_stream_bytes = 0;
  in.speculative_host_bytes = 0;
  const FractionPoint none = EvaluateFraction(in, 1.0);
  EXPECT_EQ(none.speculated_streamed, 0u);
  EXPECT_EQ(none.host.speculation, 0u);
  in.speculative_stream_bytes = 2 * kGiB;
  const FractionPoint some = EvaluateFraction(in, 1.0);
  EXPECT_GT(some.speculated_streamed, 0u);
  EXPECT_LE(some.host.speculation, 2 * kGiB);
  EXPECT_LT(some.iteration.exposed_ms, none.iteration.exposed_ms);
}

TEST(Overlap, ShortBackwardLeavesGradientsWaiting) {
  // Two tokens of backward hide nothing: the downloads queue beyond it, and with release
  // their gradients stay on the GPU meanwhile.
  PlanInputs in = Run8B();
  in.activation_shape.seq_len = 2;
  in.grad_release = Choice::kOn;
  in.grads_in_flight_bytes = 64 * kGiB;  // unbounded
  const FractionPoint p = EvaluateFraction(in, 1.0);
  EXPECT_GT(p.iteration.backlog_ms, 0.9 * p.iteration.during_backward_ms);
  in.activation_shape.seq_len = 2048;
  const FractionPoint q = EvaluateFraction(in, 1.0);
  EXPECT_GT(p.gpu.gradients, q.gpu.gradients + kGiB);
  // tandem.torch's bound (Note [Gradients in flight]): no more than it waits.
  in.activation_shape.seq_len = 2;
  in.grads_in_flight_bytes = kGiB;
  const FractionPoint bounded = EvaluateFraction(in, 1.0);
  EXPECT_LE(bounded.gpu.gradients, q.gpu.gradients + kGiB);
  EXPECT_LT(bounded.gpu.gradients, p.gpu.gradients);
}

TEST(Overlap, ChooseSpeculationStopsAtTheRoomAndTheBackward) {
  const PlanInputs in = Run8B();
  const Rates rates = ResolveRates(in);
  const TrainingModel tm = ResolveTraining(in);
  PointClasses c;
  c.host = 1'000'000'000;
  c.streamed = 1'000'000'000;
  SpeculationRoom room;
  room.host_bytes = ~uint64_t{0} >> 1;
  room.gpu_bytes = ~uint64_t{0} >> 1;
  room.host_per_element = 5;
  room.stream_spare_per_element = 3;
  room.stream_hold_per_element = 2;
  const SpeculationElements all = ChooseSpeculation(in, rates, tm, c, true, room);
  EXPECT_GT(all.host, 0u);
  // Host-computed elements arrive first in backward, so they are taken first.
  EXPECT_TRUE(all.host == c.host || all.streamed == 0);
  room.host_bytes = 1000;
  const SpeculationElements tight = ChooseSpeculation(in, rates, tm, c, true, room);
  EXPECT_EQ(tight.host, 200u);
  EXPECT_EQ(tight.streamed, 0u);
  room.host_bytes = ~uint64_t{0} >> 1;
  room.gpu_bytes = 20;
  EXPECT_LE(ChooseSpeculation(in, rates, tm, c, true, room).streamed, 10u);
}

TEST(Overlap, ASpeculatedHostElementCopiesItsBackupFirst) {
  // Host-computed, every element speculated, release: each speculated element's gradient
  // goes down and the host copies its state (the backup, read and written at the rank's
  // share of the host's copy bandwidth) before it updates it.
  PlanInputs in = Run8B();
  in.grad_release = Choice::kOn;
  in.speculative_early_start = true;
  in.offload_compute = 0.0;
  in.speculative_host_bytes = ~uint64_t{0} >> 2;
  const FractionPoint p = EvaluateFraction(in, 1.0);
  ASSERT_GT(p.speculated_host, 0u);
  ASSERT_EQ(p.speculated_streamed, 0u);
  const Rates r = ResolveRates(in);
  const double n = static_cast<double>(p.speculated_host);
  const double b = static_cast<double>(p.host.speculation) / n;  // backup bytes per element
  const double copy = in.profile.host.copy_gbps / in.gpus_per_node * 1e6;
  const double kernel = 1.0 / (r.machine.host_gparams * 1e6) +
                        kHostChunkMs / static_cast<double>(in.chunk_elements);
  const double per = std::max(2.0 / (r.machine.d2h_gbps * 1e6), 2.0 * b / copy + kernel);
  EXPECT_NEAR(p.iteration.during_backward_ms, n * per, 1e-6 * n * per);
  // Twice the copy bandwidth: the same kernel, half the backup's time.
  PlanInputs fast = in;
  fast.profile.host.copy_gbps *= 2;
  const FractionPoint q = EvaluateFraction(fast, 1.0);
  EXPECT_NEAR(q.iteration.during_backward_ms,
              n * std::max(2.0 / (r.machine.d2h_gbps * 1e6), b / copy + kernel),
              1e-6 * n * per);
}


const OptimizerKwarg* Kwarg(const std::vector<OptimizerKwarg>& all, const std::string& name) {
  for (const OptimizerKwarg& k : all)
    if (k.name == name) return &k;
  return nullptr;
}

TEST(Overlap, ThePlanSaysHowToRunItsPoint) {
  PlanInputs in = Run8B();
  in.grad_release = Choice::kOn;
  in.speculative_early_start = true;
  in.offload_compute = 1.0;
  in.in_place_grad_bytes = 4 * kGiB;
  in.fraction = 0.5;  // everything fits at 0, where nothing is offloaded to say
  const PlanResult plan = MakePlan(in);
  ASSERT_TRUE(plan.feasible);
  const FractionPoint& r = plan.recommended;
  const std::vector<OptimizerKwarg> kw = OptimizerKwargs(in, r);
  ASSERT_NE(Kwarg(kw, "offload_fraction"), nullptr);
  ASSERT_NE(Kwarg(kw, "offload_compute"), nullptr);
  EXPECT_EQ(Kwarg(kw, "offload_fraction")->number, r.fraction);
  EXPECT_EQ(Kwarg(kw, "offload_compute")->Python(), "\"gpu\"");
  EXPECT_EQ(Kwarg(kw, "master_format")->text, "bf16+ecc8");
  EXPECT_EQ(Kwarg(kw, "release_grads")->Python(), "True");
  EXPECT_EQ(Kwarg(kw, "speculative_host_bytes"), nullptr);  // nothing host-computed
  // Every streamed spare the plan counts, as the engine's budget.
  ASSERT_NE(Kwarg(kw, "speculative_stream_bytes"), nullptr);
  EXPECT_EQ(Kwarg(kw, "speculative_stream_bytes")->integer, r.host.speculation);
  EXPECT_GT(r.host.speculation, 0u);
  EXPECT_EQ(Kwarg(kw, "in_place_grad_bytes")->integer, 4 * kGiB);
  const std::string said = PlanToText(plan);
  EXPECT_NE(said.find("opt = tandem.torch.AdamW(model.named_parameters(), offload_fraction="),
            std::string::npos)
      << said;
  const std::string json = PlanToJson(plan);
  EXPECT_NE(json.find("\"optimizer_kwargs\": {"), std::string::npos);
  EXPECT_NE(json.find("\"speculative_stream_bytes\": " +
                      std::to_string(Kwarg(kw, "speculative_stream_bytes")->integer)),
            std::string::npos);
}

TEST(Overlap, AHostBudgetOfZeroIsEveryHostComputedChunkAsInTheEngine) {
  PlanInputs in = Run8B();
  in.speculative_early_start = true;
  in.offload_compute = 0.0;  // every offloaded element computed on the host
  in.speculative_host_bytes = 0;
  const FractionPoint all = EvaluateFraction(in, 1.0);
  EXPECT_EQ(all.speculated_host, all.cold_elements);
  EXPECT_EQ(Kwarg(OptimizerKwargs(in, all), "speculative_host_bytes")->integer, 0u);
  in.speculative_host_bytes = 1 * kGiB;
  const FractionPoint some = EvaluateFraction(in, 1.0);
  EXPECT_GT(some.speculated_host, 0u);
  EXPECT_LT(some.speculated_host, some.cold_elements);
  const uint64_t bytes = Kwarg(OptimizerKwargs(in, some), "speculative_host_bytes")->integer;
  EXPECT_GT(bytes, 0u);
  EXPECT_LE(bytes, 1 * kGiB);
  EXPECT_EQ(bytes, some.speculative_host_bytes);
}
}  // namespace
}  // namespace tandem::planner
