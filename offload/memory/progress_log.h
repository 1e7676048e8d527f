// ProgressLog: progress lines for a long piece of work (the optimizer's construction),
// counted in elements, printed only once the work has run for a while.
//
// Nothing is printed while the work is younger than `quiet_s`; after that a line at most
// every `every_s` seconds ("tandem: initialising optimizer state: 41% (3.2 G of 7.8 G
// elements), 5.1 s"), and Finish() prints a final line with the total and the time
// ("...: done, 7.8 G elements, 12.3 s") when any progress line was printed or the work
// took longer than `quiet_s`. Fast work prints nothing at all.
//
// Lines go to a Logger (tandem/logger.h: OptimizerConfig::info_log, stderr by default),
// or to a FILE*. Thread-safe: Add may be called from any number of threads at once; lines
// never interleave. `out` / `log` must stay valid for the object's life.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <mutex>
#include <memory>
#include <string>

#include "tandem/logger.h"

namespace tandem::offload {

class ProgressLog {
 public:
  // Times count from `start` (e.g. when the construction began, so slow allocations
  // before the counted work make the first line come sooner).
  ProgressLog(std::string what, uint64_t total, double quiet_s = 3.0, double every_s = 3.0,
              std::FILE* out = stderr,
              std::chrono::steady_clock::time_point start = std::chrono::steady_clock::now());
  // Lines to `log` (without their newline).
  ProgressLog(std::string what, uint64_t total, double quiet_s, double every_s, Logger* log,
              std::chrono::steady_clock::time_point start = std::chrono::steady_clock::now());
  // `done` more elements are finished; may print a progress line.
  void Add(uint64_t done);
  // Prints the final line (see above). Call once, after the last Add.
  void Finish();
  int lines() const { return lines_; }  // lines printed so far

 private:
  double Elapsed() const;
  void Print(const std::string& line);

  const std::string what_;
  const uint64_t total_;
  const double quiet_s_, every_s_;
  std::FILE* const out_;  // or
  Logger* const log_;
  const std::chrono::steady_clock::time_point start_;
  std::atomic<uint64_t> done_{0};
  std::atomic<double> next_s_;  // earliest time of the next progress line
  std::mutex print_;
  int lines_ = 0;
};

// "3.2 G" / "41.0 M" / "900": an element count for a progress line.
std::string CountText(uint64_t n);

}  // namespace tandem::offload
