// OptimizerConfig::host_cpus (every host thread of the optimizer runs on the given CPUs,
// bits unchanged) and OptimizerConfig::pinned_budget_bytes (over budget: no allocation,
// an error naming both figures; within: the report carries the budget).
#include <gtest/gtest.h>
#include <pthread.h>
#include <sched.h>

#include <algorithm>
#include <atomic>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "cpu_simd/cpu_pinning.h"
#include "cpu_simd/host_kernels.h"
#include "tandem/error.h"
#include "tandem/faults.h"
#include "tandem/optimizer.h"
#include "tests/thread_mask.h"
#include "tests/offload/hybrid_fixture.h"

namespace tandem {
namespace {

using testing::Model;

// What the probe saw: the affinity mask and the CPU of every thread that ran a piece of
// the optimizer's host work, and how many pieces ran.
std::mutex g_mu;
std::set<std::vector<int>> g_masks;
std::set<int> g_on_cpu;
std::set<std::thread::id> g_threads;
std::atomic<int> g_pieces{0};

void Probe() {
  const std::vector<int> mask = testing::ThreadMask();
  const int cpu = sched_getcpu();
  std::lock_guard<std::mutex> lock(g_mu);
  g_masks.insert(mask);
  g_on_cpu.insert(cpu);
  g_threads.insert(std::this_thread::get_id());
  ++g_pieces;
}

void ResetProbe() {
  std::lock_guard<std::mutex> lock(g_mu);
  g_masks.clear();
  g_on_cpu.clear();
  g_threads.clear();
  g_pieces = 0;
}

Model BigModel() {
  Model m;
  m.sizes = {300000, 4096 + 17, 1000, 0, 70000, 33};
  m.Init(7);
  return m;
}

OptimizerConfig Config(std::vector<int> cpus, int threads = 0) {
  OptimizerConfig c = testing::QuantizedConfig(ExecutionMode::kHost, 0.5,
                                               PlacementPolicy::kBackwardOrder, 4096, threads);
  c.speculative_early_start = true;  // the speculation worker and its arena too
  c.host_cpus = std::move(cpus);
  return c;
}

// Three steps with early start (GradReady in backward order); returns the parameters.
std::vector<std::vector<uint8_t>> Train(Model& m, const OptimizerConfig& cfg) {
  HybridOptimizer opt(m.Specs(2), cfg);
  for (int t = 0; t < 3; ++t) {
    m.FillGrads(t);
    opt.BeginStep(1e-3);
    for (size_t i = m.sizes.size(); i-- > 0;) opt.GradReady(i);
    EXPECT_TRUE(opt.Step(1e-3).applied);
  }
  return m.params;
}

TEST(HostCpus, EveryHostThreadRunsOnTheGivenCpuAndTheBitsDoNotChange) {
  const std::vector<int> all = cpu::ProcessCpus();
  if (all.size() < 2) GTEST_SKIP() << "needs 2 CPUs to tell a pinned thread from a free one";
  const int target = all.back();

  Model free_model = BigModel();
  const auto expected = Train(free_model, Config({}));

  Model pinned_model = BigModel();
  ResetProbe();
  cpu::SetWorkProbeForTesting(&Probe);
  // Two threads on one CPU: the arenas get a pool worker besides the caller, and pool
  // workers must be pinned as well (Note [Pinning a oneTBB arena]).
  const auto got = Train(pinned_model, Config({target}, 2));
  cpu::SetWorkProbeForTesting(nullptr);

  EXPECT_EQ(got, expected);  // pinning never changes results
  std::lock_guard<std::mutex> lock(g_mu);
  EXPECT_GT(g_pieces.load(), 10);
  EXPECT_EQ(g_masks, (std::set<std::vector<int>>{{target}}));
  EXPECT_EQ(g_on_cpu, (std::set<int>{target}));
  // The kernels' arena, the speculation worker and the copy threads at least.
  EXPECT_GE(g_threads.size(), 3u);
  // The caller's own thread got its affinity back.
  EXPECT_EQ(cpu::ProcessCpus(), all);
}

TEST(HostCpus, WithoutHostCpusThreadsKeepTheProcessAffinity) {
  const std::vector<int> all = cpu::ProcessCpus();
  Model m = BigModel();
  ResetProbe();
  cpu::SetWorkProbeForTesting(&Probe);
  Train(m, Config({}));
  cpu::SetWorkProbeForTesting(nullptr);
  std::lock_guard<std::mutex> lock(g_mu);
  EXPECT_EQ(g_masks, (std::set<std::vector<int>>{all}));
}

TEST(HostCpus, ZeroThreadsMeansOnePerGivenCpu) {
  const std::vector<int> all = cpu::ProcessCpus();
  EXPECT_EQ(cpu::HostDriver(0, 1 << 16, {all.front()}).threads(), 1);
  EXPECT_EQ(cpu::HostDriver(0, 1 << 16, all).threads(), static_cast<int>(all.size()));
  EXPECT_EQ(cpu::HostDriver(3, 1 << 16, {all.front()}).threads(), 3);
  EXPECT_EQ(cpu::HostDriver(0, 1 << 16, {all.front()}).cpus(), std::vector<int>{all.front()});
}

TEST(HostCpus, BadIdsAreRejectedNamingTheId) {
  Model m = BigModel();
  const std::vector<int> all = cpu::ProcessCpus();
  const int outside = all.back() + 1;  // not in the affinity (ascending list)
  struct Bad {
    std::vector<int> cpus;
    std::string expect;
  };
  const std::vector<Bad> bad = {
      {{-1}, "CPU -1 is negative"},
      {{all.front(), all.front()}, "CPU " + std::to_string(all.front()) + " is given twice"},
      {{outside}, "CPU " + std::to_string(outside) + " is not in this process's CPU affinity"},
      {{5000}, "CPU 5000 is not in"},
  };
  for (const Bad& b : bad) {
    try {
      HybridOptimizer opt(m.Specs(2), Config(b.cpus));
      ADD_FAILURE() << "accepted host_cpus " << b.expect;
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::kInvalidArgument);
      EXPECT_NE(e.message().find("host_cpus"), std::string::npos) << e.message();
      EXPECT_NE(e.message().find(b.expect), std::string::npos) << e.message();
    }
  }
}

TEST(OptimizerBudget, OverBudgetThrowsNamingBothFiguresBeforeAllocating) {
  Model m = BigModel();
  OptimizerConfig cfg = Config({});
  const uint64_t need = PredictMemory(m.Specs(2), cfg, ExecutionMode::kHost).host.total();
  ASSERT_GT(need, 0u);
  cfg.pinned_budget_bytes = need - 1;
  // Arm an allocation failure: an allocation made before the budget check would consume
  // it (and fail with "(injected)").
  cfg.faults = std::make_shared<FaultPlan>();
  cfg.faults->FailAllocation(MemoryKind::kHost, 1);
  try {
    HybridOptimizer opt(m.Specs(2), cfg);
    ADD_FAILURE() << "an optimizer over its budget was built";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kOutOfMemory);
    EXPECT_NE(e.message().find("pinned_budget_bytes"), std::string::npos) << e.message();
    EXPECT_NE(e.message().find(std::to_string(need) + " bytes"), std::string::npos) << e.message();
    EXPECT_NE(e.message().find(std::to_string(need - 1) + " bytes"), std::string::npos)
        << e.message();
    EXPECT_EQ(e.message().find("injected"), std::string::npos) << e.message();
  }
  // Still armed: nothing was allocated above. The next construction hits it.
  cfg.pinned_budget_bytes = need;
  try {
    HybridOptimizer opt(m.Specs(2), cfg);
    ADD_FAILURE() << "the armed allocation failure was consumed by the rejected construction";
  } catch (const Error& e) {
    EXPECT_NE(e.message().find("injected"), std::string::npos) << e.message();
  }
}

TEST(OptimizerBudget, WithinBudgetTheReportCarriesIt) {
  Model m = BigModel();
  OptimizerConfig cfg = Config({});
  const uint64_t need = PredictMemory(m.Specs(2), cfg, ExecutionMode::kHost).host.total();
  cfg.pinned_budget_bytes = need;  // exactly enough
  HybridOptimizer opt(m.Specs(2), cfg);
  EXPECT_EQ(opt.memory().host_budget, need);
  EXPECT_EQ(opt.memory().host.total(), need);
  EXPECT_EQ(PredictMemory(m.Specs(2), cfg, ExecutionMode::kHost).host_budget, need);
  cfg.pinned_budget_bytes = 0;  // no limit
  HybridOptimizer unlimited(m.Specs(2), cfg);
  EXPECT_EQ(unlimited.memory().host_budget, 0u);
}

}  // namespace
}  // namespace tandem
