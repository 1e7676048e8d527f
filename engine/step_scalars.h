// Per-step scalars: everything that depends only on the step, computed once on the host
// in double and rounded once to fp32, then passed unchanged to every kernel, host or GPU.
// This is what lets every side produce the same bits (docs/numerics.md, "Step scalars").
#pragma once

#include <cstdint>

#include "tandem/types.h"

namespace tandem {

struct StepScalars {
  Algorithm algo = Algorithm::kAdamW;
  float lr = 0;               // the group's learning rate of this step
  float beta1 = 0, beta2 = 0;
  float one_minus_beta1 = 0;  // (float)(1 - beta1), rounded from double
  float one_minus_beta2 = 0;
  float eps = 0;
  float weight_decay = 0;
  float step_size = 0;     // Adam: lr / (1 - beta1^t)
  float inv_sqrt_bc2 = 0;  // Adam: 1 / sqrt(1 - beta2^t)
  float decay = 1;         // AdamW, Lion: 1 - lr * weight_decay
  float grad_mul = 1;      // 1 / loss_scale * clip coefficient
  float momentum = 0;      // SGD
  float one_minus_dampening = 1;
  uint8_t apply_l2 = 0;       // Adam, SGD: weight_decay != 0
  uint8_t has_momentum = 0;   // AdamW, Adam, Lion: 1; SGD: momentum != 0
  uint8_t nesterov = 0;       // SGD
  uint8_t first_step = 0;     // SGD: the momentum buffer starts as the gradient
};

// group_lr: the group's learning rate of this step (finite, >= 0), used as it is
// (hyper.lr_scale is not applied); step: 1-based step number of this update; grad_mul:
// factor applied to every gradient (finite, > 0). Throws Error(kInvalidArgument) naming
// the bad value.
StepScalars GroupStepScalars(Algorithm algo, const HyperParams& hyper, double group_lr,
                             int64_t step, double grad_mul);

// The one-lr form: GroupStepScalars with group_lr = lr * hyper.lr_scale (the same double
// HybridOptimizer::Step(lr) hands group by group). lr finite and >= 0.
StepScalars ComputeStepScalars(Algorithm algo, const HyperParams& hyper, double lr,
                               int64_t step, double grad_mul);

// Note [Scalar index]: a step's scalars are a list of StepScalars, one per distinct
// (group, tensor step) of its active tensors, in tensor order (deterministic). Every
// tensor, and every span of it on every side (host kernels, pipeline chunks, the GPU
// plans' span tables), names its entry by its scalar index, or kSkipScalarIndex when the
// tensor is left out of the step. The usual step has one entry per group. The same
// (group, step) gives the same floats wherever it is computed, which is what lets the
// speculation's scalars (BeginStep) and Step's agree.
inline constexpr uint32_t kSkipScalarIndex = 0xFFFFFFFFu;

}  // namespace tandem
