// Contracts of the optimizer that hold beside its numbers, host mode: the const methods
// run concurrently with each other (include/tandem/optimizer.h, "Thread safety"), the
// progress lines go to the configured logger, and the host stream device (the one the
// GPU-stream executor runs on in host mode) keeps the ordering contract of
// offload/devices/stream_device.h with its queues really running at once.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "cpu_simd/host_kernels.h"
#include "hybrid_fixture.h"
#include "offload/devices/stream_device.h"
#include "offload/memory/progress_log.h"
#include "tandem/error.h"
#include "tandem/logger.h"
#include "tandem/optimizer.h"

namespace tandem {
namespace {

using testing::Model;

OptimizerConfig Config(double share) {
  OptimizerConfig c =
      testing::QuantizedConfig(ExecutionMode::kHost, 1.0, PlacementPolicy::kBackwardOrder, 1024, 2);
  c.offload_compute = share;
  c.stream_chunk_bytes = 8192;
  return c;
}

// Snapshot, memory, last_step_times, WaitParam, WaitGradConsumed, placement and the
// counts from four threads at once, between steps: each gives what it gives alone.
TEST(Contracts, ConstMethodsRunConcurrently) {
  for (double share : {0.0, 0.5, 1.0}) {
    Model m;
    m.Init(4);
    HybridOptimizer opt(m.Specs(2), Config(share));
    for (int t = 0; t < 2; ++t) {
      m.FillGrads(t);
      ASSERT_TRUE(opt.Step(1e-3).applied);
    }
    const HybridOptimizer& view = opt;
    const OptimizerSnapshot snap = view.Snapshot();
    const uint64_t bytes = view.memory().host.total();
    const uint64_t chunks = view.last_step_times().stream_chunks;
    std::atomic<int> bad{0};
    std::vector<std::thread> threads;
    for (int k = 0; k < 4; ++k)
      threads.emplace_back([&] {
        for (int i = 0; i < 20; ++i) {
          if (!(view.Snapshot() == snap)) ++bad;
          if (view.memory().host.total() != bytes) ++bad;
          if (view.last_step_times().stream_chunks != chunks) ++bad;
          for (size_t t = 0; t < view.tensor_count(); ++t) {
            view.WaitParam(t, nullptr);
            view.WaitGradConsumed(t, nullptr);
            if (view.tensor_step_count(t) != 2) ++bad;
          }
          if (view.placement().tensors.size() != m.sizes.size() || view.step_count() != 2) ++bad;
        }
      });
    for (std::thread& th : threads) th.join();
    EXPECT_EQ(bad.load(), 0) << "share " << share;
  }
}

struct Lines : Logger {
  std::mutex mu;
  std::vector<std::string> lines;
  void Log(const std::string& line) override {
    std::lock_guard<std::mutex> lock(mu);
    lines.push_back(line);
  }
};

TEST(Contracts, ProgressLinesGoToTheLogger) {
  Lines log;
  offload::ProgressLog progress("initialising optimizer state", 3'200'000'000ull, 0.0, 0.0, &log);
  progress.Add(1'000'000'000ull);
  progress.Finish();
  ASSERT_EQ(log.lines.size(), 2u);
  EXPECT_EQ(log.lines[0].rfind("tandem: initialising optimizer state: 31% (1.0 G of 3.2 G", 0), 0u)
      << log.lines[0];
  EXPECT_EQ(log.lines[0].find('\n'), std::string::npos);  // a line, without its newline
  // A fast construction says nothing, wherever its lines would go.
  auto quiet = std::make_shared<Lines>();
  Model m;
  m.Init(2);
  OptimizerConfig c = Config(0.5);
  c.info_log = quiet;
  HybridOptimizer opt(m.Specs(2), c);
  EXPECT_TRUE(quiet->lines.empty());
  ASSERT_NE(StderrLogger(), nullptr);
}

using Q = offload::StreamDevice::Queue;

// Each queue runs in order; a Wait holds its queue until the event's last Record before
// it is reached, and not longer; events recorded on the caller are reached at once.
TEST(HostStreamDevice, WaitsFollowTheRecordsBeforeThem) {
  cpu::HostDriver driver(2);
  std::unique_ptr<offload::StreamDevice> dev = offload::MakeHostStreamDevice(&driver, {});
  const offload::StreamDevice::Event up = dev->NewEvent(), run = dev->NewEvent();
  const offload::StreamDevice::What w{0, 1, 8, "test"};
  // Op 1 (on kUp) holds its queue until op 3 (on kDown, which waits for nothing) has
  // run, or 5 s; op 2 (on kRun) waits for an event recorded after op 1.
  std::vector<int> order;
  std::mutex mu;
  std::atomic<bool> third_ran{false};
  struct Mark {
    std::vector<int>* order;
    std::mutex* mu;
    std::atomic<bool>* third_ran;
    int id;
  };
  auto note = [](void* arg) {
    const Mark* m = static_cast<const Mark*>(arg);
    if (m->id == 1)
      for (int i = 0; i < 5000 && !m->third_ran->load(); ++i)
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
    std::lock_guard<std::mutex> lock(*m->mu);
    m->order->push_back(m->id);
    if (m->id == 3) m->third_ran->store(true);
  };
  Mark first{&order, &mu, &third_ran, 1}, second{&order, &mu, &third_ran, 2},
      third{&order, &mu, &third_ran, 3};
  dev->HostCall(Q::kUp, note, &first, w);
  dev->Record(up, Q::kUp, w);
  dev->Wait(Q::kRun, up, w);
  dev->HostCall(Q::kRun, note, &second, w);  // after 1
  dev->HostCall(Q::kDown, note, &third, w);  // nothing to wait for: runs beside 1
  dev->Record(run, Q::kRun, w);
  dev->Synchronize(run);
  dev->SynchronizeAll();
  ASSERT_EQ(order.size(), 3u);
  EXPECT_EQ(order[0], 3);
  EXPECT_EQ(order[1], 1);
  EXPECT_EQ(order[2], 2);
  EXPECT_GE(dev->ElapsedMs(up, run), 0.0);
  // A Wait on an event never recorded waits for nothing; a Record on the caller is
  // reached at once.
  const offload::StreamDevice::Event never = dev->NewEvent(), caller = dev->NewEvent();
  dev->Wait(Q::kCaller, never, w);
  dev->Record(caller, Q::kCaller, w);
  dev->Synchronize(caller);
}

// A kernel that fails while its queue runs it is reported by the next synchronisation,
// once; the queues go on.
TEST(HostStreamDevice, AFailedOperationIsReportedBySynchronize) {
  cpu::HostDriver driver(2);
  std::unique_ptr<offload::StreamDevice> dev = offload::MakeHostStreamDevice(&driver, {});
  StepSpan bad;  // n > 0 and no arrays: the host kernels refuse it
  bad.n = 32;
  const size_t p = dev->AddProgram(Algorithm::kAdamW, {bad}, {0}, {0});
  const std::vector<StepScalars> scalars{
      ComputeStepScalars(Algorithm::kAdamW, HyperParams{}, 1e-3, 1, 1.0)};
  dev->Run(Q::kRun, p, scalars, {0}, {0, 1, 0, "kernel"});
  EXPECT_THROW(dev->SynchronizeAll(), Error);
  dev->SynchronizeAll();  // reported once
}

}  // namespace
}  // namespace tandem
