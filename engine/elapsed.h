// Milliseconds on the steady clock: what the step's timings (tandem::StageTimes) and the
// offload paths' busy times are measured in, written once.
#pragma once

#include <chrono>

namespace tandem {

using SteadyClock = std::chrono::steady_clock;

// Milliseconds from `from` to `to` (negative when `to` comes first).
inline double MsBetween(SteadyClock::time_point from, SteadyClock::time_point to) {
  return std::chrono::duration<double, std::milli>(to - from).count();
}

// Milliseconds from `from` until now.
inline double MsSince(SteadyClock::time_point from) { return MsBetween(from, SteadyClock::now()); }

}  // namespace tandem
