// The baseline of tandem-bench-host: the plain fp32 AdamW loop (fp32 gradient, master and
// moments), compiled -O3 -march=native in its own file. Not bit-identical to Tandem's
// numerics (it computes the update the textbook way); for speed comparison only.
#pragma once

#include <cstddef>

namespace tandem::bench {

struct NaiveAdamWParams {
  float lr, beta1, beta2, eps, weight_decay, bias_correction1, bias_correction2;
};

void NaiveAdamW(const NaiveAdamWParams& p, const float* g, float* w, float* m, float* v, size_t n);

}  // namespace tandem::bench
