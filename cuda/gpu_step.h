// Internal host API of the fused CUDA optimizer kernels (namespace tandem::gpu).
//
// No CUDA type appears here: streams are passed as `void*` (a cudaStream_t, nullptr for
// the legacy default stream). Every failing CUDA call throws tandem::Error with kind
// kCuda (kOutOfMemory for allocations) naming the call, the plan and the sizes; invalid
// arguments throw kind kInvalidArgument naming the span or tensor at fault.
//
// Thread safety: a plan may be launched from one thread at a time; distinct plans are
// independent. The device that is current when a plan is built must be current when it
// is launched and destroyed.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "cuda/device_memory.h"
#include "engine/layout/plan_sizes.h"
#include "engine/exact_sum.h"
#include "engine/step_scalars.h"
#include "engine/step_span.h"
#include "tandem/types.h"

namespace tandem::gpu {

// The largest number of distinct StepScalars (param groups) one StepPlan launch takes;
// they travel by value in the kernel's parameters (cuda/step_args.h, LaunchArgs).
inline constexpr size_t kMaxScalarGroups = 32;

// True when a usable CUDA device exists. Never throws.
bool DeviceAvailable();

// A fused step over many spans, each a tensor or a group-aligned part of one, all sharing
// one algorithm and one set of state formats; gradient and parameter dtypes may differ
// per span. The span table lives on the device and is built once; each Launch is one
// kernel launch whatever the number of spans (none when every span is empty).
class StepPlan {
 public:
  // spans: device pointers (grad, param, master, m, v) that must stay valid and keep
  // their addresses for the plan's life; every span must satisfy the StepSpan contract
  // (engine/step_span.h) and have formats == `formats`. scalar_index[i] (one per span,
  // < kMaxScalarGroups, or kSkipSpan: left out until SetScalarIndex) selects the entry of
  // Launch's `scalars` that span i uses.
  // For SGD a span keeps a momentum buffer exactly when m.f32 or m.codes is set (or the
  // momentum format is q8); spans of one scalar_index must agree on that.
  // The device tables come from `memory` (null: cudaMalloc; it must outlive the plan).
  // Throws Error(kInvalidArgument) naming the span (ValidateStepSpan), Error(kCuda /
  // kOutOfMemory) when the device table cannot be made.
  StepPlan(Algorithm algo, const StateFormats& formats, const std::vector<StepSpan>& spans,
           const std::vector<uint32_t>& scalar_index, DeviceAllocator* memory = nullptr);
  StepPlan(const StepPlan&) = delete;
  StepPlan& operator=(const StepPlan&) = delete;
  StepPlan(StepPlan&& other) noexcept = default;
  StepPlan& operator=(StepPlan&& other) noexcept = default;

  // Which scalars each span uses from the next Launch on `stream` on: index[i] for span
  // i, or kSkipSpan to leave span i out of the launches (not read, not written). Replaces
  // the construction's scalar_index (same rules per index); uploads the span table on
  // `stream` only when this changes it. Throws Error(kInvalidArgument) naming the span
  // (a wrong size, an index >= kMaxScalarGroups, spans of one index that disagree on a
  // momentum buffer); nothing changes then.
  static constexpr uint32_t kSkipSpan = kSkipScalarIndex;
  void SetScalarIndex(const std::vector<uint32_t>& index, void* stream);

  // Points span i's gradient at `grad` (device memory, the span's n elements of its
  // grad_dtype; the plan only reads it) from the next Launch on: the table is uploaded
  // by the next SetScalarIndex, which uploads it when this changed anything. Throws
  // Error(kInvalidArgument) for a bad span index or a null grad of a non-empty span;
  // nothing changes then.
  void SetGrad(size_t span, const void* grad);

  // Enqueues one fused step of all spans on `stream`. scalars[k] are the scalars of
  // scalar_index k (num_scalars must cover every index used, at most kMaxScalarGroups);
  // each must have algo == the plan's algorithm and, for SGD, has_momentum matching the
  // spans that use it. The scalars are copied into the launch; the caller may reuse them
  // on return. reserve_sms: streaming multiprocessors the launch leaves free for kernels
  // of other streams (its persistent grid otherwise holds every SM until it ends; the
  // result does not depend on the grid). Throws Error(kInvalidArgument) on a mismatch
  // (nothing enqueued) or Error(kCuda) when the launch fails.
  void Launch(const StepScalars* scalars, size_t num_scalars, void* stream,
              int reserve_sms = 0) const;

  size_t num_spans() const { return num_spans_; }
  size_t num_work_units() const { return num_units_; }  // 2048-element tiles per launch

  // Device memory this plan holds (span table + work-unit map), and the same figure for
  // spans of the given sizes, computed without building a plan (memory planning).
  size_t device_bytes() const;
  static size_t PredictDeviceBytes(const std::vector<uint64_t>& span_numels);

 private:
  Algorithm algo_ = Algorithm::kAdamW;
  StateFormats formats_;
  size_t num_spans_ = 0;
  size_t num_units_ = 0;
  int sm_count_ = 0;  // of the device current at construction
  // For each scalar index: -1 unused, 0 its spans keep no momentum, 1 they do.
  std::vector<int8_t> group_has_m_;
  std::vector<uint8_t> span_has_m_;     // per span: keeps a momentum buffer (and n > 0)
  std::vector<uint32_t> scalar_index_;  // per span, as in the device table now
  std::vector<unsigned char> host_spans_;  // the device span table's bytes
  bool table_changed_ = false;             // host_spans_ differs from the device table
  DeviceBuffer device_spans_;  // detail::SpanMeta[num_spans_]
  DeviceBuffer device_units_;  // detail::WorkUnit[num_units_]
};

struct GradRef {
  const void* ptr;  // device pointer to n elements of dtype
  size_t n;
  DType dtype;
  uint64_t run = 0;  // elements per run (Note [Exact sum of squares]); 0: the whole tensor
};

// The exact global sum of squares of all gradients and a non-finite flag (Note [Exact sum
// of squares] in engine/exact_sum.h), in one launch over all tensors plus one single-block
// finishing launch: the same bits as offload::HostGradNorm, whatever the partition.
// Pointers must stay valid for the plan's life.
class GradNormPlan {
 public:
  // The device buffers come from `memory` (null: cudaMalloc; it must outlive the plan).
  // Throws Error(kInvalidArgument) for a null pointer with n > 0 or a bad dtype,
  // Error(kCuda / kOutOfMemory) when the device or pinned buffers cannot be made.
  explicit GradNormPlan(const std::vector<GradRef>& grads, DeviceAllocator* memory = nullptr);
  ~GradNormPlan();
  GradNormPlan(const GradNormPlan&) = delete;
  GradNormPlan& operator=(const GradNormPlan&) = delete;

  // Enqueues the reduction on `stream`; the result lands in pinned host memory.
  void Launch(void* stream);

  // Tensor i's gradient is read at `grad` (n elements of its dtype) from the next Launch
  // on: the table is uploaded by the next SetActive, which uploads it when this changed
  // anything. Throws Error(kInvalidArgument) for a bad index or a null grad with n > 0.
  void SetGrad(size_t tensor, const void* grad);

  // From the next Launch on `stream` on, the tensors with active[i] == 0 count as empty
  // (not read); an empty `active` means every tensor. Tensors with keep[i] != 0 (and
  // active) are not read either: Launch adds the unit partials their last LaunchTensor
  // left (early start). The tensor table is uploaded (on `stream`) only when this changes
  // it. Throws Error(kInvalidArgument) for a size that is neither 0 nor the tensor count.
  void SetActive(const std::vector<uint8_t>& active, void* stream,
                 const std::vector<uint8_t>& keep = {});

  // Early start: enqueues on `stream` the unit partials of tensor i alone (read at its
  // SetGrad pointer, passed by value: the table is not touched) and their sum, which lands
  // in pinned host memory (ReadTensor). The partials stay for a Launch that keeps them
  // (SetActive's keep); the next LaunchTensor(i) overwrites them. Partials are exact
  // integers: Launch's total is the same whichever tensors went this way, in any order.
  // Throws Error(kInvalidArgument) for a bad index.
  void LaunchTensor(size_t tensor, void* stream);

  struct Result {
    double sum_squares;  // `exact` rounded to double
    bool nonfinite;      // some element is NaN or +-Inf
    exact::Acc exact;    // sum over all elements of x*x, exactly (normalized)
  };
  // Valid once the stream has completed the last Launch (synchronize first).
  Result Read() const;
  // Tensor i's statistics from its last LaunchTensor; valid once that stream completed it.
  Result ReadTensor(size_t tensor) const;

  // Device memory held (tensor table, work-unit map, partial sums, the total, each
  // tensor's total) and pinned host memory held (the results); PredictDeviceBytes and
  // PredictGradNormPinnedBytes give them for given tensor sizes.
  size_t device_bytes() const;
  size_t pinned_bytes() const { return PredictGradNormPinnedBytes(num_tensors_); }
  static size_t PredictDeviceBytes(const std::vector<NormSize>& tensors);

 private:
  size_t num_tensors_ = 0;
  size_t num_units_ = 0;
  void Release() noexcept;

  std::vector<GradRef> grads_;       // as built
  std::vector<uint64_t> first_unit_;  // per tensor, and one past the last
  std::vector<uint8_t> active_;      // 0 out, 1 read, 2 kept: as in the device table now
  bool pointers_changed_ = false;    // grads_ differs from the device table
  DeviceBuffer device_tensors_;         // detail::NormTensor[]
  DeviceBuffer device_units_;           // detail::NormUnit[]
  DeviceBuffer device_partials_;        // per unit: 16 limbs and a non-finite flag
  DeviceBuffer device_total_;           // the same, for the whole sum
  uint64_t* host_total_ = nullptr;      // pinned copy of device_total_
  DeviceBuffer device_tensor_totals_;   // per tensor: LaunchTensor's total
  uint64_t* host_tensor_totals_ = nullptr;  // pinned copies
};

}  // namespace tandem::gpu
