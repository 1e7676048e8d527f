#include "bench/naive_adamw.h"

#include <cmath>

namespace tandem::bench {

void NaiveAdamW(const NaiveAdamWParams& p, const float* __restrict g, float* __restrict w,
                float* __restrict m, float* __restrict v, size_t n) {
  const float omb1 = 1.0f - p.beta1, omb2 = 1.0f - p.beta2;
  const float step = p.lr / p.bias_correction1;
  const float inv_sqrt_bc2 = 1.0f / std::sqrt(p.bias_correction2);
  const float decay = 1.0f - p.lr * p.weight_decay;
  for (size_t i = 0; i < n; ++i) {
    const float gi = g[i];
    const float mi = p.beta1 * m[i] + omb1 * gi;
    const float vi = p.beta2 * v[i] + omb2 * gi * gi;
    m[i] = mi;
    v[i] = vi;
    w[i] = w[i] * decay - step * mi / (std::sqrt(vi) * inv_sqrt_bc2 + p.eps);
  }
}

}  // namespace tandem::bench
