// What would fit when a plan does not.
//
// Note [What would fit]
// A plan that does not fit says what would, each alternative planned (FitFraction), not
// guessed: the same inputs with gradient release on (the GPU then holds only the
// gradients in flight); with full activation recomputation; with the longest sequence and
// the largest micro-batch that fit (bisection: sequences in multiples of 256, or of 16
// below 256); with the largest GPU headroom (a whole percentage) that fits; and with the
// host memory that the smallest fraction fitting the GPU needs.
// The searches consider gradient release (auto) unless the inputs ask for it always: a
// shorter sequence is no answer where release alone is.
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "planner/plan.h"

namespace tandem::planner {
namespace {

// The largest n in [1, limit) with fits(n), or 0 if fits(1) fails; fits is monotone
// (true up to some n, false above) and false at `limit`.
template <typename F>
uint64_t Largest(uint64_t limit, F fits) {
  if (limit <= 1 || !fits(1)) return 0;
  uint64_t lo = 1, hi = limit;  // fits(lo), !fits(hi)
  while (hi - lo > 1) {
    const uint64_t mid = lo + (hi - lo) / 2;
    (fits(mid) ? lo : hi) = mid;
  }
  return lo;
}

}  // namespace

std::vector<std::string> WhatWouldFit(const PlanInputs& in, uint64_t host_short_bytes) {
  std::vector<std::string> out;
  auto say = [&out](const std::string& what, double fraction) {
    char b[64];
    std::snprintf(b, sizeof b, ", from offload fraction %.4f", fraction);
    out.push_back("would fit: " + what + b);
  };
  PlanInputs base = in;
  if (base.grad_release == Choice::kOff) {
    PlanInputs t = in;
    t.grad_release = Choice::kOn;
    const double f = FitFraction(t);
    if (f >= 0) say("gradient release (--grad-release; release_grads=True)", f);
    base.grad_release = Choice::kAuto;
  }
  const bool estimated = !in.activation_bytes_given && in.activation_shape.seq_len > 0;
  if (estimated && in.recompute != Recompute::kFull) {
    PlanInputs t = base;
    t.recompute = Recompute::kFull;
    const double f = FitFraction(t);
    if (f >= 0)
      say(std::string("full activation recomputation (--recompute full") +
              (ResolvedActivationModel(t) == ActivationModel::kTransformers
                   ? ": model.gradient_checkpointing_enable())"
                   : ")"),
          f);
  }
  if (estimated) {
    const uint64_t seq = in.activation_shape.seq_len;
    const uint64_t unit = seq > 256 ? 256 : 16;
    PlanInputs t = base;
    const uint64_t n = Largest((seq + unit - 1) / unit, [&](uint64_t m) {
      t.activation_shape.seq_len = m * unit;
      return FitFraction(t) >= 0;
    });
    if (n > 0) {
      t.activation_shape.seq_len = n * unit;
      say("a sequence of " + std::to_string(n * unit) + " tokens (--seq " +
              std::to_string(n * unit) + ", the longest multiple of " + std::to_string(unit) +
              " that fits)",
          FitFraction(t));
    }
  }
  if (estimated && in.activation_shape.batch > 1) {
    PlanInputs t = base;
    const uint64_t n = Largest(in.activation_shape.batch, [&](uint64_t b) {
      t.activation_shape.batch = b;
      return FitFraction(t) >= 0;
    });
    if (n > 0) {
      t.activation_shape.batch = n;
      say("a micro-batch of " + std::to_string(n) + " (--batch " + std::to_string(n) + ")",
          FitFraction(t));
    }
  }
  // Less headroom: the largest whole percentage below the inputs' that fits (what the plan
  // does not count, NCCL's buffers and other processes, must then fit in it).
  const double headroom_pct = in.gpu_headroom_fraction * 100;
  if (in.gpu_headroom_bytes == 0 && headroom_pct >= 1) {
    PlanInputs t = base;
    for (int pct = static_cast<int>(std::ceil(headroom_pct)) - 1; pct >= 0; --pct) {
      t.gpu_headroom_fraction = pct / 100.0;
      const double f = FitFraction(t);
      if (f < 0) continue;
      say("a GPU headroom of " + std::to_string(pct) + "% (--headroom " + std::to_string(pct) +
              "%, the most that fits: NCCL's buffers and other processes must fit in it)",
          f);
      break;
    }
  }
  if (host_short_bytes > 0) {
    PlanInputs t = base;
    const uint64_t gib = (in.host_budget + host_short_bytes + (uint64_t{1} << 30) - 1) >> 30;
    t.host_budget = gib << 30;
    const double f = FitFraction(t);
    if (f >= 0) say("host memory of " + std::to_string(gib) + " GiB per node (--host-mem " +
                        std::to_string(gib) + "GiB)",
                    f);
  }
  return out;
}

}  // namespace tandem::planner
