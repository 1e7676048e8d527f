// HybridOptimizer: construction, validation, state layout, PredictMemory, and the public
// methods that forward to Impl (offload/optimizer_impl.h says how the files divide).
#include <sched.h>

#include <algorithm>
#include <cstdio>
#include <optional>
#include <set>
#include <string>
#include <thread>

#include "engine/shape.h"
#include "engine/state_arrays.h"
#include "engine/layout/memory_plan.h"
#include "engine/layout/plan_sizes.h"
#include "engine/layout/tensor_rules.h"
#include "offload/grad_stats.h"
#include "offload/host_transport.h"
#include "offload/optimizer_impl.h"
#include "tandem/error.h"

namespace tandem {

using offload::MemKind;

bool CudaDeviceAvailable() { return offload::GpuSide::Available(); }

int MaxHostThreads() {
  cpu_set_t set;
  CPU_ZERO(&set);
  int cores = 0;
  if (sched_getaffinity(0, sizeof(set), &set) == 0) cores = CPU_COUNT(&set);
  if (cores <= 0) cores = static_cast<int>(std::thread::hardware_concurrency());
  return std::max(16, 4 * std::max(cores, 1));
}

// ---------------------------------------------------------------------------------------
// Construction

namespace {
// host_threads, checked before the driver's arena is made from it (a huge value used to
// build an arena and crash later).
int CheckedHostThreads(int threads) {
  if (threads < 0)
    throw Error(ErrorKind::kInvalidArgument,
                "host_threads must be >= 0, got " + std::to_string(threads));
  if (threads > MaxHostThreads())
    throw Error(ErrorKind::kInvalidArgument,
                "host_threads = " + std::to_string(threads) + " exceeds the limit of " +
                    std::to_string(MaxHostThreads()) +
                    " (4 x the cores this process may run on, at least 16); 0 uses every core");
  return threads;
}
}  // namespace

HybridOptimizer::Impl::Impl(std::vector<TensorSpec> specs, OptimizerConfig cfg)
    : specs_(std::move(specs)),
      cfg_(std::move(cfg)),
      mode_(cfg_.mode),
      driver_(CheckedHostThreads(cfg_.host_threads), size_t{1} << 16, cfg_.host_cpus) {
  if (mode_ == ExecutionMode::kAuto)
    mode_ = offload::GpuSide::Available() ? ExecutionMode::kGpu : ExecutionMode::kHost;
  if (mode_ == ExecutionMode::kGpu) {
    // kUnsupported in a build without CUDA
    gpu_ = offload::GpuSide::Create(cfg_.cuda_stream, cfg_.faults);
    if (!offload::GpuSide::Available())
      throw Error(ErrorKind::kUnsupported, "GPU mode requested but no CUDA device is available");
  }
  Validate();
  formats_ = layout::TensorFormats(specs_, cfg_);
  // The one placement decision (tandem/resolve_placement.h), with the rates auto needs.
  const std::optional<MachineRates> rates = Rates();
  const ResolvedPlacement resolved =
      ResolvePlacement(specs_, cfg_, mode_, rates ? &*rates : nullptr);
  placement_ = resolved.placement;
  split_ = resolved.split;
  CheckHostBudget(resolved.memory);  // before any state is allocated
  BuildLayout();
  driver_.Execute([this] { InitState(); });  // on the optimizer's own (pinned) threads
  BuildChunks();
  last_upload_.assign(specs_.size(), 0);
  chunk_ticket_.assign(chunks_.size(), 0);
  grad_ready_.assign(specs_.size(), 0);
  for (const TensorSpec& s : specs_) grad_.push_back(s.grad);
  used_grad_ = checked_grad_ = grad_;
  tensor_step_.assign(specs_.size(), 0);
  if (cfg_.speculative_early_start && pipeline_) BuildSpeculation();
}

HybridOptimizer::Impl::~Impl() {
  // Mid-speculation: the worker finishes the chunk it is on (its download completes) and
  // drops the rest; nothing it used is freed before it is joined. Streamed chunks'
  // speculative copies finish before their buffers go.
  speculator_.reset();
  if (stream_exec_ != nullptr) {
    try {
      stream_exec_->WaitSpeculated();
    } catch (...) {  // a CUDA error: the streams are synchronised by GpuSide's destructor
    }
  }
  if (transport_) transport_->Drain();
}

void HybridOptimizer::Impl::Validate() {
  auto fail = [](const std::string& m) { throw Error(ErrorKind::kInvalidArgument, m); };
  const OptimizerConfig& c = cfg_;
  if (static_cast<unsigned>(c.algorithm) > static_cast<unsigned>(Algorithm::kSGD))
    fail("unknown algorithm value " + std::to_string(static_cast<unsigned>(c.algorithm)));
  if (c.groups.empty()) fail("OptimizerConfig::groups is empty");
  for (size_t g = 0; g < c.groups.size(); ++g)
    ValidateHyperParams(c.algorithm, c.groups[g], "group " + std::to_string(g));
  layout::CheckFormats(c.algorithm, c.groups, c.formats, "OptimizerConfig::formats");
  if (!(c.offload_fraction >= 0.0 && c.offload_fraction <= 1.0))
    fail("offload_fraction must be in [0, 1], got " + std::to_string(c.offload_fraction));
  if (c.chunk_elements < kQuantGroup || c.chunk_elements % kQuantGroup != 0)
    fail("chunk_elements must be a positive multiple of 32, got " +
         std::to_string(c.chunk_elements));
  if (c.pipeline_slots < 2)
    fail("pipeline_slots must be >= 2, got " + std::to_string(c.pipeline_slots));
  if (!(c.offload_compute == kOffloadComputeAuto ||
        (c.offload_compute >= 0.0 && c.offload_compute <= 1.0)))
    fail("offload_compute must be auto (" + std::to_string(kOffloadComputeAuto) +
         ") or a share in [0, 1], got " + std::to_string(c.offload_compute));
  if (c.machine_rates && !c.machine_rates->valid())
    fail("machine_rates must all be finite and > 0");
  if (c.stream_chunk_bytes < 4096)
    fail("stream_chunk_bytes must be >= 4096, got " + std::to_string(c.stream_chunk_bytes));
  if (c.stream_slots < 2)
    fail("stream_slots must be >= 2, got " + std::to_string(c.stream_slots));


  std::set<std::string> names;
  for (size_t i = 0; i < specs_.size(); ++i) {
    const TensorSpec& s = specs_[i];
    const std::string who = "tensor " + std::to_string(i) + " '" + s.name + "'";
    if (s.name.empty()) fail("tensor " + std::to_string(i) + " has an empty name");
    if (!names.insert(s.name).second) fail(who + ": duplicate name");
    if (static_cast<unsigned>(s.param_dtype) > 2) fail(who + ": unknown param dtype");
    if (static_cast<unsigned>(s.grad_dtype) > 2) fail(who + ": unknown grad dtype");
    if (s.group >= c.groups.size())
      fail(who + ": group " + std::to_string(s.group) + " but only " +
           std::to_string(c.groups.size()) + " groups configured");
    if (s.formats)
      layout::CheckFormats(c.algorithm, std::span(&c.groups[s.group], 1), *s.formats,
                            who + ": formats " + Name(*s.formats), s.group);
    if (!s.shape.empty()) {
      const std::optional<uint64_t> product = ShapeElements(s.shape);
      if (!product || *product != s.numel) {
        std::string m = who;
        m.append(": shape has ").append(product ? std::to_string(*product) : "more than 2^64");
        m.append(" elements but numel is ").append(std::to_string(s.numel));
        fail(m);
      }
    }
    if (s.norm_unit != 0 && s.numel % s.norm_unit != 0)
      fail(who + ": norm_unit " + std::to_string(s.norm_unit) + " does not divide numel " +
           std::to_string(s.numel));
    if (s.numel == 0) continue;
    if (s.param == nullptr) fail(who + ": param is null");
    if (s.grad == nullptr) fail(who + ": grad is null");
    if (gpu()) {
      auto detail = [&](DType d) {
        std::string text = std::to_string(s.numel);
        text.insert(0, 1, '(');
        text.append(" elements of ").append(Name(d)).append(")");
        return text;
      };
      gpu_->CheckDevicePointer(s.param, s.numel * DTypeSize(s.param_dtype),
                               detail(s.param_dtype), who, "param");
      gpu_->CheckDevicePointer(s.grad, s.numel * DTypeSize(s.grad_dtype), detail(s.grad_dtype),
                               who, "grad");
    }
  }
}

namespace {
std::string BytesText(uint64_t bytes) {
  char gib[32];
  std::snprintf(gib, sizeof gib, "%.2f", static_cast<double>(bytes) / (1ull << 30));
  return std::to_string(bytes) + " bytes (" + gib + " GiB)";
}
}  // namespace

void HybridOptimizer::Impl::CheckHostBudget(const MemoryReport& resolved) const {
  const uint64_t budget = cfg_.pinned_budget_bytes;
  if (budget == 0) return;
  const uint64_t need = resolved.host.total();
  if (need > budget)
    throw Error(ErrorKind::kOutOfMemory,
                std::string("the optimizer's ") + (gpu() ? "pinned" : "host") + " state needs " +
                    BytesText(need) + " but pinned_budget_bytes is " + BytesText(budget) +
                    "; raise the budget, offload less (offload_fraction), or use smaller "
                    "state formats");
}

void HybridOptimizer::Impl::BuildLayout() {
  const size_t n = specs_.size();
  layout::MemoryPlan lp = layout::PlanMemory(specs_, cfg_, placement_, gpu());
  hot_ = std::move(lp.hot);
  cold_ = std::move(lp.cold);
  const MemKind hot_kind = gpu() ? MemKind::kDevice : MemKind::kHost;
  const MemKind cold_kind = gpu() ? MemKind::kPinned : MemKind::kHost;
  FaultPlan* const faults = cfg_.faults.get();
  hot_slab_ = offload::Slab(hot_kind, hot_.bytes(), "hot optimizer state", faults);
  cold_slab_ = offload::Slab(cold_kind, cold_.bytes(), "offloaded optimizer state", faults);
  hot_.Bind(hot_slab_.data());
  cold_.Bind(cold_slab_.data());
  stream_ = std::move(lp.stream);
  stream_slab_ = offload::Slab(cold_kind, stream_.bytes(), "streamed optimizer state", faults);
  stream_.Bind(stream_slab_.data(), specs_, formats_);
  stream_pieces_.assign(n, {});
  for (size_t i = 0; i < stream_.pieces().size(); ++i)
    stream_pieces_[stream_.pieces()[i].tensor].push_back(i);
  stream_slots_ = offload::Slab(hot_kind, lp.stream_slot_bytes, "stream executor device slots",
                                faults);
  stream_backup_slab_ = offload::Slab(cold_kind, lp.spec_backup_bytes,
                                      "speculation backup of the streamed state", faults);
  stream_hold_slab_ = offload::Slab(hot_kind, lp.spec_hold_bytes,
                                    "speculation holding place of streamed parameters", faults);
  stream_backup_off_ = lp.spec_backup_off;
  stream_hold_off_ = lp.spec_hold_off;
  for (size_t t = 0; t < n; ++t)
    if (hot_.part(t).alias_param) hot_.AliasMaster(t, specs_[t].param, formats_[t].master);
  staging_slab_ = offload::Slab(cold_kind, lp.staging_bytes, "offload pipeline staging slots",
                                faults);
  report_ = lp.report;
  early_offset_ = lp.early_off;
  early_bytes_ = lp.early_bytes;
  hold_offset_ = lp.hold_off;
  const std::vector<uint64_t>& goff = lp.grad_slot_off;
  const std::vector<uint64_t>& poff = lp.param_slot_off;
  const uint64_t max_chunk = lp.grad_slot_bytes;

  if (max_chunk > 0) {
    std::vector<void*> gs, ps;
    for (uint64_t o : goff) gs.push_back(staging_slab_.data() + o);
    for (uint64_t o : poff) ps.push_back(staging_slab_.data() + o);
    if (gpu())
      transport_ = gpu_->MakeTransport();
    else
      transport_ = std::make_unique<offload::HostTransport>(cfg_.host_cpus, cfg_.faults);
    pipeline_ = std::make_unique<offload::Pipeline>(transport_.get(), gs, ps);
  }

  // The hot step: one fused launch (GPU) or one driver run (host) over all hot parts.
  std::vector<StepSpan> spans;
  std::vector<uint32_t> index;
  hot_tensor_.clear();
  for (size_t t = 0; t < n; ++t) {
    const layout::Part& p = hot_.part(t);
    if (p.count == 0) continue;
    StepSpan sp = p.state;
    sp.grad = specs_[t].grad;
    sp.grad_dtype = specs_[t].grad_dtype;
    sp.param_dtype = specs_[t].param_dtype;
    sp.param = p.alias_param ? nullptr : specs_[t].param;
    spans.push_back(sp);
    // Every span starts left out; each Step assigns its slots (Note [Scalar slots]).
    index.push_back(kSkipScalarIndex);
    hot_tensor_.push_back(t);
  }
  if (gpu()) {
    std::vector<offload::HostGrad> grads;
    for (const TensorSpec& s : specs_)
      grads.push_back({s.grad, s.numel, s.grad_dtype, layout::NormRun(s)});
    report_.device.metadata += gpu_->BuildPlans(cfg_.algorithm, spans, index, hot_tensor_, grads);
    report_.host.metadata += gpu::kNormResultBytes;  // the pre-pass result, pinned
  }
  BuildExecutors(std::move(spans));
}



void HybridOptimizer::Impl::BuildChunks() {
  chunks_.clear();
  chunk_part_off_.clear();
  chunk_begin_.assign(specs_.size(), 0);
  chunk_end_.assign(specs_.size(), 0);
  // Gradients arrive in backward order: the last registered tensor first.
  for (size_t t = specs_.size(); t-- > 0;) {
    const TensorSpec& s = specs_[t];
    const layout::Part& p = cold_.part(t);
    chunk_begin_[t] = chunk_end_[t] = chunks_.size();
    if (p.count == 0) continue;
    const size_t gsz = DTypeSize(s.grad_dtype), psz = DTypeSize(s.param_dtype);
    const MasterFormat master = formats_[t].master;
    const bool direct = layout::MasterAliases(master, s.param_dtype);
    for (uint64_t off = 0; off < p.count; off += cfg_.chunk_elements) {
      const uint64_t n = std::min<uint64_t>(cfg_.chunk_elements, p.count - off);
      const uint64_t e = p.offset + off;  // element index in the tensor
      offload::OffloadChunk c;
      c.tensor = t;
      c.device_grad = static_cast<const uint8_t*>(s.grad) + e * gsz;
      c.device_param = static_cast<uint8_t*>(s.param) + e * psz;
      c.grad_bytes = n * gsz;
      c.param_bytes = n * psz;
      c.span = SubSpan(p.state, off, n);
      c.span.grad_dtype = s.grad_dtype;
      c.span.param_dtype = s.param_dtype;
      if (direct)
        c.param_source = master == MasterFormat::kF32
                             ? static_cast<const void*>(c.span.master.f32)
                             : static_cast<const void*>(c.span.master.bf16);
      c.scalar_index = s.group;
      chunks_.push_back(c);
      chunk_part_off_.push_back(off);
    }
    chunk_end_[t] = chunks_.size();
  }
}

// The speculation's memory (PlanLayout reported it) and its worker.
void HybridOptimizer::Impl::BuildSpeculation() {
  AllocateEarlyBuffer();
  backup_ = cold_;  // the same arrays, carved from another slab
  FaultPlan* const faults = cfg_.faults.get();
  backup_slab_ = offload::Slab(MemKind::kHost, backup_.bytes(),
                               "speculation backup of the offloaded state", faults);
  backup_.Bind(backup_slab_.data());
  uint64_t hold_bytes = 0;
  for (size_t t = 0; t < specs_.size(); ++t)
    if (hold_offset_[t] != layout::kNoOffset)
      hold_bytes = std::max(hold_bytes, hold_offset_[t] + layout::Aligned(
                                            cold_.part(t).count * DTypeSize(specs_[t].param_dtype)));
  // Pinned in GPU mode: Step uploads the held parameters straight from it.
  hold_slab_ = offload::Slab(gpu() ? MemKind::kPinned : MemKind::kHost, hold_bytes,
                             "speculation parameter holding buffer", faults);
  std::vector<StepSpan> backup;
  std::vector<void*> hold;
  std::vector<const void*> early;
  for (size_t c = 0; c < chunks_.size(); ++c) {
    const size_t t = chunks_[c].tensor;
    const uint64_t off = chunk_part_off_[c];
    StepSpan b = SubSpan(backup_.part(t).state, off, chunks_[c].span.n);
    b.grad_dtype = specs_[t].grad_dtype;
    b.param_dtype = specs_[t].param_dtype;
    backup.push_back(b);
    hold.push_back(hold_offset_[t] == layout::kNoOffset
                       ? nullptr
                       : hold_slab_.data() + hold_offset_[t] + off * DTypeSize(specs_[t].param_dtype));
    early.push_back(EarlyGrad(c));
  }
  speculator_ = std::make_unique<offload::Speculator>(&chunks_, std::move(backup), std::move(hold),
                                                      std::move(early), transport_.get(),
                                                      cfg_.host_threads, cfg_.host_cpus);
}


// ---------------------------------------------------------------------------------------
// HybridOptimizer forwards to Impl.

HybridOptimizer::HybridOptimizer(std::vector<TensorSpec> tensors, OptimizerConfig config)
    : impl_(std::make_unique<Impl>(std::move(tensors), std::move(config))) {}
HybridOptimizer::~HybridOptimizer() = default;
StepResult HybridOptimizer::Step(std::span<const double> group_lrs, const StepOptions& o) {
  return impl_->Step(group_lrs, nullptr, o);
}
StepResult HybridOptimizer::Step(double lr, const StepOptions& o) {
  return impl_->Step({}, &lr, o);
}
void HybridOptimizer::ReloadParams(std::span<const size_t> t) { impl_->ReloadParams(t); }
int64_t HybridOptimizer::tensor_step_count(size_t i) const { return impl_->tensor_step_count(i); }
void HybridOptimizer::GradReady(size_t i, const void* grad) { impl_->GradReady(i, grad); }
void HybridOptimizer::WaitGradConsumed(size_t i, void* stream) const {
  impl_->WaitGradConsumed(i, stream);
}
void HybridOptimizer::BeginStep(std::span<const double> group_lrs, const StepOptions& o) {
  impl_->BeginStep(group_lrs, nullptr, o);
}
void HybridOptimizer::BeginStep(double lr, const StepOptions& o) {
  impl_->BeginStep({}, &lr, o);
}
bool HybridOptimizer::step_begun() const { return impl_->step_begun(); }
void HybridOptimizer::SetHyperParams(size_t g, const HyperParams& h) {
  impl_->SetHyperParams(g, h);
}
const HyperParams& HybridOptimizer::hyper_params(size_t g) const {
  return impl_->hyper_params(g);
}
size_t HybridOptimizer::group_count() const { return impl_->group_count(); }
void HybridOptimizer::WaitParam(size_t i, void* s) const { impl_->WaitParam(i, s); }
ExecutionMode HybridOptimizer::mode() const { return impl_->mode(); }
const Placement& HybridOptimizer::placement() const { return impl_->placement(); }
const ComputeSplit& HybridOptimizer::compute_split() const { return impl_->compute_split(); }
MemoryReport HybridOptimizer::memory() const { return impl_->memory(); }
StageTimes HybridOptimizer::last_step_times() const { return impl_->last_step_times(); }
int64_t HybridOptimizer::step_count() const { return impl_->step_count(); }
size_t HybridOptimizer::tensor_count() const { return impl_->tensor_count(); }
OptimizerSnapshot HybridOptimizer::Snapshot() const { return impl_->Snapshot(); }
void HybridOptimizer::Restore(const OptimizerSnapshot& s) { impl_->Restore(s); }

}  // namespace tandem
