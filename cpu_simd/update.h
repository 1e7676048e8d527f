// The update rules on one register of decoded fp32 lanes: engine/update_math.h's
// AdamElement, LionElement and SgdElement, operation for operation (Note [Same ops, same
// order], group_step.h). No memory access. Relies on kernel_args.h (Ctx: the step
// scalars, broadcast once per span) and the ISA's Ops (LionStep where it has one).
#pragma once

#include "cpu_simd/kernel_args.h"

namespace tandem::cpu::TANDEM_ISA_NS {

// One register: g the gradient; w, m, v the master and moments, updated in place; u gets
// sqrt(v) (Adam: what the q8 variance stores). MOM: whether the kernel has a momentum
// (SGD without one leaves m alone).
template <class Ops, Algo A, Moment MOM>
TANDEM_SIMD_INLINE void UpdateReg(const Ctx<Ops>& c, typename Ops::F g, typename Ops::F& w,
                                  typename Ops::F& m, typename Ops::F& v, typename Ops::F& u) {
  using F = typename Ops::F;
  g = g * c.grad_mul;
  if constexpr (A == Algo::kAdam) {
    // AdamElement.
    if (!c.decoupled && c.apply_l2) g = g + c.wd * w;
    m = c.beta1 * m + c.omb1 * g;
    v = c.beta2 * v + c.omb2 * (g * g);
    if (c.decoupled) w = w * c.decay;
    const F root = Sqrt<Ops>(v);  // Note [IEEE division and square root] (kernel_args.h)
    const F denom = root * c.inv_sqrt_bc2 + c.eps;
    w = w - c.step_size * Div<Ops>(m, denom);
    u = root;
  } else if constexpr (A == Algo::kLion) {
    // LionElement.
    w = w * c.decay;
    const F cc = c.beta1 * m + c.omb1 * g;
    F step;
    if constexpr (requires { Ops::LionStep(cc, c.lr); })
      step = Ops::LionStep(cc, c.lr);  // the same select, see the Ops header
    else
      step = xsimd::select(cc > F(0.0f), c.lr, xsimd::select(cc < F(0.0f), c.neg_lr, F(0.0f)));
    w = w - step;
    m = c.beta2 * m + c.omb2 * g;
  } else if constexpr (HasStaticIo<Ops>()) {
    // SgdElement. Note [Branch-free SGD]: the three loop-invariant flags as lane masks,
    // not branches: the same values are selected (select is exact), and the loop stays one
    // basic block, so GCC keeps its constants in registers (with the branches it
    // re-materialised ~12 integer splats per register, mov + vpbroadcastd each).
    g = xsimd::select(c.l2_mask, g + c.wd * w, g);
    if constexpr (MOM != Moment::kNone) {
      m = xsimd::select(c.first_mask, g, c.momentum * m + c.omd * g);
      g = xsimd::select(c.nesterov_mask, g + c.momentum * m, m);
    }
    w = w - c.lr * g;
  } else {
    // SgdElement.
    if (c.apply_l2) g = g + c.wd * w;
    if constexpr (MOM != Moment::kNone) {
      m = c.first_step ? g : c.momentum * m + c.omd * g;
      g = c.nesterov ? g + c.momentum * m : m;
    }
    w = w - c.lr * g;
  }
}

}  // namespace tandem::cpu::TANDEM_ISA_NS
