#include "engine/step_scalars.h"

#include <cmath>
#include <string>

#include "tandem/error.h"

namespace tandem {

namespace {
void CheckLr(double lr) {
  if (!std::isfinite(lr) || lr < 0)
    throw Error(ErrorKind::kInvalidArgument,
                "learning rate must be finite and >= 0, got " + std::to_string(lr));
}
}  // namespace

StepScalars ComputeStepScalars(Algorithm algo, const HyperParams& h, double lr, int64_t step,
                               double grad_mul) {
  ValidateHyperParams(algo, h, "hyper-parameters");
  CheckLr(lr);
  return GroupStepScalars(algo, h, lr * h.lr_scale, step, grad_mul);
}

StepScalars GroupStepScalars(Algorithm algo, const HyperParams& h, double lr_eff, int64_t step,
                             double grad_mul) {
  ValidateHyperParams(algo, h, "hyper-parameters");
  CheckLr(lr_eff);
  if (step < 1)
    throw Error(ErrorKind::kInvalidArgument,
                "step number must be >= 1, got " + std::to_string(step));
  if (!std::isfinite(grad_mul) || grad_mul <= 0)
    throw Error(ErrorKind::kInvalidArgument,
                "gradient multiplier must be finite and > 0, got " + std::to_string(grad_mul));

  const double t = static_cast<double>(step);
  StepScalars s;
  s.algo = algo;
  s.lr = static_cast<float>(lr_eff);
  s.beta1 = static_cast<float>(h.beta1);
  s.beta2 = static_cast<float>(h.beta2);
  s.one_minus_beta1 = static_cast<float>(1.0 - h.beta1);
  s.one_minus_beta2 = static_cast<float>(1.0 - h.beta2);
  s.eps = static_cast<float>(h.eps);
  s.weight_decay = static_cast<float>(h.weight_decay);
  s.grad_mul = static_cast<float>(grad_mul);
  s.decay = static_cast<float>(1.0 - lr_eff * h.weight_decay);
  switch (algo) {
    case Algorithm::kAdamW:
    case Algorithm::kAdam: {
      const double bc1 = 1.0 - std::pow(h.beta1, t);
      const double bc2 = 1.0 - std::pow(h.beta2, t);
      s.step_size = static_cast<float>(lr_eff / bc1);
      s.inv_sqrt_bc2 = static_cast<float>(1.0 / std::sqrt(bc2));
      s.apply_l2 = algo == Algorithm::kAdam && h.weight_decay != 0.0;
      s.has_momentum = 1;
      if (algo == Algorithm::kAdam) s.decay = 1.0f;
      break;
    }
    case Algorithm::kLion:
      s.has_momentum = 1;
      break;
    case Algorithm::kSGD:
      s.decay = 1.0f;
      s.apply_l2 = h.weight_decay != 0.0;
      s.has_momentum = h.momentum != 0.0;
      s.momentum = static_cast<float>(h.momentum);
      s.one_minus_dampening = static_cast<float>(1.0 - h.dampening);
      s.nesterov = h.nesterov;
      s.first_step = step == 1;
      break;
  }
  return s;
}

}  // namespace tandem
