// Progress bar with ETA for the tools (see progress.h).
#include "progress.h"

#include <sys/ioctl.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdarg>

namespace tandem::tools {

void LineBufferStdout() { std::setvbuf(stdout, nullptr, _IOLBF, 0); }

std::string FormatDuration(double seconds) {
  if (!std::isfinite(seconds) || seconds < 0) return "--";
  const long s = std::lround(seconds);
  char buf[32];
  if (s < 60)
    std::snprintf(buf, sizeof buf, "%lds", s);
  else if (s < 3600)
    std::snprintf(buf, sizeof buf, "%ldm%02lds", s / 60, s % 60);
  else
    std::snprintf(buf, sizeof buf, "%ldh%02ldm", s / 3600, (s % 3600) / 60);
  return buf;
}

std::string FormatProgressLine(const std::string& label, uint64_t done, uint64_t total,
                               double elapsed_s, const std::string& note, int width) {
  std::string line = label;
  if (total == 0) {
    // Appended piece by piece: GCC 12 at -O3 warns (-Wrestrict) on " " + to_string(...).
    line.append(" ").append(std::to_string(done)).append(" done  ");
    line += FormatDuration(elapsed_s);
  } else {
    done = std::min(done, total);
    constexpr int kBar = 24;
    const int filled = int(kBar * done / total);
    line.append(" [").append(size_t(filled), '#').append(size_t(kBar - filled), '.');
    line.append("] ").append(std::to_string(done)).append("/").append(std::to_string(total));
    line.append("  ").append(FormatDuration(elapsed_s)).append(", ETA ");
    line += done == 0 ? std::string("--")
                      : FormatDuration(elapsed_s * double(total - done) / double(done));
  }
  if (!note.empty()) line.append("  ").append(note);
  if (width > 0 && line.size() > size_t(width)) line.resize(size_t(width));
  return line;
}

namespace {

int TerminalWidth(std::FILE* out) {
  winsize ws{};
  if (ioctl(fileno(out), TIOCGWINSZ, &ws) == 0 && ws.ws_col > 0) return ws.ws_col - 1;
  return 79;
}

}  // namespace

Progress::Progress(std::string label, uint64_t total)
    : Progress(std::move(label), total, stderr, isatty(fileno(stderr)) != 0) {}

Progress::Progress(std::string label, uint64_t total, std::FILE* out, bool enabled)
    : label_(std::move(label)),
      out_(out),
      enabled_(enabled),
      start_(std::chrono::steady_clock::now()),
      total_(total) {
  if (!enabled_) return;
  std::lock_guard lock(mu_);
  DrawLocked();
  ticker_ = std::thread([this] { Tick(); });
}

Progress::~Progress() { Finish(); }

void Progress::Tick() {
  std::unique_lock lock(mu_);
  while (!finished_) {
    cv_.wait_for(lock, std::chrono::milliseconds(500));
    if (!finished_) DrawLocked();
  }
}

void Progress::Advance(uint64_t units) {
  std::lock_guard lock(mu_);
  done_ += units;
  DrawLocked();
}

void Progress::Set(uint64_t done) {
  std::lock_guard lock(mu_);
  done_ = done;
  DrawLocked();
}

void Progress::SetTotal(uint64_t total) {
  std::lock_guard lock(mu_);
  total_ = total;
  DrawLocked();
}

void Progress::Note(std::string note) {
  std::lock_guard lock(mu_);
  note_ = std::move(note);
  DrawLocked();
}

void Progress::Print(const char* format, ...) {
  std::lock_guard lock(mu_);
  EraseLocked();
  va_list args;
  va_start(args, format);
  std::vprintf(format, args);
  va_end(args);
  std::fflush(stdout);
  DrawLocked();
}

void Progress::Finish() {
  {
    std::lock_guard lock(mu_);
    if (finished_) return;
    EraseLocked();
    finished_ = true;
  }
  cv_.notify_all();
  if (ticker_.joinable()) ticker_.join();
}

void Progress::DrawLocked() {
  if (!enabled_ || finished_) return;
  const double elapsed =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  const std::string line =
      FormatProgressLine(label_, done_, total_, elapsed, note_, TerminalWidth(out_));
  std::fprintf(out_, "\r\033[K%s", line.c_str());
  std::fflush(out_);
  drawn_ = true;
}

void Progress::EraseLocked() {
  if (!enabled_ || !drawn_) return;
  std::fprintf(out_, "\r\033[K");
  std::fflush(out_);
  drawn_ = false;
}

}  // namespace tandem::tools
