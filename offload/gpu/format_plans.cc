#include "offload/gpu/format_plans.h"

#include <algorithm>
#include <utility>

namespace tandem::offload {
static_assert(kSkipScalarIndex == gpu::StepPlan::kSkipSpan, "one value marks a span left out");

void LaunchScalars(gpu::StepPlan& plan, const std::vector<uint32_t>& span_index,
                   const std::vector<StepScalars>& scalars, void* stream, int reserve_sms) {
  const size_t per = gpu::kMaxScalarGroups;
  std::vector<uint32_t> index(span_index.size());
  for (size_t first = 0; first < std::max<size_t>(scalars.size(), 1); first += per) {
    bool any = false;
    for (size_t k = 0; k < span_index.size(); ++k) {
      const uint32_t s = span_index[k];
      const bool mine = s != kSkipScalarIndex && s >= first && s < first + per;
      index[k] = mine ? static_cast<uint32_t>(s - first) : gpu::StepPlan::kSkipSpan;
      any |= mine;
    }
    if (!any) continue;
    plan.SetScalarIndex(index, stream);
    plan.Launch(scalars.data() + first, std::min(per, scalars.size() - first), stream, reserve_sms);
  }
}

FormatPlans::FormatPlans(DeviceAllocator* memory, Algorithm algo, const std::vector<StepSpan>& spans,
                         std::vector<uint32_t> span_tensor, std::vector<uint64_t> grad_offset,
                         std::vector<const void*> slot_grad)
    : span_tensor_(std::move(span_tensor)),
      grad_offset_(std::move(grad_offset)),
      slot_grad_(std::move(slot_grad)) {
  std::vector<StateFormats> formats;
  for (const StepSpan& sp : spans) formats.push_back(sp.formats);
  groups_ = layout::GroupByFormats(formats);
  for (size_t p = 0; p < groups_.formats.size(); ++p) {
    std::vector<StepSpan> mine;
    for (uint32_t i : groups_.spans[p]) mine.push_back(spans[i]);
    plans_.push_back(std::make_unique<gpu::StepPlan>(
        algo, groups_.formats[p], mine, std::vector<uint32_t>(mine.size(), kSkipScalarIndex),
        memory));
    bytes_ += plans_.back()->device_bytes();
  }
}

bool FormatPlans::AnyActive(const std::vector<uint32_t>& scalar_index) const {
  for (uint32_t t : span_tensor_)
    if (scalar_index[t] != kSkipScalarIndex) return true;
  return false;
}

void FormatPlans::Launch(const std::vector<StepScalars>& scalars,
                         const std::vector<uint32_t>& scalar_index, void* stream, int reserve_sms) {
  for (size_t p = 0; p < plans_.size(); ++p) {
    index_.clear();
    for (uint32_t i : groups_.spans[p]) index_.push_back(scalar_index[span_tensor_[i]]);
    LaunchScalars(*plans_[p], index_, scalars, stream, reserve_sms);
  }
}

void FormatPlans::SetGrad(size_t t, const void* grad) {
  for (size_t p = 0; p < plans_.size(); ++p) {
    const std::vector<uint32_t>& spans = groups_.spans[p];
    for (size_t k = 0; k < spans.size(); ++k)
      if (span_tensor_[spans[k]] == t)
        plans_[p]->SetGrad(k, static_cast<const uint8_t*>(grad) + grad_offset_[spans[k]]);
  }
}

void FormatPlans::SetSlotGrads(size_t t) {
  if (slot_grad_.empty()) return;
  for (size_t p = 0; p < plans_.size(); ++p) {
    const std::vector<uint32_t>& spans = groups_.spans[p];
    for (size_t k = 0; k < spans.size(); ++k)
      if (span_tensor_[spans[k]] == t) plans_[p]->SetGrad(k, slot_grad_[spans[k]]);
  }
}

}  // namespace tandem::offload
