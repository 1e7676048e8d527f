// Shared helpers of the host-kernel tests: random state and gradients, the combinations
// to cover, and byte-for-byte comparison of two TensorStates.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#if defined(__x86_64__)
#include <xmmintrin.h>
#elif defined(__aarch64__)
#include <sys/prctl.h>
#endif

#include "cpu_simd/host_kernels.h"
#include "cpu_simd/span_kernels.h"
#include "engine/fp_bits.h"
#include "engine/step_scalars.h"
#include "engine/tensor_state.h"
#include "tandem/types.h"

namespace tandem::cpu::testing {

// One optimizer configuration: algorithm, hyper-parameters and learning rate.
struct AlgoCase {
  const char* name;
  Algorithm algo;
  HyperParams h;
  double lr;
};

inline HyperParams Hyper(double beta2, double wd, double momentum, double dampening,
                         bool nesterov) {
  HyperParams h;
  h.beta2 = beta2;
  h.weight_decay = wd;
  h.momentum = momentum;
  h.dampening = dampening;
  h.nesterov = nesterov;
  return h;
}

inline const std::vector<AlgoCase>& AlgoCases() {
  static const std::vector<AlgoCase> cases = {
      {"adamw", Algorithm::kAdamW, Hyper(0.999, 0.01, 0, 0, false), 1e-3},
      {"adam_l2", Algorithm::kAdam, Hyper(0.999, 0.01, 0, 0, false), 1e-3},
      {"lion", Algorithm::kLion, Hyper(0.99, 0.1, 0, 0, false), 1e-4},
      {"sgd", Algorithm::kSGD, Hyper(0.999, 0.01, 0, 0, false), 0.1},
      {"sgd_momentum", Algorithm::kSGD, Hyper(0.999, 0.01, 0.9, 0.1, false), 0.1},
      {"sgd_nesterov", Algorithm::kSGD, Hyper(0.999, 0.01, 0.9, 0.0, true), 0.1},
  };
  return cases;
}

// Every state-format combination `c` can use.
inline std::vector<StateFormats> FormatsFor(const AlgoCase& c) {
  std::vector<StateFormats> r;
  const bool has_m = HasMomentum(c.algo, c.h), has_v = HasVariance(c.algo);
  for (int mf = 0; mf < 4; ++mf)
    for (int m = 0; m < (has_m ? 2 : 1); ++m)
      for (int v = 0; v < (has_v ? 2 : 1); ++v)
        r.push_back(StateFormats{static_cast<MasterFormat>(mf), static_cast<MomentFormat>(m),
                                 static_cast<MomentFormat>(v)});
  return r;
}

// Values over a wide range of magnitudes, with zeros, negative zeros, denormals and a few
// values beyond the fp16 range.
inline float WildFloat(std::mt19937& rng) {
  std::uniform_int_distribution<int> pick(0, 99);
  const int k = pick(rng);
  if (k < 8) return 0.0f;
  if (k < 14) return -0.0f;
  if (k < 20) {  // fp32 denormal
    const uint32_t bits = (rng() & 0x807FFFFFu) | 1u;
    return num::FloatOf(bits);
  }
  std::uniform_real_distribution<float> mant(1.0f, 2.0f);
  // 2% beyond the fp16 range (overflow to Inf in an fp16 parameter or gradient).
  std::uniform_int_distribution<int> ex(-40, k < 22 ? 20 : 6);
  const float x = std::ldexp(mant(rng), ex(rng));
  return (rng() & 1u) ? -x : x;
}

// n gradients of `t` in raw bytes.
inline std::vector<unsigned char> RandomGrad(std::mt19937& rng, size_t n, DType t) {
  std::vector<unsigned char> r(n * DTypeSize(t) + 1);
  for (size_t i = 0; i < n; ++i) {
    const float f = WildFloat(rng);
    if (t == DType::kF32) {
      std::memcpy(r.data() + 4 * i, &f, 4);
    } else {
      // Gradients stay finite (a step with a non-finite gradient is skipped before any
      // kernel runs, DESIGN.md): fp16 ones are clamped to the fp16 range.
      const float h16 = std::fabs(f * 64.0f) > 60000.0f ? std::copysign(60000.0f, f) : f * 64.0f;
      const uint16_t h = t == DType::kBF16 ? num::F32ToBf16(f) : num::F32ToF16(h16);
      std::memcpy(r.data() + 2 * i, &h, 2);
    }
  }
  return r;
}

inline std::vector<float> RandomWeights(std::mt19937& rng, size_t n) {
  std::vector<float> w(n);
  std::normal_distribution<float> nd(0.0f, 0.5f);
  for (auto& x : w) x = (rng() % 10 == 0) ? WildFloat(rng) : nd(rng);
  return w;
}

template <class T>
void ExpectSameBytes(const std::vector<T>& want, const std::vector<T>& got, const char* what) {
  ASSERT_EQ(want.size(), got.size()) << what;
  if (want.empty() || std::memcmp(want.data(), got.data(), want.size() * sizeof(T)) == 0) return;
  for (size_t i = 0; i < want.size(); ++i) {
    if (std::memcmp(&want[i], &got[i], sizeof(T)) != 0) {
      FAIL() << what << " differs first at element " << i << " of " << want.size() << ": want "
             << +want[i] << " got " << +got[i];
    }
  }
}

inline void ExpectSameState(const TensorState& want, const TensorState& got) {
  ExpectSameBytes(want.master_f32, got.master_f32, "master f32");
  ExpectSameBytes(want.master_bf16, got.master_bf16, "master bf16");
  ExpectSameBytes(want.ecc8, got.ecc8, "ecc8");
  ExpectSameBytes(want.ecc16, got.ecc16, "ecc16");
  ExpectSameBytes(want.m_f32, got.m_f32, "m f32");
  ExpectSameBytes(want.v_f32, got.v_f32, "v f32");
  ExpectSameBytes(want.m_codes, got.m_codes, "m codes");
  ExpectSameBytes(want.v_codes, got.v_codes, "v codes");
  ExpectSameBytes(want.m_scales, got.m_scales, "m scales");
  ExpectSameBytes(want.v_scales, got.v_scales, "v scales");
}

// Every ISA of either architecture, lowest first on each.
inline constexpr Isa kAllIsas[] = {Isa::kSse, Isa::kAvx2, Isa::kAvx512, Isa::kNeon, Isa::kSve};

inline std::vector<Isa> SupportedIsas() {
  std::vector<Isa> r;
  for (Isa i : kAllIsas)
    if (IsaSupported(i)) r.push_back(i);
  return r;
}

// The ISA that every CPU of this build's architecture has.
inline Isa BaselineIsa() {
#if defined(__aarch64__)
  return Isa::kNeon;
#else
  return Isa::kSse;
#endif
}

// For its lifetime, the calling thread's SVE vector length is `bits` (prctl
// PR_SVE_SET_VL; a thread's own setting, inherited by threads it creates later); ok()
// says whether the CPU runs at that length. Restores the length it found.
class ScopedSveVectorLength {
 public:
  explicit ScopedSveVectorLength(unsigned bits) {
#if defined(__aarch64__)
    saved_ = prctl(PR_SVE_GET_VL);
    if (saved_ < 0 || bits == 0) return;
    const int r = prctl(PR_SVE_SET_VL, static_cast<unsigned long>(bits / 8));
    ok_ = r >= 0 && static_cast<unsigned>(r & PR_SVE_VL_LEN_MASK) * 8u == bits;
#else
    (void)bits;
#endif
  }
  ~ScopedSveVectorLength() {
#if defined(__aarch64__)
    if (saved_ >= 0) prctl(PR_SVE_SET_VL, static_cast<unsigned long>(saved_ & PR_SVE_VL_LEN_MASK));
#endif
  }
  ScopedSveVectorLength(const ScopedSveVectorLength&) = delete;
  ScopedSveVectorLength& operator=(const ScopedSveVectorLength&) = delete;
  bool ok() const { return ok_; }

 private:
  int saved_ = -1;
  bool ok_ = false;
};

// One kernel build to test: an ISA and, for kSve, the vector length (bits) the test thread
// runs with, which picks the SVE build (Note [SVE vector lengths], kernel_sve.cc).
struct IsaTarget {
  Isa isa;
  unsigned sve_bits = 0;
};

inline std::string TargetName(const IsaTarget& t) {
  return std::string(IsaName(t.isa)) + (t.sve_bits ? std::to_string(t.sve_bits) : "");
}
inline void PrintTo(const IsaTarget& t, std::ostream* os) { *os << TargetName(t); }

// Every supported ISA; kSve once for every vector length with a build that this CPU can
// run at (all three under QEMU's -cpu max; only 128 on Grace).
inline std::vector<IsaTarget> SupportedTargets() {
  std::vector<IsaTarget> r;
  for (Isa i : SupportedIsas()) {
    if (i != Isa::kSve) {
      r.push_back({i, 0});
      continue;
    }
    for (unsigned bits : kSveVectorBits)
      if (ScopedSveVectorLength(bits).ok()) r.push_back({i, bits});
  }
  return r;
}

// For its lifetime, the calling thread flushes denormals to zero, the mode a caller may
// hold that the kernels must not depend on (x86: MXCSR FTZ and DAZ; aarch64: FPCR FZ and
// FZ16), if `on`. Restores the mode it found.
class ScopedCallerFlushToZero {
 public:
  explicit ScopedCallerFlushToZero(bool on) {
#if defined(__x86_64__)
    saved_ = _mm_getcsr();
    if (on) _mm_setcsr(static_cast<unsigned>(saved_) | 0x8040u);
#elif defined(__aarch64__)
    asm volatile("mrs %0, fpcr" : "=r"(saved_));
    if (on) asm volatile("msr fpcr, %0" : : "r"(saved_ | (1u << 24) | (1u << 19)));
#else
    (void)on;
#endif
  }
  ~ScopedCallerFlushToZero() {
#if defined(__x86_64__)
    _mm_setcsr(static_cast<unsigned>(saved_));
#elif defined(__aarch64__)
    asm volatile("msr fpcr, %0" : : "r"(saved_));
#endif
  }
  ScopedCallerFlushToZero(const ScopedCallerFlushToZero&) = delete;
  ScopedCallerFlushToZero& operator=(const ScopedCallerFlushToZero&) = delete;

 private:
  uint64_t saved_ = 0;
};

// The default host kernel options with `isa`.
inline HostKernelOptions OptionsFor(Isa isa) {
  HostKernelOptions o;
  o.isa = isa;
  return o;
}

}  // namespace tandem::cpu::testing
