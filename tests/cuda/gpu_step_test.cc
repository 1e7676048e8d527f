// The fused CUDA step against tandem::ReferenceStep, byte for byte: every algorithm x
// master x momentum x variance format, random gradient and parameter dtypes per tensor,
// sizes 0, 1, odd, partial groups, several work units, device starts off 16-byte
// alignment, thousands of tiny tensors in one plan, two parameter groups with different
// hyper-parameters, several steps in a row so that q8 state evolves, and NaN / Inf
// gradients. Every state array and the parameter are compared after every step.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <ostream>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "cuda/gpu_step.h"
#include "engine/fp_bits.h"
#include "engine/reference_step.h"
#include "engine/tensor_state.h"
#include "tandem/error.h"
#include "tests/cuda/device_buffer.h"

namespace tandem::gpu {
namespace {

using testing::MirroredBuffer;

struct Combo {
  std::string name;
  Algorithm algo;
  StateFormats formats;
  HyperParams hyper[2];
};

void PrintTo(const Combo& c, std::ostream* os) { *os << c.name; }

// One tensor on both sides: the reference state on the host, and offsets of the same
// arrays in the device buffer.
struct Tensor {
  Tensor(size_t n_in, uint32_t group_in, TensorState ref_in)
      : n(n_in), group(group_in), ref(std::move(ref_in)) {}
  size_t n = 0;
  uint32_t group = 0;
  DType grad_dtype = DType::kF32;
  bool has_param = false, param_aliases = false;
  DType param_dtype = DType::kF32;
  bool misaligned = false;
  float grad_scale = 1.0f;
  bool nonfinite = false;  // some gradients NaN or +-Inf
  TensorState ref;
  std::vector<uint8_t> ref_param;  // host parameter buffer of the reference
  std::vector<uint8_t> grad;       // host gradient (bits of grad_dtype)
  // Offsets in the state buffer (SIZE_MAX: absent).
  size_t master_f32 = SIZE_MAX, master_bf16 = SIZE_MAX, ecc8 = SIZE_MAX, ecc16 = SIZE_MAX,
         m_f32 = SIZE_MAX, v_f32 = SIZE_MAX, m_codes = SIZE_MAX, v_codes = SIZE_MAX,
         m_scales = SIZE_MAX, v_scales = SIZE_MAX, param = SIZE_MAX, grad_off = SIZE_MAX;
};

// misaligned: one element past a 256-byte boundary; else `offset` bytes past it.
template <typename T>
size_t Place(MirroredBuffer& buf, const std::vector<T>& v, bool misaligned, size_t offset = 0) {
  if (v.empty()) return SIZE_MAX;
  const size_t off = buf.Reserve(v.size() * sizeof(T), misaligned ? sizeof(T) : offset);
  return off;
}

template <typename T>
void Put(MirroredBuffer& buf, size_t off, const std::vector<T>& v) {
  if (off != SIZE_MAX) std::memcpy(buf.host(off), v.data(), v.size() * sizeof(T));
}

template <typename T>
T* DevPtr(MirroredBuffer& buf, size_t off) {
  return off == SIZE_MAX ? nullptr : static_cast<T*>(buf.dev(off));
}

template <typename T>
::testing::AssertionResult SameBytes(MirroredBuffer& buf, size_t off, const std::vector<T>& want,
                                     const std::string& what) {
  if (want.empty()) return ::testing::AssertionSuccess();
  const T* got = reinterpret_cast<const T*>(buf.host(off));
  for (size_t i = 0; i < want.size(); ++i) {
    if (std::memcmp(&got[i], &want[i], sizeof(T)) != 0)
      return ::testing::AssertionFailure()
             << what << " differs at index " << i << " of " << want.size() << ": gpu " << +got[i]
             << " reference " << +want[i];
  }
  return ::testing::AssertionSuccess();
}

// SameBytes for the n fp32 values at `want` (any alignment). With nan_any, NaN matches
// NaN whatever the payload: the GPU's arithmetic returns the canonical NaN 0x7FFFFFFF
// where x86 propagates the operand's payload, so an fp32 state that became NaN matches
// as "a NaN"; every other value, and every encoded array (bf16, ecc, codes: their
// encoders canonicalise NaN, compared by SameBytes), must match bit for bit.
::testing::AssertionResult SameFloats(MirroredBuffer& buf, size_t off, const void* want, size_t n,
                                      bool nan_any, const std::string& what) {
  if (n == 0) return ::testing::AssertionSuccess();
  for (size_t i = 0; i < n; ++i) {
    float g, w;
    std::memcpy(&g, buf.host(off + i * sizeof(float)), sizeof(float));
    std::memcpy(&w, static_cast<const uint8_t*>(want) + i * sizeof(float), sizeof(float));
    const bool both_nan = nan_any && std::isnan(g) && std::isnan(w);
    if (!both_nan && std::memcmp(&g, &w, sizeof(float)) != 0)
      return ::testing::AssertionFailure()
             << what << " differs at index " << i << " of " << n << ": gpu " << g << " reference "
             << w;
  }
  return ::testing::AssertionSuccess();
}
::testing::AssertionResult SameFloats(MirroredBuffer& buf, size_t off, const std::vector<float>& want,
                                      bool nan_any, const std::string& what) {
  return SameFloats(buf, off, want.data(), want.size(), nan_any, what);
}

float RandomGrad(std::mt19937& rng, float scale) {
  std::normal_distribution<float> nd;
  std::uniform_int_distribution<int> pick(0, 19);
  if (pick(rng) == 0) return 0.0f;  // exact zeros: sign(0), zero groups
  return nd(rng) * scale;
}

void FillGrad(Tensor& t, std::mt19937& rng) {
  const size_t sz = DTypeSize(t.grad_dtype);
  t.grad.assign(t.n * sz, 0);
  for (size_t i = 0; i < t.n; ++i) {
    float g = RandomGrad(rng, t.grad_scale);
    if (t.nonfinite && rng() % 64 == 0) {  // NaN (with a payload in fp32), +Inf, -Inf
      const uint32_t bits[3] = {0x7FC01234u, 0x7F800000u, 0xFF800000u};
      g = num::FloatOf(bits[rng() % 3]);
    }
    if (t.grad_dtype == DType::kF32) {
      std::memcpy(&t.grad[i * 4], &g, 4);
    } else {
      const uint16_t b = t.grad_dtype == DType::kBF16 ? num::F32ToBf16(g) : num::F32ToF16(g);
      std::memcpy(&t.grad[i * 2], &b, 2);
    }
  }
}

// Runs `steps` steps of one plan over tensors of `sizes` and compares after each.
// misalign_scales: also place the q8 scale arrays of some otherwise aligned tensors 2 bytes
// past a 16-byte boundary, and the byte arrays (ecc8, codes) of some 8 bytes past one
// (aligned for FastTile's 8-byte accesses, not for 16-byte ones).
// nonfinite: every third tensor gets NaN and +-Inf gradients (about 1 in 64 elements);
// fp32 state arrays and fp32 parameters are then compared with NaN matching NaN.
// grad_dtypes: when not empty, tensor k gets gradient dtype grad_dtypes[k % size] and
// every array aligned (instead of random dtypes and every third tensor misaligned).
void RunParity(const Combo& c, const std::vector<size_t>& sizes, int steps, uint32_t seed,
               bool misalign_scales = false, bool nonfinite = false,
               const std::vector<DType>& grad_dtypes = {}, bool skip_some = false) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> nd;
  const DType dtypes[3] = {DType::kF32, DType::kBF16, DType::kF16};
  const float scales[5] = {1.0f, 1e-3f, 10.0f, 3e-38f, 0.05f};  // 3e-38: subnormal paths
  std::vector<Tensor> tensors;
  tensors.reserve(sizes.size());
  MirroredBuffer state, grads;
  for (size_t k = 0; k < sizes.size(); ++k) {
    const size_t n = sizes[k];
    const uint32_t group = static_cast<uint32_t>(rng() % 2);
    std::vector<float> w0(n);
    for (auto& x : w0) x = nd(rng) * 0.5f;
    tensors.emplace_back(n, group, TensorState(c.algo, c.hyper[group], c.formats, w0.data(), n));
    Tensor& t = tensors.back();
    t.grad_dtype = dtypes[rng() % 3];
    t.misaligned = rng() % 3 == 1;
    if (!grad_dtypes.empty()) {
      t.grad_dtype = grad_dtypes[k % grad_dtypes.size()];
      t.misaligned = false;
    }
    t.grad_scale = scales[rng() % 5];
    t.nonfinite = nonfinite && k % 3 == 0;
    const int p = static_cast<int>(rng() % 5);  // 0: no param, else a dtype or an alias
    t.has_param = p != 0;
    t.param_dtype = p == 0 ? DType::kF32 : dtypes[(p - 1) % 3];
    t.param_aliases = p == 4 && c.formats.master != MasterFormat::kF32;
    if (t.param_aliases) t.param_dtype = DType::kBF16;
    const bool mis = t.misaligned;
    t.master_f32 = Place(state, t.ref.master_f32, mis);
    t.master_bf16 = Place(state, t.ref.master_bf16, mis);
    const size_t bytes_off = !mis && misalign_scales && rng() % 3 == 0 ? 8 : 0;
    t.ecc8 = Place(state, t.ref.ecc8, mis, bytes_off);
    t.ecc16 = Place(state, t.ref.ecc16, mis);
    t.m_f32 = Place(state, t.ref.m_f32, mis);
    t.v_f32 = Place(state, t.ref.v_f32, mis);
    t.m_codes = Place(state, t.ref.m_codes, mis, bytes_off);
    t.v_codes = Place(state, t.ref.v_codes, mis, bytes_off);
    const bool mis_scales = mis || (misalign_scales && rng() % 2 == 1);
    t.m_scales = Place(state, t.ref.m_scales, mis_scales);
    t.v_scales = Place(state, t.ref.v_scales, mis_scales);
    t.param = SIZE_MAX;
    if (t.has_param && !t.param_aliases && n > 0) {
      const size_t bytes = n * DTypeSize(t.param_dtype);
      t.ref_param.resize(bytes);
      for (auto& b : t.ref_param) b = static_cast<uint8_t>(rng());  // poison
      t.param = state.Reserve(bytes, mis ? DTypeSize(t.param_dtype) : 0);
    }
    t.grad_off = n > 0
                     ? grads.Reserve(n * DTypeSize(t.grad_dtype), mis ? DTypeSize(t.grad_dtype) : 0)
                     : SIZE_MAX;
  }
  state.Allocate();
  grads.Allocate();
  ASSERT_FALSE(::testing::Test::HasFatalFailure());
  std::vector<StepSpan> spans;
  std::vector<uint32_t> index;
  for (Tensor& t : tensors) {
    Put(state, t.master_f32, t.ref.master_f32);
    Put(state, t.master_bf16, t.ref.master_bf16);
    Put(state, t.ecc8, t.ref.ecc8);
    Put(state, t.ecc16, t.ref.ecc16);
    Put(state, t.m_f32, t.ref.m_f32);
    Put(state, t.v_f32, t.ref.v_f32);
    Put(state, t.m_codes, t.ref.m_codes);
    Put(state, t.v_codes, t.ref.v_codes);
    Put(state, t.m_scales, t.ref.m_scales);
    Put(state, t.v_scales, t.ref.v_scales);
    Put(state, t.param, t.ref_param);
    StepSpan sp;
    sp.n = t.n;
    sp.formats = c.formats;
    sp.grad = DevPtr<const void>(grads, t.grad_off);
    sp.grad_dtype = t.grad_dtype;
    sp.master.f32 = DevPtr<float>(state, t.master_f32);
    sp.master.bf16 = DevPtr<uint16_t>(state, t.master_bf16);
    sp.master.ecc8 = DevPtr<int8_t>(state, t.ecc8);
    sp.master.ecc16 = DevPtr<int16_t>(state, t.ecc16);
    sp.m.f32 = DevPtr<float>(state, t.m_f32);
    sp.m.codes = DevPtr<uint8_t>(state, t.m_codes);
    sp.m.scales = DevPtr<uint16_t>(state, t.m_scales);
    sp.v.f32 = DevPtr<float>(state, t.v_f32);
    sp.v.codes = DevPtr<uint8_t>(state, t.v_codes);
    sp.v.scales = DevPtr<uint16_t>(state, t.v_scales);
    sp.param = t.param_aliases ? static_cast<void*>(sp.master.bf16) : DevPtr<void>(state, t.param);
    sp.param_dtype = t.param_dtype;
    spans.push_back(sp);
    index.push_back(t.group);
  }
  state.Upload();
  ASSERT_FALSE(::testing::Test::HasFatalFailure());
  StepPlan plan(c.algo, c.formats, spans, index);

  for (int step = 1; step <= steps; ++step) {
    const double lr = 1e-3 * step;
    StepScalars s[2];
    for (int k = 0; k < 2; ++k)
      s[k] = ComputeStepScalars(c.algo, c.hyper[k], lr, step, k == 0 ? 1.0 : 0.25);
    // skip_some: at step 2 every third tensor is left out (StepPlan::SetScalarIndex) and
    // must come out untouched; at step 3 every tensor is back.
    const bool skipping = skip_some && step == 2;
    if (skip_some) {
      std::vector<uint32_t> now = index;
      for (size_t k = 0; k < now.size(); ++k)
        if (skipping && k % 3 == 1) now[k] = StepPlan::kSkipSpan;
      plan.SetScalarIndex(now, nullptr);
    }
    for (size_t k = 0; k < tensors.size(); ++k) {
      Tensor& t = tensors[k];
      FillGrad(t, rng);
      Put(grads, t.grad_off, t.grad);
      if (skipping && k % 3 == 1) continue;
      void* param = t.param_aliases ? static_cast<void*>(t.ref.master_bf16.data())
                    : t.has_param   ? static_cast<void*>(t.ref_param.data())
                                    : nullptr;
      ReferenceStep(s[t.group],
                    t.ref.Span(0, t.n, t.grad.data(), t.grad_dtype, param, t.param_dtype));
    }
    grads.Upload();
    ASSERT_FALSE(::testing::Test::HasFatalFailure());
    // The grid never changes a bit: every SM, 8 left free, or one SM (reserve beyond the
    // device's count) in turn.
    const int reserve[3] = {0, 8, 1 << 20};
    plan.Launch(s, 2, nullptr, reserve[step % 3]);
    TANDEM_CUDA_OK(cudaDeviceSynchronize());
    state.Download();
    ASSERT_FALSE(::testing::Test::HasFatalFailure());
    for (size_t k = 0; k < tensors.size(); ++k) {
      const Tensor& t = tensors[k];
      const std::string at = "step " + std::to_string(step) + " tensor " + std::to_string(k) +
                             " (n=" + std::to_string(t.n) + ", grad " + Name(t.grad_dtype) +
                             (t.misaligned ? ", misaligned" : "") + ") ";
      ASSERT_TRUE(SameFloats(state, t.master_f32, t.ref.master_f32, nonfinite, at + "master.f32"));
      ASSERT_TRUE(SameBytes(state, t.master_bf16, t.ref.master_bf16, at + "master.bf16"));
      ASSERT_TRUE(SameBytes(state, t.ecc8, t.ref.ecc8, at + "ecc8"));
      ASSERT_TRUE(SameBytes(state, t.ecc16, t.ref.ecc16, at + "ecc16"));
      ASSERT_TRUE(SameFloats(state, t.m_f32, t.ref.m_f32, nonfinite, at + "m.f32"));
      ASSERT_TRUE(SameFloats(state, t.v_f32, t.ref.v_f32, nonfinite, at + "v.f32"));
      ASSERT_TRUE(SameBytes(state, t.m_codes, t.ref.m_codes, at + "m.codes"));
      ASSERT_TRUE(SameBytes(state, t.v_codes, t.ref.v_codes, at + "v.codes"));
      ASSERT_TRUE(SameBytes(state, t.m_scales, t.ref.m_scales, at + "m.scales"));
      ASSERT_TRUE(SameBytes(state, t.v_scales, t.ref.v_scales, at + "v.scales"));
      if (t.param_dtype == DType::kF32 && !t.ref_param.empty()) {
        ASSERT_TRUE(SameFloats(state, t.param, t.ref_param.data(), t.n, nonfinite, at + "param f32"));
      } else {
        ASSERT_TRUE(SameBytes(state, t.param, t.ref_param, at + "param " + Name(t.param_dtype)));
      }
    }
  }
}

std::vector<Combo> AllCombos() {
  HyperParams adam0, adam1;
  adam0.weight_decay = 0.01;
  adam1.lr_scale = 0.5;
  adam1.beta1 = 0.8;
  adam1.beta2 = 0.99;
  adam1.eps = 1e-6;
  adam1.weight_decay = 0.1;
  HyperParams lion0, lion1;
  lion0.beta1 = 0.9, lion0.beta2 = 0.99, lion0.weight_decay = 0.1;
  lion1.beta1 = 0.95, lion1.beta2 = 0.98, lion1.lr_scale = 2.0;
  HyperParams sgd_m0, sgd_m1;
  sgd_m0.momentum = 0.9, sgd_m0.dampening = 0.1, sgd_m0.weight_decay = 1e-4;
  sgd_m1.momentum = 0.5, sgd_m1.lr_scale = 3.0;
  HyperParams nest0 = sgd_m0, nest1 = sgd_m1;
  nest0.dampening = 0.0, nest0.nesterov = true, nest1.nesterov = true;
  HyperParams plain0, plain1;
  plain0.weight_decay = 1e-3;
  plain1.lr_scale = 0.1;
  HyperParams mixed1 = plain1;  // SGD: group 0 keeps momentum, group 1 does not

  const MasterFormat masters[4] = {MasterFormat::kF32, MasterFormat::kBF16, MasterFormat::kBF16Ecc8,
                                   MasterFormat::kBF16Ecc16};
  const MomentFormat moments[2] = {MomentFormat::kF32, MomentFormat::kQ8};
  auto fmt_name = [](const StateFormats& f) {
    std::string s = std::string(Name(f.master)) + "_m" + Name(f.momentum) + "_v" + Name(f.variance);
    for (char& ch : s)
      if (ch == '+') ch = '_';
    return s;
  };
  std::vector<Combo> out;
  for (MasterFormat ms : masters)
    for (MomentFormat mf : moments) {
      for (MomentFormat vf : moments) {
        const StateFormats f{ms, mf, vf};
        out.push_back({"adamw_" + fmt_name(f), Algorithm::kAdamW, f, {adam0, adam1}});
        out.push_back({"adam_l2_" + fmt_name(f), Algorithm::kAdam, f, {adam0, adam1}});
      }
      const StateFormats f{ms, mf, MomentFormat::kF32};
      out.push_back({"lion_" + fmt_name(f), Algorithm::kLion, f, {lion0, lion1}});
      out.push_back({"sgd_momentum_" + fmt_name(f), Algorithm::kSGD, f, {sgd_m0, sgd_m1}});
      out.push_back({"sgd_nesterov_" + fmt_name(f), Algorithm::kSGD, f, {nest0, nest1}});
      if (mf == MomentFormat::kF32) {
        out.push_back({"sgd_plain_" + fmt_name(f), Algorithm::kSGD, f, {plain0, plain1}});
        out.push_back({"sgd_mixed_" + fmt_name(f), Algorithm::kSGD, f, {sgd_m0, mixed1}});
      }
    }
  return out;
}

class GpuStepParity : public ::testing::TestWithParam<Combo> {
 protected:
  void SetUp() override {
    if (!DeviceAvailable()) GTEST_SKIP() << "no CUDA device";
  }
};

TEST_P(GpuStepParity, MixedSizesThreeSteps) {
  const std::vector<size_t> sizes = {0,     1,      7,    31,    32,   33,   64,   100, 255,  2047,
                                     2048,  2049,   4136, 10001, 0,    96,   1,    65,  4095, 6144,
                                     12345, 300001, 513,  40,    4096, 4097, 2304, 6400,
                                     16383, 16384,  16385, 32769, 32767, 65537};
  RunParity(GetParam(), sizes, 3, 1234);
}

TEST_P(GpuStepParity, ThousandsOfTinyTensorsTwoSteps) {
  std::mt19937 rng(99);
  std::vector<size_t> sizes(3000);
  for (auto& n : sizes) n = rng() % 80;
  RunParity(GetParam(), sizes, 2, 77);
}

// More work units than any device has resident blocks (2 per SM: 264 on an H200; here
// ~660 units of 32768 elements), so every block runs several units: Note [Metadata
// prefetch] rotates its buffers and Note [L2 prefetch] looks into the next unit (its tile
// 0, of another span), mixing full, partial and misaligned tiles and scale arrays.
TEST_P(GpuStepParity, ManyUnitsPerBlockTwoSteps) {
  std::mt19937 rng(2024);
  std::vector<size_t> sizes = {1000000, 4096, 16384 * 2 + 2048 * 3 + 256, 700001};
  for (int k = 0; k < 600; ++k) sizes.push_back(1 + rng() % 6000);
  RunParity(GetParam(), sizes, 2, 4321, /*misalign_scales=*/true);
}

// Aligned tensors of several whole work units (32768 elements each, Note [Whole fast
// units] in cuda/step_kernel.cuh) plus a partial unit, with each gradient dtype, so that
// every instance runs its whole-unit loop for bf16, fp32 and fp16 gradients and its
// per-tile loop for the last unit of each tensor.
TEST_P(GpuStepParity, WholeUnitsEveryGradDtypeTwoSteps) {
  const std::vector<size_t> sizes = {3 * 32768, 2 * 32768 + 4101, 32768 + 4096,
                                     65536,     32768 * 2 + 31,   4 * 32768 + 8};
  RunParity(GetParam(), sizes, 2, 8080, /*misalign_scales=*/false, /*nonfinite=*/false,
            {DType::kBF16, DType::kF32, DType::kF16});
}

// Non-finite gradients through every path: the fast tiles' batched fallbacks (NaN
// masters, NaN/Inf moments, square roots out of range) and the element-wise path, on full
// tiles, tails and misaligned tensors.
// Spans left out of a launch (tensors without a gradient at a step, through
// StepPlan::SetScalarIndex) are neither read nor written, and come back the next step.
TEST_P(GpuStepParity, SkippedSpansThreeSteps) {
  const std::vector<size_t> sizes = {4096, 40000, 33, 8192, 70001, 4097, 16384, 100, 32768, 5000};
  RunParity(GetParam(), sizes, 3, 606, /*misalign_scales=*/false, /*nonfinite=*/false, {},
            /*skip_some=*/true);
}

TEST_P(GpuStepParity, NonFiniteGradientsThreeSteps) {
  const std::vector<size_t> sizes = {4096, 40000, 33, 8192, 70001, 4097, 16384, 100, 32768, 5000};
  RunParity(GetParam(), sizes, 3, 555, /*misalign_scales=*/false, /*nonfinite=*/true);
}

INSTANTIATE_TEST_SUITE_P(AllFormats, GpuStepParity, ::testing::ValuesIn(AllCombos()),
                         [](const ::testing::TestParamInfo<Combo>& info) {
                           return info.param.name;
                         });

class GpuStepPlanErrors : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!DeviceAvailable()) GTEST_SKIP() << "no CUDA device";
  }
};

TEST_F(GpuStepPlanErrors, RejectsBadSpansAndScalars) {
  float* dev = nullptr;
  ASSERT_EQ(cudaMalloc(&dev, 4096), cudaSuccess);
  StepSpan sp;
  sp.n = 64;
  sp.grad = dev;
  sp.master.f32 = dev + 64;
  sp.m.f32 = dev + 128;
  sp.v.f32 = dev + 192;
  // Formats differing from the plan's.
  StateFormats q8{MasterFormat::kF32, MomentFormat::kQ8, MomentFormat::kF32};
  EXPECT_THROW(StepPlan(Algorithm::kAdamW, q8, {sp}, {0}), Error);
  // A missing pointer names the span.
  StepSpan bad = sp;
  bad.v.f32 = nullptr;
  try {
    StepPlan plan(Algorithm::kAdamW, StateFormats{}, {sp, bad}, {0, 0});
    ADD_FAILURE() << "no throw";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kInvalidArgument);
    EXPECT_NE(std::string(e.what()).find("span 1"), std::string::npos) << e.what();
  }
  // Scalar index out of range, index count mismatch.
  EXPECT_THROW(StepPlan(Algorithm::kAdamW, StateFormats{}, {sp}, {kMaxScalarGroups}), Error);
  EXPECT_THROW(StepPlan(Algorithm::kAdamW, StateFormats{}, {sp}, {}), Error);
  // Launch with the wrong algorithm or too few scalar sets.
  StepPlan plan(Algorithm::kAdamW, StateFormats{}, {sp}, {1});
  const StepScalars lion = ComputeStepScalars(Algorithm::kLion, HyperParams{}, 1e-3, 1, 1.0);
  const StepScalars adamw = ComputeStepScalars(Algorithm::kAdamW, HyperParams{}, 1e-3, 1, 1.0);
  const StepScalars two_lion[2] = {lion, lion};
  const StepScalars two_adamw[2] = {adamw, adamw};
  EXPECT_THROW(plan.Launch(two_lion, 2, nullptr), Error);
  EXPECT_THROW(plan.Launch(two_adamw, 1, nullptr), Error);
  // Adam keeps a momentum buffer: scalars saying otherwise are rejected before anything
  // is enqueued (the kernels take momentum as given for Adam and Lion).
  StepScalars no_m[2] = {adamw, adamw};
  no_m[1].has_momentum = 0;
  EXPECT_THROW(plan.Launch(no_m, 2, nullptr), Error);
  EXPECT_NO_THROW(plan.Launch(two_adamw, 2, nullptr));
  // A moved-from plan is empty; the moved-to one still launches.
  StepPlan moved = std::move(plan);
  EXPECT_NO_THROW(moved.Launch(two_adamw, 2, nullptr));
  EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  cudaFree(dev);
}

}  // namespace
}  // namespace tandem::gpu
