// A load on the machine while something else is measured: `round` runs again and again on
// its own thread until Stop(). tandem-bench calibrate times the host kernels this way
// while pinned PCIe copies run both ways ("under DMA load").
//
//   tandem::tools::BackgroundLoad load([&] { CopyBothWaysOnce(); });
//   load.WaitForRounds(1);           // the load is running
//   const double rate = Measure();   // measured under the load
//   const uint64_t rounds = load.Stop();  // rethrows what a round threw
//
// Thread-safety: every member may be called from any thread; `round` runs on the load's
// thread only, never two at once.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <functional>
#include <mutex>
#include <thread>

namespace tandem::tools {

class BackgroundLoad {
 public:
  // Starts the thread; `round` must return (a round is one unit of load). A round that
  // throws ends the load; Stop() rethrows its exception.
  explicit BackgroundLoad(std::function<void()> round);
  // Stops (waiting for the round in progress) and drops any exception.
  ~BackgroundLoad();
  BackgroundLoad(const BackgroundLoad&) = delete;
  BackgroundLoad& operator=(const BackgroundLoad&) = delete;

  // Blocks until `n` rounds have finished or the load has ended (a round threw). Returns
  // whether n rounds finished.
  bool WaitForRounds(uint64_t n);
  // Asks the thread to stop after its current round and joins it. Returns the rounds
  // finished; rethrows the exception of a round that threw. Later calls return the same
  // count without rethrowing.
  uint64_t Stop();
  uint64_t rounds() const { return rounds_.load(); }

 private:
  void Run();

  std::function<void()> round_;
  std::atomic<bool> stop_{false};
  std::atomic<uint64_t> rounds_{0};
  std::mutex mu_;
  std::condition_variable cv_;
  bool ended_ = false;        // guarded by mu_
  std::exception_ptr error_;  // guarded by mu_; taken by the first Stop()
  std::thread thread_;
};

}  // namespace tandem::tools
