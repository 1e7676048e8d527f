// The reference step with all-fp32 state against a double-precision implementation of
// the same formulas: at each of 100 steps, both start from the same fp32 state and the
// fp32 results must lie within 2 ulp, where the ulp is taken at the largest term of the
// final sum (the error bound of a rounded sum; a result that cancels to near zero has no
// meaningful relative error).
#include "engine/reference_step.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "engine/fp_bits.h"
#include "engine/tensor_state.h"

namespace tandem {
namespace {

double Ulp(double mag) {
  const float f = static_cast<float>(std::fabs(mag));
  if (f == 0) return std::ldexp(1.0, -149);
  int e;
  std::frexp(f, &e);
  return std::max(std::ldexp(1.0, e - 24), std::ldexp(1.0, -149));
}

void ExpectClose(float got, double want, double mag, const char* what, int step, size_t i) {
  const double tol = 2 * Ulp(std::max(std::fabs(want), mag));
  ASSERT_LE(std::fabs(double(got) - want), tol)
      << what << " step " << step << " element " << i << " got " << got << " want " << want;
}

struct Case {
  Algorithm algo;
  HyperParams h;
  double lr;
};

class ReferenceVsDouble : public ::testing::TestWithParam<Case> {};

TEST_P(ReferenceVsDouble, HundredStepsWithinTwoUlp) {
  const Case c = GetParam();
  const size_t n = 1000;  // 31 full groups and a partial one
  std::mt19937 rng(42);
  std::normal_distribution<float> nd;
  std::vector<float> w0(n);
  for (auto& x : w0) x = nd(rng);
  TensorState st(c.algo, c.h, StateFormats{}, w0.data(), n);
  std::vector<float> grad(n);
  size_t lion_skips = 0;
  for (int t = 1; t <= 100; ++t) {
    for (auto& g : grad) g = nd(rng) * 0.1f;
    const double grad_mul = 0.5;
    const StepScalars s = ComputeStepScalars(c.algo, c.h, c.lr, t, grad_mul);
    std::vector<float> w = st.master_f32, m = st.m_f32, v = st.v_f32;
    ReferenceStep(s, st.Span(0, n, grad.data(), DType::kF32));
    // The kernel's inputs are the fp32 step scalars: the double side uses exactly those.
    const double lr = s.lr, b1 = s.beta1, b2 = s.beta2, omb1 = s.one_minus_beta1,
                 omb2 = s.one_minus_beta2, wd = s.weight_decay;
    for (size_t i = 0; i < n; ++i) {
      // want: the update in double; mag: the same expression over absolute values, whose
      // ulp is the scale of the rounding errors (a-priori bound of a rounded evaluation).
      double g = double(grad[i]) * double(s.grad_mul), wi = w[i];
      double gmag = std::fabs(g);
      switch (c.algo) {
        case Algorithm::kAdamW:
        case Algorithm::kAdam: {
          if (s.apply_l2) {
            // The L2 gradient is an fp32 tensor on every side (torch.optim.Adam computes
            // grad + wd * param in fp32 too): the double side takes that tensor as its input.
            g = static_cast<float>(static_cast<float>(g) + static_cast<float>(wd * wi));
            gmag += wd * std::fabs(wi);
          }
          const double mi = b1 * m[i] + omb1 * g;
          const double mmag = b1 * std::fabs(m[i]) + omb1 * gmag;
          const double vi = b2 * v[i] + omb2 * (g * g);
          const double vmag = b2 * v[i] + omb2 * (gmag * gmag);
          if (c.algo == Algorithm::kAdamW) wi *= double(s.decay);
          const double denom = std::sqrt(vi) * double(s.inv_sqrt_bc2) + double(s.eps);
          const double upd = double(s.step_size) * mi / denom;
          const double umag = double(s.step_size) * mmag / denom;
          ExpectClose(st.m_f32[i], mi, mmag, "m", t, i);
          ExpectClose(st.v_f32[i], vi, vmag, "v", t, i);
          ExpectClose(st.master_f32[i], wi - upd, std::fabs(wi) + umag, "w", t, i);
          break;
        }
        case Algorithm::kLion: {
          const double cc = b1 * m[i] + omb1 * g;
          const double cmag = b1 * std::fabs(m[i]) + omb1 * gmag;
          wi *= double(s.decay);
          const double mi = b2 * m[i] + omb2 * g;
          ExpectClose(st.m_f32[i], mi, b2 * std::fabs(m[i]) + omb2 * gmag, "m", t, i);
          if (std::fabs(cc) <= 4 * Ulp(cmag)) {  // sign undecidable at this precision
            ++lion_skips;
            break;
          }
          ExpectClose(st.master_f32[i], wi - (cc > 0 ? lr : -lr), std::fabs(wi) + lr, "w", t, i);
          break;
        }
        case Algorithm::kSGD: {
          if (s.apply_l2) {
            g = static_cast<float>(static_cast<float>(g) + static_cast<float>(wd * wi));
            gmag += wd * std::fabs(wi);
          }
          double d = g, dmag = gmag;
          if (s.has_momentum) {
            const double mu = s.momentum, omd = s.one_minus_dampening;
            const double buf = t == 1 ? g : mu * m[i] + omd * g;
            const double bmag = t == 1 ? gmag : mu * std::fabs(m[i]) + omd * gmag;
            ExpectClose(st.m_f32[i], buf, bmag, "buf", t, i);
            d = s.nesterov ? g + mu * buf : buf;
            dmag = s.nesterov ? gmag + mu * bmag : bmag;
          }
          ExpectClose(st.master_f32[i], wi - lr * d, std::fabs(wi) + lr * dmag, "w", t, i);
          break;
        }
      }
      if (HasFailure()) return;
    }
  }
  EXPECT_LT(lion_skips, 10u);
}

HyperParams Hp(double b1, double b2, double wd, double mom = 0, double damp = 0, bool nest = false) {
  HyperParams h;
  h.beta1 = b1;
  h.beta2 = b2;
  h.weight_decay = wd;
  h.momentum = mom;
  h.dampening = damp;
  h.nesterov = nest;
  return h;
}

INSTANTIATE_TEST_SUITE_P(
    AllAlgorithms, ReferenceVsDouble,
    ::testing::Values(Case{Algorithm::kAdamW, Hp(0.9, 0.999, 0.01), 1e-3},
                      Case{Algorithm::kAdam, Hp(0.9, 0.99, 0.01), 1e-3},
                      Case{Algorithm::kLion, Hp(0.9, 0.99, 0.1), 1e-4},
                      Case{Algorithm::kSGD, Hp(0, 0, 0.0), 1e-2},
                      Case{Algorithm::kSGD, Hp(0, 0, 1e-4, 0.9, 0.1), 1e-2},
                      Case{Algorithm::kSGD, Hp(0, 0, 1e-4, 0.9, 0.0, true), 1e-2}),
    [](const ::testing::TestParamInfo<Case>& info) {
      std::string name = Name(info.param.algo);
      if (info.param.h.momentum != 0) name += "_momentum";
      if (info.param.h.nesterov) name += "_nesterov";
      return name;
    });

TEST(ReferenceStep, ParamWriteBackFollowsMasterAndDType) {
  const size_t n = 77;
  std::vector<float> w0(n), grad(n, 0.25f);
  for (size_t i = 0; i < n; ++i) w0[i] = 0.1f * float(i) - 3.0f;
  HyperParams h;
  const StepScalars s = ComputeStepScalars(Algorithm::kAdamW, h, 1e-3, 1, 1.0);
  for (MasterFormat mf : {MasterFormat::kF32, MasterFormat::kBF16, MasterFormat::kBF16Ecc8,
                          MasterFormat::kBF16Ecc16}) {
    StateFormats f{mf, MomentFormat::kQ8, MomentFormat::kQ8};
    TensorState st(Algorithm::kAdamW, h, f, w0.data(), n);
    std::vector<float> p32(n);
    std::vector<uint16_t> p16(n), pbf(n);
    TensorState a = st, b = st, c = st;
    ReferenceStep(s, a.Span(0, n, grad.data(), DType::kF32, p32.data(), DType::kF32));
    ReferenceStep(s, b.Span(0, n, grad.data(), DType::kF32, p16.data(), DType::kF16));
    ReferenceStep(s, c.Span(0, n, grad.data(), DType::kF32, pbf.data(), DType::kBF16));
    for (size_t i = 0; i < n; ++i) {
      EXPECT_EQ(num::BitsOf(p32[i]), num::BitsOf(a.Master(i)));
      EXPECT_EQ(p16[i], num::F32ToF16(b.Master(i)));
      if (mf == MasterFormat::kF32)
        EXPECT_EQ(pbf[i], num::F32ToBf16(c.Master(i)));
      else
        EXPECT_EQ(pbf[i], c.master_bf16[i]);
      // The step moved every weight against its positive gradient (plain bf16 loses
      // updates below half a bf16 ulp, so it may only stay put).
      if (mf == MasterFormat::kBF16) {
        EXPECT_LE(a.Master(i), st.Master(i));
      } else {
        EXPECT_LT(a.Master(i), st.Master(i));
      }
    }
  }
}

TEST(ReferenceStep, GradientDTypesAreDecodedExactly) {
  const size_t n = 64;
  std::vector<float> w0(n, 1.0f), g32(n);
  std::vector<uint16_t> gbf(n), gh(n);
  for (size_t i = 0; i < n; ++i) {
    g32[i] = num::Bf16ToF32(num::F32ToBf16(0.01f * float(i + 1)));  // representable in both
    gbf[i] = num::F32ToBf16(g32[i]);
    gh[i] = num::F32ToF16(g32[i]);
    g32[i] = num::F16ToF32(gh[i]);
    gbf[i] = num::F32ToBf16(g32[i]);
  }
  HyperParams h;
  const StepScalars s = ComputeStepScalars(Algorithm::kAdamW, h, 1e-3, 1, 1.0);
  TensorState a(Algorithm::kAdamW, h, {}, w0.data(), n), b = a, c = a;
  ReferenceStep(s, a.Span(0, n, g32.data(), DType::kF32));
  ReferenceStep(s, c.Span(0, n, gh.data(), DType::kF16));
  EXPECT_EQ(a.master_f32, c.master_f32);
  // bf16 gradients: compare against an fp32 gradient holding the same bf16 values.
  std::vector<float> gb32(n);
  for (size_t i = 0; i < n; ++i) gb32[i] = num::Bf16ToF32(gbf[i]);
  TensorState d(Algorithm::kAdamW, h, {}, w0.data(), n);
  ReferenceStep(s, b.Span(0, n, gbf.data(), DType::kBF16));
  ReferenceStep(s, d.Span(0, n, gb32.data(), DType::kF32));
  EXPECT_EQ(b.master_f32, d.master_f32);
}

}  // namespace
}  // namespace tandem
