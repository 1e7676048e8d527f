#include "cpu_simd/host_norm.h"

#include <tbb/enumerable_thread_specific.h>
#include <tbb/parallel_for.h>

#include <cmath>
#include <string>

#include "cpu_simd/cpu_pinning.h"
#include "cpu_simd/host_kernel_options.h"
#include "engine/fp_bits.h"
#include "tandem/error.h"

namespace tandem::cpu {

namespace {

// PieceSquares for one dtype: `load(i)` converts element i; the lane loop vectorizes.
template <typename Load>
double Lanes(uint64_t n, Load load) {
  double lane[exact::kLanes] = {};
  uint64_t i = 0;
  for (; i + exact::kLanes <= n; i += exact::kLanes)
    for (uint32_t j = 0; j < exact::kLanes; ++j) {
      const double x = load(i + j);
      lane[j] += x * x;
    }
  for (uint32_t j = 0; i + j < n; ++j) {
    const double x = load(i + j);
    lane[j] += x * x;
  }
  for (uint32_t s = exact::kLanes / 2; s > 0; s /= 2)
    for (uint32_t j = 0; j < s; ++j) lane[j] += lane[j + s];
  return lane[0];
}

}  // namespace

double PieceSquares(const void* ptr, DType dtype, uint64_t n) {
  switch (dtype) {
    case DType::kF32: {
      const auto* p = static_cast<const float*>(ptr);
      return Lanes(n, [p](uint64_t i) { return double(p[i]); });
    }
    case DType::kBF16: {
      const auto* p = static_cast<const uint16_t*>(ptr);
      return Lanes(n, [p](uint64_t i) { return double(num::Bf16ToF32(p[i])); });
    }
    case DType::kF16: {
      const auto* p = static_cast<const uint16_t*>(ptr);
      return Lanes(n, [p](uint64_t i) { return double(num::F16ToF32(p[i])); });
    }
  }
  return 0.0;
}

NormResult HostGradNorm(const std::vector<HostGrad>& grads) {
  // Tasks: runs of consecutive pieces of one tensor, about kHostGrainElements elements each.
  struct Task {
    size_t tensor;
    uint64_t first, count;  // pieces
  };
  std::vector<Task> tasks;
  for (size_t t = 0; t < grads.size(); ++t) {
    const HostGrad& g = grads[t];
    if (g.n == 0) continue;
    const uint64_t run = g.run == 0 ? g.n : g.run;
    const uint64_t pieces = g.n / run * PiecesPerRun(run);
    const uint64_t per_task =
        std::max<uint64_t>(1, kHostGrainElements / std::min<uint64_t>(run, exact::kNormPiece));
    for (uint64_t p = 0; p < pieces; p += per_task)
      tasks.push_back({t, p, std::min(per_task, pieces - p)});
  }
  struct Partial {
    exact::Acc acc{};
    bool bad = false;
  };
  tbb::enumerable_thread_specific<Partial> partials;
  tbb::parallel_for(size_t{0}, tasks.size(), [&](size_t i) {
    RunWorkProbe();
    const Task& task = tasks[i];
    const HostGrad& g = grads[task.tensor];
    const uint64_t run = g.run == 0 ? g.n : g.run;
    const uint64_t per_run = PiecesPerRun(run);
    const size_t bytes = DTypeSize(g.dtype);
    exact::Acc acc{};
    bool bad = false;
    for (uint64_t p = task.first; p < task.first + task.count; ++p) {
      const uint64_t begin = p / per_run * run + p % per_run * exact::kNormPiece;
      const uint64_t len = std::min(exact::kNormPiece, run - p % per_run * exact::kNormPiece);
      const double sum =
          PieceSquares(static_cast<const char*>(g.ptr) + begin * bytes, g.dtype, len);
      if (std::isfinite(sum))
        exact::Add(acc, sum);
      else
        bad = true;
    }
    exact::Normalize(acc);  // < 2^17 additions of < 2^33 each: no overflow
    Partial& mine = partials.local();
    exact::Merge(mine.acc, acc);
    exact::Normalize(mine.acc);
    mine.bad |= bad;
  });
  NormResult r;
  for (const Partial& p : partials) {
    exact::Merge(r.exact, p.acc);
    r.nonfinite |= p.bad;
  }
  if (!exact::Normalize(r.exact))
    throw Error(ErrorKind::kInternal, "gradient pre-pass: the exact sum overflowed");
  r.sum_squares = exact::ToDouble(r.exact);
  return r;
}

}  // namespace tandem::cpu
