// The update rules, one element at a time, on decoded fp32 values.
//
// These functions *are* the numerics of Tandem: the scalar reference calls them, the CUDA
// kernels call them per thread, and the SIMD kernels transcribe them operation for
// operation. Each line is one correctly rounded fp32 operation; nothing may be fused or
// reordered (sources are compiled with contraction off: -ffp-contract=off, --fmad=false).
// docs/numerics.md gives the same formulas with their references.
#pragma once

#include <cmath>

#include "engine/hd.h"
#include "engine/step_scalars.h"

namespace tandem::num {

TANDEM_HD float Sqrt(float x) {
#if defined(__CUDA_ARCH__)
  return __fsqrt_rn(x);
#else
  return std::sqrt(x);
#endif
}

// AdamW (decoupled) and Adam (L2). Updates w, m, v; returns sqrt(v_new) in *sqrt_v, which
// the q8 variance format stores.
TANDEM_HD void AdamElement(const StepScalars& s, float g, float& w, float& m, float& v,
                           float* sqrt_v) {
  g = g * s.grad_mul;
  const bool decoupled = s.algo == Algorithm::kAdamW;
  if (!decoupled && s.apply_l2) g = g + s.weight_decay * w;  // Adam: L2 into the gradient
  m = s.beta1 * m + s.one_minus_beta1 * g;                   // first moment
  v = s.beta2 * v + s.one_minus_beta2 * (g * g);             // second moment
  if (decoupled) w = w * s.decay;                            // AdamW: w *= 1 - lr * wd
  const float root = Sqrt(v);
  const float denom = root * s.inv_sqrt_bc2 + s.eps;  // sqrt(v / bc2) + eps
  w = w - s.step_size * (m / denom);                  // w -= lr / bc1 * m / denom
  *sqrt_v = root;
}

// Lion: w *= 1 - lr * wd; w -= lr * sign(beta1 m + (1 - beta1) g);
// m = beta2 m + (1 - beta2) g. sign(0) = 0.
TANDEM_HD void LionElement(const StepScalars& s, float g, float& w, float& m) {
  g = g * s.grad_mul;
  w = w * s.decay;
  const float c = s.beta1 * m + s.one_minus_beta1 * g;
  const float step = c > 0.0f ? s.lr : (c < 0.0f ? -s.lr : 0.0f);
  w = w - step;
  m = s.beta2 * m + s.one_minus_beta2 * g;
}

// SGD as torch.optim.SGD: L2 decay into the gradient, momentum buffer that starts as the
// first gradient, dampening, Nesterov. `buf` is untouched when momentum is 0.
TANDEM_HD void SgdElement(const StepScalars& s, float g, float& w, float& buf) {
  g = g * s.grad_mul;
  if (s.apply_l2) g = g + s.weight_decay * w;
  if (s.has_momentum) {
    buf = s.first_step ? g : s.momentum * buf + s.one_minus_dampening * g;
    g = s.nesterov ? g + s.momentum * buf : buf;
  }
  w = w - s.lr * g;
}

}  // namespace tandem::num
