#include "engine/layout/memory_plan.h"

#include <algorithm>

#include "engine/layout/plan_groups.h"
#include "engine/layout/plan_sizes.h"
#include "engine/layout/tensor_rules.h"

namespace tandem::layout {

MemoryPlan PlanMemory(const std::vector<TensorSpec>& specs,
                      const std::vector<StateFormats>& formats, const LayoutParams& params,
                      const Placement& placement, bool gpu, bool sizes_only) {
  MemoryPlan lp;
  const size_t n = specs.size();
  lp.hot.Reset(n, !sizes_only);
  lp.cold.Reset(n, !sizes_only);
  for (size_t t = 0; t < n; ++t) {
    const TensorSpec& s = specs[t];
    const HyperParams& h = params.groups[s.group];
    const StateFormats& f = formats[t];
    const uint64_t dc = placement.tensors[t].device_count;
    // Note [Master aliases the parameter] in engine/layout/state_layout.h.
    const uint64_t sc = placement.tensors[t].stream_count;
    lp.hot.Add(t, 0, dc, params.algorithm, h, f, MasterAliases(f.master, s.param_dtype));
    lp.cold.Add(t, dc + sc, s.numel - dc - sc, params.algorithm, h, f, /*alias_param=*/false);
  }
  lp.stream.Build(specs, formats, params.algorithm, params.groups, params.stream_chunk_bytes,
                  placement, !sizes_only);
  if (!lp.stream.chunks().empty()) {
    const uint64_t slot_grad_bytes = Aligned(lp.stream.grad_slot_bytes());
    lp.slot_grad_off = Aligned(lp.stream.slot_bytes());
    lp.slot_stride = lp.slot_grad_off + (params.release_grads ? slot_grad_bytes : 0);
    lp.stream_slot_bytes = params.stream_slots * lp.slot_stride;
    lp.release_slot_bytes = params.stream_slots * slot_grad_bytes;
  }
  // Staging for the pipeline: K gradient slots and, where a chunk cannot upload its state
  // directly, K parameter slots.
  for (size_t t = 0; t < n; ++t) {
    const uint64_t cold = placement.tensors[t].host_compute_count();
    if (cold == 0) continue;
    const uint64_t c = std::min<uint64_t>(cold, params.chunk_elements);
    lp.grad_slot_bytes = std::max<uint64_t>(lp.grad_slot_bytes, c * DTypeSize(specs[t].grad_dtype));
    if (!MasterAliases(formats[t].master, specs[t].param_dtype))
      lp.param_slot_bytes =
          std::max<uint64_t>(lp.param_slot_bytes, c * DTypeSize(specs[t].param_dtype));
  }
  SlabLayout staging;
  if (lp.grad_slot_bytes > 0) {
    for (int i = 0; i < params.pipeline_slots; ++i)
      lp.grad_slot_off.push_back(staging.Add(lp.grad_slot_bytes));
    if (lp.param_slot_bytes > 0)
      for (int i = 0; i < params.pipeline_slots; ++i)
        lp.param_slot_off.push_back(staging.Add(lp.param_slot_bytes));
  }
  lp.staging_bytes = staging.total();
  // Early start: one landing place per host-computed gradient element; with speculation, a
  // holding place per speculated parameter that cannot go up from its own master.
  SlabLayout early;
  lp.early_off.assign(n, 0);
  for (size_t t = 0; t < n; ++t) {
    const uint64_t cold = placement.tensors[t].host_compute_count();
    lp.early_off[t] = early.Add(cold * DTypeSize(specs[t].grad_dtype));
  }
  lp.early_bytes = early.total();
  // Note [Host speculation budget]: the chunks in the order their gradients arrive.
  lp.cold_backup.Reset(n, !sizes_only);
  std::vector<uint64_t> covered(n, 0);
  if (params.speculative_early_start) {
    const uint64_t budget = params.speculative_host_bytes;
    uint64_t taken = 0;
    bool full = false;
    for (size_t t = n; t-- > 0 && !full;) {
      const uint64_t cold = placement.tensors[t].host_compute_count();
      const TensorSpec& s = specs[t];
      const StateFormats& f = formats[t];
      const bool held = !MasterAliases(f.master, s.param_dtype);
      for (uint64_t off = 0; off < cold; off += params.chunk_elements) {
        const uint64_t c = std::min<uint64_t>(params.chunk_elements, cold - off);
        const uint64_t bytes = PartBytes(c, params.algorithm, params.groups[s.group], f, false) +
                               (held ? c * DTypeSize(s.param_dtype) : 0);
        if (budget != 0 && taken + bytes > budget) {
          full = true;
          break;
        }
        taken += bytes;
        covered[t] += c;
      }
    }
  }
  SlabLayout hold;
  lp.hold_off.assign(n, kNoOffset);
  for (size_t t = 0; t < n; ++t) {
    const TensorSpec& s = specs[t];
    const StateFormats& f = formats[t];
    const uint64_t dc = placement.tensors[t].device_count, sc = placement.tensors[t].stream_count;
    lp.cold_backup.Add(t, dc + sc, covered[t], params.algorithm, params.groups[s.group], f, false);
    if (covered[t] > 0 && !MasterAliases(f.master, s.param_dtype))
      lp.hold_off[t] = hold.Add(covered[t] * DTypeSize(s.param_dtype));
  }
  lp.hold_bytes = hold.total();
  const std::vector<StreamChunk>& sch = lp.stream.chunks();
  lp.spec_spare_off.assign(sch.size(), kNoOffset);
  lp.spec_hold_off.assign(sch.size(), kNoOffset);
  if (params.speculative_early_start) {
    // The last chunks, whose gradients backward produces first, within the budget.
    SlabLayout spare, held;
    uint64_t taken = 0;
    for (size_t c = sch.size(); c-- > 0;) {
      if (taken + sch[c].bytes > params.speculative_stream_bytes) break;
      taken += sch[c].bytes;
      lp.spec_spare_off[c] = spare.Add(sch[c].bytes);
      lp.spec_hold_off[c] = held.Add(lp.stream.hold_bytes(c, specs));
    }
    lp.spec_spare_bytes = spare.total();
    lp.spec_hold_bytes = held.total();
  }
  if (params.release_grads) {
    // Gradient release: the GPU-resident parts' gradients and the streamed chunks'.
    SlabLayout hot, streamed;
    lp.hot_grad_off.assign(n, 0);
    for (size_t t = 0; t < n; ++t)
      lp.hot_grad_off[t] =
          hot.Add(placement.tensors[t].device_count * DTypeSize(specs[t].grad_dtype));
    for (const StreamChunk& c : sch) lp.stream_grad_off.push_back(streamed.Add(c.grad_bytes));
    lp.hot_grad_bytes = hot.total();
    lp.stream_grad_bytes = streamed.total();
  }
  MemoryReport::Bytes& dev = gpu ? lp.report.device : lp.report.host;
  lp.hot.Report(&dev);
  lp.cold.Report(&lp.report.host);
  lp.stream.Report(&lp.report.host);
  lp.report.host.staging += lp.staging_bytes;
  dev.staging += lp.stream_slot_bytes;  // the device slots chunks stream through
  lp.report.classes = {lp.hot.bytes(), lp.stream.bytes(), lp.stream_slot_bytes, lp.cold.bytes()};
  // Allocated at construction with speculation or release (the hot path never allocates;
  // otherwise GradReady allocates it on first use): the early-start gradient buffer.
  if (params.speculative_early_start || params.release_grads) lp.report.host.staging += lp.early_bytes;
  if (params.speculative_early_start) {
    // The backup of the host-computed chunks taken within speculative_host_bytes plus
    // their parameter holding buffer; for streamed chunks, the backups and holding places
    // of the chunks taken above (at most speculative_stream_bytes of the streamed state).
    lp.report.host.speculation += lp.cold_backup.bytes() + lp.hold_bytes + lp.spec_spare_bytes;
    dev.speculation += lp.spec_hold_bytes;
  }
  dev.grads += lp.hot_grad_bytes;
  lp.report.host.grads += lp.stream_grad_bytes;
  return lp;
}

void AddPlanMetadata(const std::vector<TensorSpec>& specs,
                     const std::vector<StateFormats>& formats, const Placement& placement,
                     const MemoryPlan& plan, MemoryReport* report) {
  // The hot plans, one per format set of the hot spans, and the pre-pass's plan.
  std::vector<gpu::NormSize> norm;
  for (const TensorSpec& s : specs) norm.push_back({s.numel, NormRun(s)});
  uint64_t bytes = gpu::PredictGradNormPlanBytes(norm);
  std::vector<uint64_t> hot;
  std::vector<StateFormats> hot_formats;
  for (size_t t = 0; t < specs.size(); ++t)
    if (placement.tensors[t].device_count > 0) {
      hot.push_back(placement.tensors[t].device_count);
      hot_formats.push_back(formats[t]);
    }
  auto add_plans = [&](const std::vector<uint64_t>& numels,
                       const std::vector<StateFormats>& set_formats) {
    for (const std::vector<uint32_t>& spans : GroupByFormats(set_formats).spans) {
      std::vector<uint64_t> mine;
      for (uint32_t i : spans) mine.push_back(numels[i]);
      bytes += gpu::PredictStepPlanBytes(mine);
    }
  };
  add_plans(hot, hot_formats);
  // Per streamed chunk, one plan per format set of its spans; a speculative chunk has a
  // second set, over its hold spans.
  for (size_t k = 0; k < plan.stream.chunks().size(); ++k) {
    const StreamChunk& c = plan.stream.chunks()[k];
    std::vector<uint64_t> numels;
    std::vector<StateFormats> chunk_formats;
    for (uint32_t i = c.first; i < c.end; ++i) {
      const StreamPiece& piece = plan.stream.pieces()[i];
      numels.push_back(piece.count);
      chunk_formats.push_back(formats[piece.tensor]);
    }
    add_plans(numels, chunk_formats);
    if (plan.spec_hold_off[k] != kNoOffset) add_plans(numels, chunk_formats);
  }
  report->device.metadata += bytes;
  report->host.metadata += gpu::PredictGradNormPinnedBytes(specs.size());  // its results
}

}  // namespace tandem::layout
