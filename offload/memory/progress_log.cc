#include "offload/memory/progress_log.h"

#include <utility>

namespace tandem::offload {

std::string CountText(uint64_t n) {
  char buf[32];
  if (n >= 1'000'000'000ull)
    std::snprintf(buf, sizeof buf, "%.1f G", n / 1e9);
  else if (n >= 1'000'000ull)
    std::snprintf(buf, sizeof buf, "%.1f M", n / 1e6);
  else
    std::snprintf(buf, sizeof buf, "%llu", static_cast<unsigned long long>(n));
  return buf;
}

ProgressLog::ProgressLog(std::string what, uint64_t total, double quiet_s, double every_s,
                         std::FILE* out, std::chrono::steady_clock::time_point start)
    : what_(std::move(what)),
      total_(total),
      quiet_s_(quiet_s),
      every_s_(every_s),
      out_(out),
      log_(nullptr),
      start_(start),
      next_s_(quiet_s) {}

ProgressLog::ProgressLog(std::string what, uint64_t total, double quiet_s, double every_s,
                         Logger* log, std::chrono::steady_clock::time_point start)
    : what_(std::move(what)),
      total_(total),
      quiet_s_(quiet_s),
      every_s_(every_s),
      out_(nullptr),
      log_(log),
      start_(start),
      next_s_(quiet_s) {}

double ProgressLog::Elapsed() const {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
}

void ProgressLog::Print(const std::string& line) {  // `line` ends in a newline
  if (log_ != nullptr) {
    try {
      log_->Log(line.substr(0, line.size() - 1));
    } catch (...) {  // a logger that throws loses its line, not the construction
    }
  } else {
    std::fputs(line.c_str(), out_);
    std::fflush(out_);
  }
  ++lines_;
}

void ProgressLog::Add(uint64_t done) {
  const uint64_t now_done = done_.fetch_add(done) + done;
  const double t = Elapsed();
  if (t < next_s_.load(std::memory_order_relaxed)) return;
  std::unique_lock lock(print_, std::try_to_lock);  // another thread is printing: skip
  if (!lock.owns_lock() || t < next_s_.load()) return;
  next_s_ = t + every_s_;
  char line[256];
  const double pct = total_ > 0 ? 100.0 * static_cast<double>(now_done) / total_ : 100.0;
  std::snprintf(line, sizeof line, "tandem: %s: %.0f%% (%s of %s elements), %.1f s\n",
                what_.c_str(), pct, CountText(now_done).c_str(), CountText(total_).c_str(), t);
  Print(line);
}

void ProgressLog::Finish() {
  const double t = Elapsed();
  std::lock_guard lock(print_);
  if (lines_ == 0 && t < quiet_s_) return;
  char line[256];
  std::snprintf(line, sizeof line, "tandem: %s: done, %s elements, %.1f s\n", what_.c_str(),
                CountText(done_.load()).c_str(), t);
  Print(line);
}

}  // namespace tandem::offload
