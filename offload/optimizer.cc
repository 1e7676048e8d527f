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
#include "cuda/plan_sizes.h"
#include "offload/grad_stats.h"
#include "offload/host_transport.h"
#include "offload/optimizer_impl.h"
#include "offload/tensor_formats.h"
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
  formats_ = offload::TensorFormats(specs_, cfg_);
  std::vector<uint64_t> numels;
  for (const TensorSpec& s : specs_) numels.push_back(s.numel);
  placement_ = ComputePlacement(numels, cfg_.offload_fraction, cfg_.placement);
  const double share = ChooseComputeShare();
  if (share > 0)
    placement_ = ComputePlacement(numels, cfg_.offload_fraction, cfg_.placement, share);
  CheckHostBudget();  // before any state is allocated
  BuildLayout();
  driver_.Execute([this] { InitState(); });  // on the optimizer's own (pinned) threads
  BuildChunks();
  last_upload_.assign(specs_.size(), 0);
  chunk_ticket_.assign(chunks_.size(), 0);
  grad_ready_.assign(specs_.size(), 0);
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
  offload::CheckFormats(c.algorithm, c.groups, c.formats, "OptimizerConfig::formats");
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
      offload::CheckFormats(c.algorithm, std::span(&c.groups[s.group], 1), *s.formats,
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

void HybridOptimizer::Impl::CheckHostBudget() const {
  const uint64_t budget = cfg_.pinned_budget_bytes;
  if (budget == 0) return;
  const uint64_t need = PredictMemory(specs_, cfg_, mode_).host.total();
  if (need > budget)
    throw Error(ErrorKind::kOutOfMemory,
                std::string("the optimizer's ") + (gpu() ? "pinned" : "host") + " state needs " +
                    BytesText(need) + " but pinned_budget_bytes is " + BytesText(budget) +
                    "; raise the budget, offload less (offload_fraction), or use smaller "
                    "state formats");
}

namespace {
// Everything about the state's memory that follows from the tensors and the configuration
// alone: used to allocate (BuildLayout) and to predict (PredictMemory), so the two agree.
struct LayoutPlan {
  offload::StateLayout hot, cold;
  offload::StreamLayout stream;  // host-resident, computed on the GPU
  uint64_t stream_slot_bytes = 0;  // all slots
  uint64_t grad_slot_bytes = 0, param_slot_bytes = 0;
  std::vector<uint64_t> grad_slot_off, param_slot_off;
  uint64_t staging_bytes = 0;
  // Early start: per tensor, the offset of its offloaded gradients in the early-start
  // buffer and (speculation) of its held parameters (kNoHold: uploads from the state).
  std::vector<uint64_t> early_off, hold_off;
  uint64_t early_bytes = 0, hold_bytes = 0;
  // Speculating streamed chunks (Note [Speculating streamed chunks]): per stream chunk,
  // the offsets of its backup and of its parameters' holding place (kNoHold: the chunk
  // streams at Step only).
  std::vector<uint64_t> spec_backup_off, spec_hold_off;
  uint64_t spec_backup_bytes = 0, spec_hold_bytes = 0;
  MemoryReport report;
};

LayoutPlan PlanLayout(const std::vector<TensorSpec>& specs, const OptimizerConfig& cfg,
                      const Placement& placement, bool gpu) {
  LayoutPlan lp;
  const size_t n = specs.size();
  lp.hot.Reset(n);
  lp.cold.Reset(n);
  for (size_t t = 0; t < n; ++t) {
    const TensorSpec& s = specs[t];
    const HyperParams& h = cfg.groups[s.group];
    const StateFormats& f = offload::EffectiveFormats(s, cfg);
    const uint64_t dc = placement.tensors[t].device_count;
    // Note [Master aliases the parameter] in offload/state_layout.h.
    const uint64_t sc = placement.tensors[t].stream_count;
    lp.hot.Add(t, 0, dc, cfg.algorithm, h, f, offload::MasterAliases(f.master, s.param_dtype));
    lp.cold.Add(t, dc + sc, s.numel - dc - sc, cfg.algorithm, h, f, /*alias_param=*/false);
  }
  std::vector<StateFormats> formats;
  for (const TensorSpec& s : specs) formats.push_back(offload::EffectiveFormats(s, cfg));
  lp.stream.Build(specs, formats, cfg, placement);
  if (!lp.stream.chunks().empty())
    lp.stream_slot_bytes = cfg.stream_slots * offload::Aligned(lp.stream.slot_bytes());
  // Staging for the pipeline: K gradient slots and, where a chunk cannot upload its state
  // directly, K parameter slots.
  for (size_t t = 0; t < n; ++t) {
    const uint64_t cold = placement.tensors[t].host_compute_count();
    if (cold == 0) continue;
    const uint64_t c = std::min<uint64_t>(cold, cfg.chunk_elements);
    lp.grad_slot_bytes = std::max<uint64_t>(lp.grad_slot_bytes, c * DTypeSize(specs[t].grad_dtype));
    if (!offload::MasterAliases(offload::EffectiveFormats(specs[t], cfg).master,
                                specs[t].param_dtype))
      lp.param_slot_bytes =
          std::max<uint64_t>(lp.param_slot_bytes, c * DTypeSize(specs[t].param_dtype));
  }
  offload::SlabLayout staging;
  if (lp.grad_slot_bytes > 0) {
    for (int i = 0; i < cfg.pipeline_slots; ++i) lp.grad_slot_off.push_back(staging.Add(lp.grad_slot_bytes));
    if (lp.param_slot_bytes > 0)
      for (int i = 0; i < cfg.pipeline_slots; ++i)
        lp.param_slot_off.push_back(staging.Add(lp.param_slot_bytes));
  }
  lp.staging_bytes = staging.total();
  // Early start: one landing place per offloaded gradient element; with speculation, a
  // holding place per offloaded parameter that cannot go up from its own master.
  offload::SlabLayout early, hold;
  lp.early_off.assign(n, 0);
  lp.hold_off.assign(n, kNoHold);
  for (size_t t = 0; t < n; ++t) {
    const uint64_t cold = placement.tensors[t].host_compute_count();
    lp.early_off[t] = early.Add(cold * DTypeSize(specs[t].grad_dtype));
    if (cold > 0 && !offload::MasterAliases(offload::EffectiveFormats(specs[t], cfg).master,
                                            specs[t].param_dtype))
      lp.hold_off[t] = hold.Add(cold * DTypeSize(specs[t].param_dtype));
  }
  lp.early_bytes = early.total();
  lp.hold_bytes = hold.total();
  const std::vector<offload::StreamChunk>& sch = lp.stream.chunks();
  lp.spec_backup_off.assign(sch.size(), kNoHold);
  lp.spec_hold_off.assign(sch.size(), kNoHold);
  if (cfg.speculative_early_start) {
    // The last chunks, whose gradients backward produces first, within the budget.
    offload::SlabLayout backup, held;
    uint64_t taken = 0;
    for (size_t c = sch.size(); c-- > 0;) {
      if (taken + sch[c].bytes > cfg.speculative_stream_bytes) break;
      taken += sch[c].bytes;
      lp.spec_backup_off[c] = backup.Add(sch[c].bytes);
      lp.spec_hold_off[c] = held.Add(lp.stream.hold_bytes(c, specs));
    }
    lp.spec_backup_bytes = backup.total();
    lp.spec_hold_bytes = held.total();
  }
  MemoryReport::Bytes& dev = gpu ? lp.report.device : lp.report.host;
  lp.hot.Report(&dev);
  lp.cold.Report(&lp.report.host);
  lp.stream.Report(&lp.report.host);
  lp.report.host.staging += lp.staging_bytes;
  dev.staging += lp.stream_slot_bytes;  // the device slots chunks stream through
  lp.report.classes = {lp.hot.bytes(), lp.stream.bytes(), lp.stream_slot_bytes, lp.cold.bytes()};
  if (cfg.speculative_early_start) {
    // Allocated at construction (BeginStep never allocates): the early-start gradient
    // buffer (staging, as when GradReady allocates it on first use) and the backup of
    // the offloaded state (the cold layout again) plus the parameter holding buffer.
    lp.report.host.staging += lp.early_bytes;
    lp.report.host.speculation += lp.cold.bytes() + lp.hold_bytes + lp.spec_backup_bytes;
    dev.speculation += lp.spec_hold_bytes;
  }
  return lp;
}
}  // namespace

void HybridOptimizer::Impl::BuildLayout() {
  const size_t n = specs_.size();
  LayoutPlan lp = PlanLayout(specs_, cfg_, placement_, gpu());
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
  report_.host_budget = cfg_.pinned_budget_bytes;
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
    const offload::Part& p = hot_.part(t);
    if (p.count == 0) continue;
    StepSpan sp = p.state;
    sp.grad = specs_[t].grad;
    sp.grad_dtype = specs_[t].grad_dtype;
    sp.param_dtype = specs_[t].param_dtype;
    sp.param = p.alias_param ? nullptr : specs_[t].param;
    spans.push_back(sp);
    // Every span starts left out; each Step assigns its slots (Note [Scalar slots]).
    index.push_back(offload::GpuSide::kSkip);
    hot_tensor_.push_back(t);
  }
  if (gpu()) {
    std::vector<offload::HostGrad> grads;
    for (const TensorSpec& s : specs_)
      grads.push_back({s.grad, s.numel, s.grad_dtype, offload::NormRun(s)});
    report_.device.metadata += gpu_->BuildPlans(cfg_.algorithm, spans, index, grads);
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
    const offload::Part& p = cold_.part(t);
    chunk_begin_[t] = chunk_end_[t] = chunks_.size();
    if (p.count == 0) continue;
    const size_t gsz = DTypeSize(s.grad_dtype), psz = DTypeSize(s.param_dtype);
    const MasterFormat master = formats_[t].master;
    const bool direct = offload::MasterAliases(master, s.param_dtype);
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
    if (hold_offset_[t] != kNoHold)
      hold_bytes = std::max(hold_bytes, hold_offset_[t] + offload::Aligned(
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
    hold.push_back(hold_offset_[t] == kNoHold
                       ? nullptr
                       : hold_slab_.data() + hold_offset_[t] + off * DTypeSize(specs_[t].param_dtype));
    early.push_back(EarlyGrad(c));
  }
  speculator_ = std::make_unique<offload::Speculator>(&chunks_, std::move(backup), std::move(hold),
                                                      std::move(early), transport_.get(),
                                                      cfg_.host_threads, cfg_.host_cpus);
}


MemoryReport PredictMemory(const std::vector<TensorSpec>& tensors, const OptimizerConfig& config,
                           ExecutionMode mode) {
  std::vector<uint64_t> numels;
  for (const TensorSpec& s : tensors) numels.push_back(s.numel);
  for (const TensorSpec& s : tensors)
    if (s.group >= config.groups.size())
      throw Error(ErrorKind::kInvalidArgument, "tensor '" + s.name + "': group " +
                                                   std::to_string(s.group) + " out of range");
  const bool gpu = mode == ExecutionMode::kGpu;
  // Note [Predicting a streamed placement]: the share is the configured one, or auto's
  // choice for config.machine_rates; auto without rates is predicted as share 0 (the
  // optimizer measures its rates at construction, which no prediction can).
  double share = config.offload_compute == kOffloadComputeAuto ? 0.0 : config.offload_compute;
  Placement p = ComputePlacement(numels, config.offload_fraction, config.placement);
  if (config.offload_compute == kOffloadComputeAuto && gpu && config.machine_rates) {
    std::vector<StateFormats> formats;
    for (const TensorSpec& s : tensors) formats.push_back(offload::EffectiveFormats(s, config));
    share = ChooseSplit(offload::SplitInput(tensors, formats, config, p), *config.machine_rates)
                .share;
  }
  if (!gpu && config.offload_compute == kOffloadComputeAuto) share = 0.0;
  if (share > 0) p = ComputePlacement(numels, config.offload_fraction, config.placement, share);
  const LayoutPlan lp = PlanLayout(tensors, config, p, gpu);
  MemoryReport r = lp.report;
  r.host_budget = config.pinned_budget_bytes;
  if (gpu) {
    std::vector<uint64_t> hot;
    std::vector<StateFormats> hot_formats;
    for (size_t t = 0; t < tensors.size(); ++t)
      if (p.tensors[t].device_count > 0) {
        hot.push_back(p.tensors[t].device_count);
        hot_formats.push_back(offload::EffectiveFormats(tensors[t], config));
      }
    std::vector<offload::HostGrad> grads;
    for (const TensorSpec& s : tensors)
      grads.push_back({nullptr, s.numel, s.grad_dtype, offload::NormRun(s)});
    r.device.metadata += offload::GpuSide::PredictMetadataBytes(hot, hot_formats, grads);
    std::vector<std::vector<uint64_t>> chunk_numels;
    std::vector<std::vector<StateFormats>> chunk_formats;
    for (size_t k = 0; k < lp.stream.chunks().size(); ++k) {
      const offload::StreamChunk& c = lp.stream.chunks()[k];
      // A speculative chunk has a second set of plans, over its hold spans.
      for (int copy = 0; copy < (lp.spec_hold_off[k] != kNoHold ? 2 : 1); ++copy) {
        chunk_numels.emplace_back();
        chunk_formats.emplace_back();
        for (uint32_t i = c.first; i < c.end; ++i) {
          const offload::StreamPiece& piece = lp.stream.pieces()[i];
          chunk_numels.back().push_back(piece.count);
          chunk_formats.back().push_back(offload::EffectiveFormats(tensors[piece.tensor], config));
        }
      }
    }
    r.device.metadata += offload::GpuSide::PredictStreamMetadataBytes(chunk_numels, chunk_formats);
    r.host.metadata += gpu::kNormResultBytes;  // the pre-pass result, pinned
  }
  return r;
}

// ---------------------------------------------------------------------------------------
// HybridOptimizer forwards to Impl.

HybridOptimizer::HybridOptimizer(std::vector<TensorSpec> tensors, OptimizerConfig config)
    : impl_(std::make_unique<Impl>(std::move(tensors), std::move(config))) {}
HybridOptimizer::~HybridOptimizer() = default;
StepResult HybridOptimizer::Step(double lr, const StepOptions& o) { return impl_->Step(lr, o); }
void HybridOptimizer::ReloadParams(std::span<const size_t> t) { impl_->ReloadParams(t); }
int64_t HybridOptimizer::tensor_step_count(size_t i) const { return impl_->tensor_step_count(i); }
void HybridOptimizer::GradReady(size_t i) { impl_->GradReady(i); }
void HybridOptimizer::BeginStep(double lr, const StepOptions& o) { impl_->BeginStep(lr, o); }
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
