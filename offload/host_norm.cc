#include "offload/host_norm.h"

#include <tbb/parallel_for.h>

#include <cmath>

#include "cpu_simd/cpu_pinning.h"
#include "engine/dtype_io.h"

namespace tandem::offload {
namespace {
constexpr size_t kPiece = 1 << 16;

struct Piece {
  size_t tensor, begin, end;
};

double SumSquares(const HostGrad& g, size_t b, size_t e, bool* nonfinite) {
  double s = 0;
  bool bad = false;
  for (size_t i = b; i < e; ++i) {
    const float x = num::LoadAsF32(g.ptr, g.dtype, i);
    bad |= !std::isfinite(x);
    s += double(x) * double(x);
  }
  *nonfinite = bad;
  return s;
}
}  // namespace

NormResult HostGradNorm(const std::vector<HostGrad>& grads) {
  std::vector<Piece> pieces;
  for (size_t t = 0; t < grads.size(); ++t)
    for (size_t b = 0; b < grads[t].n; b += kPiece)
      pieces.push_back({t, b, std::min(grads[t].n, b + kPiece)});
  std::vector<double> sums(pieces.size());
  std::vector<char> bad(pieces.size());
  tbb::parallel_for(size_t{0}, pieces.size(), [&](size_t i) {
    cpu::RunWorkProbe();
    bool nf = false;
    sums[i] = SumSquares(grads[pieces[i].tensor], pieces[i].begin, pieces[i].end, &nf);
    bad[i] = nf;
  });
  NormResult r;
  for (size_t i = 0; i < pieces.size(); ++i) {
    r.sum_squares += sums[i];
    r.nonfinite |= bad[i] != 0;
  }
  return r;
}

}  // namespace tandem::offload
