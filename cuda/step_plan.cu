// StepPlan: builds the device span table and work-unit map once, then launches the fused
// step (step_kernel.cuh) over all spans in one kernel per call.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstring>
#include <string>
#include <utility>

#include "cuda/cuda_check.h"
#include "cuda/gpu_step.h"
#include "engine/layout/plan_sizes.h"
#include "cuda/step_args.h"

namespace tandem::gpu {

// Note [Plan sizes] in engine/layout/plan_sizes.h.
static_assert(sizeof(detail::SpanMeta) == kSpanMetaBytes, "engine/layout/plan_sizes.h: SpanMeta");
static_assert(sizeof(detail::WorkUnit) == kWorkUnitBytes, "engine/layout/plan_sizes.h: WorkUnit");
static_assert(detail::kUnitElems == kStepUnitElems, "engine/layout/plan_sizes.h: unit elements");
static_assert(StepPlan::kSkipSpan == detail::kSkipSpanIndex, "one value marks a skipped span");

namespace {

using detail::CheckCuda;
using detail::SpanMeta;
using detail::WorkUnit;

[[noreturn]] void Invalid(const std::string& msg) {
  throw Error(ErrorKind::kInvalidArgument, "gpu::StepPlan: " + msg);
}

std::string SpanName(size_t i) { return "gpu::StepPlan span " + std::to_string(i); }

// Whether p is aligned for the 8-element tile access of elements of `elem_bytes`.
bool VecAligned(const void* p, size_t elem_bytes) {
  const size_t need = elem_bytes * 8 < 16 ? elem_bytes * 8 : 16;
  return reinterpret_cast<uintptr_t>(p) % need == 0;
}

bool SpanKeepsMomentum(Algorithm algo, const StepSpan& sp) {
  if (algo != Algorithm::kSGD) return true;
  return sp.formats.momentum == MomentFormat::kQ8 || sp.m.f32 != nullptr;
}

// A new device buffer from `memory` holding `bytes` copied from host (none for 0 bytes).
DeviceBuffer Upload(DeviceAllocator* memory, const void* host, size_t bytes, const char* what) {
  DeviceBuffer dev(memory, bytes, std::string("gpu::StepPlan: the ") + what);
  if (bytes > 0)
    CheckCuda(cudaMemcpy(dev.get(), host, bytes, cudaMemcpyHostToDevice),
              std::string("gpu::StepPlan: cudaMemcpy of the ") + what + " (" +
                  std::to_string(bytes) + " bytes)");
  return dev;
}

}  // namespace

bool DeviceAvailable() {
  int count = 0;
  const cudaError_t err = cudaGetDeviceCount(&count);
  if (err != cudaSuccess) {
    (void)cudaGetLastError();
    return false;
  }
  return count > 0;
}

StepPlan::StepPlan(Algorithm algo, const StateFormats& formats, const std::vector<StepSpan>& spans,
                   const std::vector<uint32_t>& scalar_index, DeviceAllocator* memory)
    : algo_(algo), formats_(formats), group_has_m_(kMaxScalarGroups, -1) {
  if (scalar_index.size() != spans.size())
    Invalid("scalar_index has " + std::to_string(scalar_index.size()) + " entries for " +
            std::to_string(spans.size()) + " spans");
  if (spans.size() > UINT32_MAX) Invalid("too many spans");
  std::vector<SpanMeta> metas(spans.size());
  std::vector<WorkUnit> units;
  span_has_m_.assign(spans.size(), 0);
  scalar_index_ = scalar_index;
  for (size_t i = 0; i < spans.size(); ++i) {
    const StepSpan& sp = spans[i];
    const std::string name = SpanName(i);
    if (!(sp.formats == formats))
      Invalid("span " + std::to_string(i) + " has formats " + Name(sp.formats) + ", the plan " +
              Name(formats));
    const bool skipped = scalar_index[i] == kSkipSpan;  // left out until SetScalarIndex
    if (!skipped && scalar_index[i] >= kMaxScalarGroups)
      Invalid("span " + std::to_string(i) + " uses scalar index " +
              std::to_string(scalar_index[i]) + ", the limit is " +
              std::to_string(kMaxScalarGroups - 1));
    // The scalars are given per launch; validate against the ones the span implies.
    StepScalars implied;
    implied.algo = algo;
    const bool has_m = SpanKeepsMomentum(algo, sp);
    implied.has_momentum = has_m ? 1 : 0;
    ValidateStepSpan(implied, sp, name.c_str());
    span_has_m_[i] = sp.n > 0 && has_m ? 1 : 0;
    if (sp.n > 0 && !skipped) {
      int8_t& group_m = group_has_m_[scalar_index[i]];
      if (group_m >= 0 && group_m != (has_m ? 1 : 0))
        Invalid("span " + std::to_string(i) + (has_m ? " keeps" : " keeps no") +
                " momentum buffer but an earlier span of scalar index " +
                std::to_string(scalar_index[i]) + " does not agree");
      group_m = has_m ? 1 : 0;
    }
    const uint64_t chunks = (sp.n + detail::kUnitElems - 1) / detail::kUnitElems;
    if (chunks > UINT32_MAX) Invalid("span " + std::to_string(i) + " is too large");

    SpanMeta& meta = metas[i];
    meta = SpanMeta{};
    meta.grad = sp.grad;
    const bool param_aliases = sp.param != nullptr && sp.param_dtype == DType::kBF16 &&
                               formats.master != MasterFormat::kF32 && sp.param == sp.master.bf16;
    meta.param = param_aliases ? nullptr : sp.param;
    meta.master = formats.master == MasterFormat::kF32 ? static_cast<void*>(sp.master.f32)
                                                       : static_cast<void*>(sp.master.bf16);
    meta.ecc = formats.master == MasterFormat::kBF16Ecc8 ? static_cast<void*>(sp.master.ecc8)
                                                         : static_cast<void*>(sp.master.ecc16);
    const bool m_q8 = formats.momentum == MomentFormat::kQ8;
    const bool v_q8 = formats.variance == MomentFormat::kQ8;
    meta.m = m_q8 ? static_cast<void*>(sp.m.codes) : static_cast<void*>(sp.m.f32);
    meta.m_scales = sp.m.scales;
    meta.v = v_q8 ? static_cast<void*>(sp.v.codes) : static_cast<void*>(sp.v.f32);
    meta.v_scales = sp.v.scales;
    meta.n = sp.n;
    meta.scalar_index = scalar_index[i];
    meta.grad_dtype = static_cast<uint8_t>(sp.grad_dtype);
    meta.param_dtype = static_cast<uint8_t>(sp.param_dtype);
    const size_t master_bytes = formats.master == MasterFormat::kF32 ? 4 : 2;
    const size_t ecc_bytes = formats.master == MasterFormat::kBF16Ecc16 ? 2 : 1;
    uint32_t vec = 0;
    if (VecAligned(meta.grad, DTypeSize(sp.grad_dtype))) vec |= detail::kVecGrad;
    if (VecAligned(meta.param, DTypeSize(sp.param_dtype))) vec |= detail::kVecParam;
    if (VecAligned(meta.master, master_bytes)) vec |= detail::kVecMaster;
    if (VecAligned(meta.ecc, ecc_bytes)) vec |= detail::kVecEcc;
    if (VecAligned(meta.m, m_q8 ? 1 : 4)) vec |= detail::kVecM;
    if (VecAligned(meta.v, v_q8 ? 1 : 4)) vec |= detail::kVecV;
    meta.vec_ok = vec;
    for (uint64_t c = 0; c < chunks; ++c)
      units.push_back(WorkUnit{static_cast<uint32_t>(i), static_cast<uint32_t>(c)});
  }
  if (units.size() > 0x7FFFFFFFu) Invalid("too many work units for one launch");
  num_spans_ = spans.size();
  num_units_ = units.size();
  int device = 0;
  CheckCuda(cudaGetDevice(&device), "gpu::StepPlan: cudaGetDevice");
  CheckCuda(cudaDeviceGetAttribute(&sm_count_, cudaDevAttrMultiProcessorCount, device),
            "gpu::StepPlan: cudaDeviceGetAttribute(multiprocessor count)");
  host_spans_.resize(metas.size() * sizeof(SpanMeta));
  if (!metas.empty()) std::memcpy(host_spans_.data(), metas.data(), host_spans_.size());
  device_spans_ = Upload(memory, metas.data(), metas.size() * sizeof(SpanMeta), "span table");
  device_units_ = Upload(memory, units.data(), units.size() * sizeof(WorkUnit), "work-unit map");
}

void StepPlan::SetScalarIndex(const std::vector<uint32_t>& index, void* stream) {
  if (index.size() != num_spans_)
    Invalid("SetScalarIndex: " + std::to_string(index.size()) + " indices for " +
            std::to_string(num_spans_) + " spans");
  std::vector<int8_t> group_m(kMaxScalarGroups, -1);
  for (size_t i = 0; i < index.size(); ++i) {
    if (index[i] == kSkipSpan) continue;
    if (index[i] >= kMaxScalarGroups)
      Invalid("SetScalarIndex: span " + std::to_string(i) + " uses scalar index " +
              std::to_string(index[i]) + ", the limit is " + std::to_string(kMaxScalarGroups - 1));
    const SpanMeta* meta = reinterpret_cast<const SpanMeta*>(host_spans_.data()) + i;
    if (meta->n == 0) continue;
    int8_t& m = group_m[index[i]];
    if (m >= 0 && m != span_has_m_[i])
      Invalid("SetScalarIndex: span " + std::to_string(i) +
              (span_has_m_[i] ? " keeps" : " keeps no") +
              " momentum buffer but an earlier span of scalar index " + std::to_string(index[i]) +
              " does not agree");
    m = static_cast<int8_t>(span_has_m_[i]);
  }
  group_has_m_ = std::move(group_m);
  if (index == scalar_index_ && !table_changed_) return;
  for (size_t i = 0; i < index.size(); ++i)
    reinterpret_cast<SpanMeta*>(host_spans_.data())[i].scalar_index = index[i];
  // From pageable memory: staged before cudaMemcpyAsync returns; runs in stream order,
  // before the next Launch on `stream`.
  TANDEM_CUDA(cudaMemcpyAsync(device_spans_.get(), host_spans_.data(), host_spans_.size(),
                              cudaMemcpyHostToDevice, static_cast<cudaStream_t>(stream)),
              "gpu::StepPlan::SetScalarIndex: cudaMemcpyAsync of the span table (" +
                  std::to_string(host_spans_.size()) + " bytes)");
  scalar_index_ = index;
  table_changed_ = false;
}

void StepPlan::SetGrad(size_t span, const void* grad) {
  if (span >= num_spans_)
    Invalid("SetGrad: span " + std::to_string(span) + " of " + std::to_string(num_spans_));
  SpanMeta& meta = reinterpret_cast<SpanMeta*>(host_spans_.data())[span];
  if (grad == nullptr && meta.n > 0) Invalid("SetGrad: " + SpanName(span) + ": grad is null");
  if (meta.grad == grad) return;
  meta.grad = grad;
  // The vector path depends on the gradient's alignment (as at construction).
  const uint32_t vec = VecAligned(grad, DTypeSize(static_cast<DType>(meta.grad_dtype)))
                           ? detail::kVecGrad
                           : 0u;
  meta.vec_ok = (meta.vec_ok & ~static_cast<uint32_t>(detail::kVecGrad)) | vec;
  table_changed_ = true;
}

void StepPlan::Launch(const StepScalars* scalars, size_t num_scalars, void* stream,
                      int reserve_sms) const {
  if (num_scalars > kMaxScalarGroups)
    Invalid(std::to_string(num_scalars) + " scalar sets given, the limit is " +
            std::to_string(kMaxScalarGroups));
  for (size_t k = 0; k < group_has_m_.size(); ++k) {
    if (group_has_m_[k] < 0) continue;
    if (k >= num_scalars || scalars == nullptr)
      Invalid("scalar index " + std::to_string(k) + " is used but only " +
              std::to_string(num_scalars) + " scalar sets were given");
    if (scalars[k].algo != algo_)
      Invalid(std::string("scalar set ") + std::to_string(k) + " is for " + Name(scalars[k].algo) +
              ", the plan for " + Name(algo_));
    if ((scalars[k].has_momentum != 0) != (group_has_m_[k] == 1))
      Invalid("scalar set " + std::to_string(k) +
              " has has_momentum=" + std::to_string(scalars[k].has_momentum) + " but its spans " +
              (group_has_m_[k] == 1 ? "keep" : "keep no") + " momentum buffer");
  }
  if (num_units_ == 0) return;
  bool any = false;
  for (uint32_t k : scalar_index_) any |= k != kSkipSpan;
  if (!any) return;  // every span left out of this step

  detail::LaunchArgs args{};
  args.spans = static_cast<const SpanMeta*>(device_spans_.get());
  args.units = static_cast<const WorkUnit*>(device_units_.get());
  args.num_units = static_cast<uint32_t>(num_units_);
  for (size_t k = 0; k < num_scalars; ++k) args.scalars[k] = scalars[k];

  detail::LaunchFn fn = nullptr;
  switch (algo_) {
    case Algorithm::kAdamW:
    case Algorithm::kAdam:
      fn = detail::AdamLauncher(formats_.master, formats_.momentum, formats_.variance);
      break;
    case Algorithm::kLion:
      fn = detail::LionLauncher(formats_.master, formats_.momentum);
      break;
    case Algorithm::kSGD:
      fn = detail::SgdLauncher(formats_.master, formats_.momentum);
      break;
  }
  if (fn == nullptr) throw Error(ErrorKind::kInternal, "gpu::StepPlan: no kernel instance");
  unsigned grid = 0;
  const int sms = std::max(1, sm_count_ - std::max(0, reserve_sms));
  const cudaError_t err = fn(args, sms, static_cast<cudaStream_t>(stream), &grid);
  if (err != cudaSuccess)
    CheckCuda(err, std::string("gpu::StepPlan::Launch: fused ") + Name(algo_) + " kernel (" +
                       Name(formats_) + ", " + std::to_string(num_spans_) + " spans, " +
                       std::to_string(num_units_) + " work units, grid " + std::to_string(grid) +
                       " x " + std::to_string(detail::kBlockThreads) + ")");
}

size_t StepPlan::device_bytes() const {
  return num_spans_ * sizeof(SpanMeta) + num_units_ * sizeof(WorkUnit);
}

size_t StepPlan::PredictDeviceBytes(const std::vector<uint64_t>& span_numels) {
  return PredictStepPlanBytes(span_numels);
}

}  // namespace tandem::gpu
