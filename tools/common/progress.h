// Progress for the tools: a one-line bar with an ETA on a terminal, silence in a log.
//
//   tandem::tools::LineBufferStdout();            // first thing in main()
//   tandem::tools::Progress bar("calibrate", 18);  // 18 units of work
//   for (...) { Measure(); bar.Advance(); }
//   bar.Print("  host copy %.1f GB/s\n", gbps);   // results go to stdout, bar redrawn
//
// The bar is drawn on stderr only when stderr is a terminal (isatty), redrawn from a
// background thread twice a second so that the elapsed time and the ETA move during a long
// measurement, and erased when the work is done: piped or redirected runs print nothing of
// it, so logs hold only the results. The ETA is the elapsed time scaled by the units left
// over the units done; with an unknown total (0) the bar shows the elapsed time only.
//
// Thread-safety: every member may be called from any thread.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <mutex>
#include <string>
#include <thread>

namespace tandem::tools {

// Makes stdout line-buffered (a pipe or file is fully buffered by default), so that a log
// shows each result line when it is printed. Call before anything is written to stdout.
void LineBufferStdout();

// "45s", "3m07s", "1h02m"; "--" for a negative or non-finite duration.
std::string FormatDuration(double seconds);

// The bar's text without any terminal control characters, at most `width` characters:
//   "calibrate [#########.........] 9/18  12s, ETA 12s  host adamw q8"
// `total` 0 means unknown: "calibrate 9 done  12s  host adamw q8".
std::string FormatProgressLine(const std::string& label, uint64_t done, uint64_t total,
                               double elapsed_s, const std::string& note, int width);

class Progress {
 public:
  // Draws on stderr when stderr is a terminal.
  Progress(std::string label, uint64_t total);
  // Draws on `out` when `enabled` (tests pass a file and true or false).
  Progress(std::string label, uint64_t total, std::FILE* out, bool enabled);
  ~Progress();  // Finish()
  Progress(const Progress&) = delete;
  Progress& operator=(const Progress&) = delete;

  bool enabled() const { return enabled_; }
  void Advance(uint64_t units = 1);
  void Set(uint64_t done);
  void SetTotal(uint64_t total);
  // A short note shown after the bar (what is being measured now).
  void Note(std::string note);
  // printf to stdout without tearing the bar: erases it, prints, flushes, redraws.
  void Print(const char* format, ...) __attribute__((format(printf, 2, 3)));
  // Erases the bar and stops redrawing; later calls draw nothing. Idempotent.
  void Finish();

 private:
  void DrawLocked();
  void EraseLocked();
  void Tick();

  const std::string label_;
  std::FILE* const out_;
  const bool enabled_;
  const std::chrono::steady_clock::time_point start_;
  std::mutex mu_;
  std::condition_variable cv_;
  uint64_t done_ = 0, total_ = 0;
  std::string note_;
  bool finished_ = false, drawn_ = false;
  std::thread ticker_;
};

}  // namespace tandem::tools
