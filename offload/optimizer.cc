// HybridOptimizer: placement, state allocation, the step's orchestration.
//
// Both modes run one code path. Each tensor is cut into a hot prefix, whose state lives
// next to the parameters ("device" memory) and is stepped there, and a cold suffix whose
// state lives in host memory and is stepped by the host kernels, its gradients and
// parameters travelling through the offload pipeline. In GPU mode "device" is the GPU
// (fused CUDA kernels, CUDA streams); in host mode it is ordinary host memory (host
// kernels, HostTransport), which is what lets CI test the whole hybrid path.
#include <cuda_runtime.h>
#include <tbb/parallel_for.h>

#include <chrono>
#include <cmath>
#include <cstring>
#include <limits>
#include <set>
#include <string>

#include "cpu_simd/host_kernels.h"
#include "cuda/gpu_step.h"
#include "engine/fp_bits.h"
#include "engine/master_codec.h"
#include "engine/q8_codec.h"
#include "offload/cuda_check.h"
#include "offload/cuda_transport.h"
#include "offload/host_norm.h"
#include "offload/host_transport.h"
#include "offload/memory.h"
#include "offload/pipeline.h"
#include "offload/state_layout.h"
#include "tandem/error.h"
#include "tandem/optimizer.h"

namespace tandem {

using offload::MemKind;
using Clock = std::chrono::steady_clock;

bool CudaDeviceAvailable() { return gpu::DeviceAvailable(); }

class HybridOptimizer::Impl {
 public:
  Impl(std::vector<TensorSpec> specs, OptimizerConfig cfg);
  ~Impl();

  StepResult Step(double lr, const StepOptions& opt);
  void GradReady(size_t i);
  void WaitParam(size_t i, void* stream) const;
  void SetHyperParams(size_t g, const HyperParams& h);
  const HyperParams& hyper_params(size_t g) const;
  size_t group_count() const { return cfg_.groups.size(); }
  ExecutionMode mode() const { return mode_; }
  const Placement& placement() const { return placement_; }
  MemoryReport memory() const { return report_; }
  StageTimes last_step_times();
  int64_t step_count() const { return step_; }
  size_t tensor_count() const { return specs_.size(); }
  OptimizerSnapshot Snapshot() const;
  void Restore(const OptimizerSnapshot& s);

 private:
  bool gpu() const { return mode_ == ExecutionMode::kGpu; }
  void Validate();
  void BuildLayout();
  void InitState();
  void BuildChunks();
  void CopyToDeviceSide(void* dst, const void* src, size_t bytes) const;
  void CopyFromDeviceSide(void* dst, const void* src, size_t bytes) const;
  std::vector<float> ReadParamAsF32(size_t t) const;
  void WriteParamsFromMasters(size_t t, const TensorSnapshot& ts);
  cudaStream_t stream() const { return static_cast<cudaStream_t>(cfg_.cuda_stream); }

  std::vector<TensorSpec> specs_;
  OptimizerConfig cfg_;
  ExecutionMode mode_;
  Placement placement_;
  int64_t step_ = 0;

  offload::StateLayout hot_, cold_;  // per-tensor state of the two parts
  offload::Slab hot_slab_, cold_slab_, staging_slab_, early_slab_;
  MemoryReport report_;

  cpu::HostDriver driver_;
  std::unique_ptr<offload::Transport> transport_;
  std::unique_ptr<offload::Pipeline> pipeline_;
  std::unique_ptr<gpu::StepPlan> hot_plan_;
  std::unique_ptr<gpu::GradNormPlan> norm_plan_;
  std::vector<offload::OffloadChunk> chunks_;
  std::vector<offload::Ticket> last_upload_;
  std::vector<offload::Ticket> early_ticket_;  // per tensor: early download (0: none)
  std::vector<uint64_t> early_offset_;         // per tensor: byte offset in early_slab_
  const void* early_grad_for(const offload::OffloadChunk& c) const;
  std::vector<StepScalars> scalars_;
  std::vector<cpu::HostWork> hot_work_;  // host mode: the hot parts
  std::vector<uint32_t> hot_index_;      // host mode: group of each hot part

  cudaEvent_t ev_[4] = {nullptr, nullptr, nullptr, nullptr};  // prepass/hot start+end
  StageTimes times_;
  bool times_pending_gpu_ = false;
};

// ---------------------------------------------------------------------------------------
// Construction

HybridOptimizer::Impl::Impl(std::vector<TensorSpec> specs, OptimizerConfig cfg)
    : specs_(std::move(specs)),
      cfg_(std::move(cfg)),
      mode_(cfg_.mode),
      driver_(cfg_.host_threads, size_t{1} << 16) {
  if (mode_ == ExecutionMode::kAuto)
    mode_ = gpu::DeviceAvailable() ? ExecutionMode::kGpu : ExecutionMode::kHost;
  if (mode_ == ExecutionMode::kGpu && !gpu::DeviceAvailable())
    throw Error(ErrorKind::kUnsupported, "GPU mode requested but no CUDA device is available");
  Validate();
  std::vector<uint64_t> numels;
  for (const TensorSpec& s : specs_) numels.push_back(s.numel);
  placement_ = ComputePlacement(numels, cfg_.offload_fraction, cfg_.placement);
  BuildLayout();
  InitState();
  BuildChunks();
  last_upload_.assign(specs_.size(), 0);
  early_ticket_.assign(specs_.size(), 0);
  scalars_.resize(cfg_.groups.size());
  if (gpu()) {
    for (cudaEvent_t& e : ev_) TANDEM_CUDA(cudaEventCreate(&e), "(optimizer timing events)");
  }
}

HybridOptimizer::Impl::~Impl() {
  if (transport_) transport_->Drain();
  for (cudaEvent_t e : ev_)
    if (e != nullptr) cudaEventDestroy(e);
}

void HybridOptimizer::Impl::Validate() {
  auto fail = [](const std::string& m) { throw Error(ErrorKind::kInvalidArgument, m); };
  const OptimizerConfig& c = cfg_;
  if (static_cast<unsigned>(c.algorithm) > static_cast<unsigned>(Algorithm::kSGD))
    fail("unknown algorithm value " + std::to_string(static_cast<unsigned>(c.algorithm)));
  if (c.groups.empty()) fail("OptimizerConfig::groups is empty");
  for (size_t g = 0; g < c.groups.size(); ++g) {
    ValidateHyperParams(c.algorithm, c.groups[g], "group " + std::to_string(g));
    if (!HasMomentum(c.algorithm, c.groups[g]) && c.formats.momentum != MomentFormat::kF32)
      fail("group " + std::to_string(g) + ": momentum format " + Name(c.formats.momentum) +
           " given, but sgd with momentum 0 keeps no momentum buffer");
  }
  if (static_cast<unsigned>(c.formats.master) > 3 || static_cast<unsigned>(c.formats.momentum) > 1 ||
      static_cast<unsigned>(c.formats.variance) > 1)
    fail("unknown state format value in " + Name(c.formats));
  if (!HasVariance(c.algorithm) && c.formats.variance != MomentFormat::kF32)
    fail(std::string("variance format ") + Name(c.formats.variance) + " given, but " +
         Name(c.algorithm) + " keeps no second moment");
  if (!(c.offload_fraction >= 0.0 && c.offload_fraction <= 1.0))
    fail("offload_fraction must be in [0, 1], got " + std::to_string(c.offload_fraction));
  if (c.chunk_elements < kQuantGroup || c.chunk_elements % kQuantGroup != 0)
    fail("chunk_elements must be a positive multiple of 32, got " +
         std::to_string(c.chunk_elements));
  if (c.pipeline_slots < 2)
    fail("pipeline_slots must be >= 2, got " + std::to_string(c.pipeline_slots));
  if (c.host_threads < 0) fail("host_threads must be >= 0, got " + std::to_string(c.host_threads));

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
    if (s.numel == 0) continue;
    if (s.param == nullptr) fail(who + ": param is null");
    if (s.grad == nullptr) fail(who + ": grad is null");
    if (gpu()) {
      for (const void* p : {static_cast<const void*>(s.param), s.grad}) {
        cudaPointerAttributes a{};
        const cudaError_t err = cudaPointerGetAttributes(&a, p);
        cudaGetLastError();
        if (err != cudaSuccess || (a.type != cudaMemoryTypeDevice &&
                                   a.type != cudaMemoryTypeManaged))
          fail(who + ": " + (p == s.param ? "param" : "grad") +
               " is not device memory (GPU mode needs device pointers)");
      }
    }
  }
}

namespace {
// Everything about the state's memory that follows from the tensors and the configuration
// alone: used to allocate (BuildLayout) and to predict (PredictMemory), so the two agree.
struct LayoutPlan {
  offload::StateLayout hot, cold;
  uint64_t grad_slot_bytes = 0, param_slot_bytes = 0;
  std::vector<uint64_t> grad_slot_off, param_slot_off;
  uint64_t staging_bytes = 0;
  MemoryReport report;
};

LayoutPlan PlanLayout(const std::vector<TensorSpec>& specs, const OptimizerConfig& cfg,
                      const Placement& placement, bool gpu) {
  LayoutPlan lp;
  const size_t n = specs.size();
  lp.hot.Reset(n);
  lp.cold.Reset(n);
  const StateFormats& f = cfg.formats;
  for (size_t t = 0; t < n; ++t) {
    const TensorSpec& s = specs[t];
    const HyperParams& h = cfg.groups[s.group];
    const uint64_t dc = placement.tensors[t].device_count;
    // Note [Master aliases the parameter] in offload/state_layout.h.
    lp.hot.Add(t, 0, dc, cfg.algorithm, h, f, offload::MasterAliases(f.master, s.param_dtype));
    lp.cold.Add(t, dc, s.numel - dc, cfg.algorithm, h, f, /*alias_param=*/false);
  }
  // Staging for the pipeline: K gradient slots and, where a chunk cannot upload its state
  // directly, K parameter slots.
  for (size_t t = 0; t < n; ++t) {
    const uint64_t cold = placement.tensors[t].host_count();
    if (cold == 0) continue;
    const uint64_t c = std::min<uint64_t>(cold, cfg.chunk_elements);
    lp.grad_slot_bytes = std::max<uint64_t>(lp.grad_slot_bytes, c * DTypeSize(specs[t].grad_dtype));
    if (!offload::MasterAliases(f.master, specs[t].param_dtype))
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
  MemoryReport::Bytes& dev = gpu ? lp.report.device : lp.report.host;
  lp.hot.Report(&dev);
  lp.cold.Report(&lp.report.host);
  lp.report.host.staging += lp.staging_bytes;
  return lp;
}
}  // namespace

void HybridOptimizer::Impl::BuildLayout() {
  const size_t n = specs_.size();
  LayoutPlan lp = PlanLayout(specs_, cfg_, placement_, gpu());
  hot_ = std::move(lp.hot);
  cold_ = std::move(lp.cold);
  const StateFormats& f = cfg_.formats;
  const MemKind hot_kind = gpu() ? MemKind::kDevice : MemKind::kHost;
  const MemKind cold_kind = gpu() ? MemKind::kPinned : MemKind::kHost;
  hot_slab_ = offload::Slab(hot_kind, hot_.bytes(), "hot optimizer state");
  cold_slab_ = offload::Slab(cold_kind, cold_.bytes(), "offloaded optimizer state");
  hot_.Bind(hot_slab_.data());
  cold_.Bind(cold_slab_.data());
  for (size_t t = 0; t < n; ++t)
    if (hot_.part(t).alias_param) hot_.AliasMaster(t, specs_[t].param, f.master);
  staging_slab_ = offload::Slab(cold_kind, lp.staging_bytes, "offload pipeline staging slots");
  report_ = lp.report;
  const std::vector<uint64_t>& goff = lp.grad_slot_off;
  const std::vector<uint64_t>& poff = lp.param_slot_off;
  const uint64_t max_chunk = lp.grad_slot_bytes;

  if (max_chunk > 0) {
    std::vector<void*> gs, ps;
    for (uint64_t o : goff) gs.push_back(staging_slab_.data() + o);
    for (uint64_t o : poff) ps.push_back(staging_slab_.data() + o);
    if (gpu())
      transport_ = std::make_unique<offload::CudaTransport>(stream());
    else
      transport_ = std::make_unique<offload::HostTransport>();
    pipeline_ = std::make_unique<offload::Pipeline>(transport_.get(), gs, ps);
  }

  // The hot step: one fused launch (GPU) or one driver run (host) over all hot parts.
  std::vector<StepSpan> spans;
  std::vector<uint32_t> index;
  for (size_t t = 0; t < n; ++t) {
    const offload::Part& p = hot_.part(t);
    if (p.count == 0) continue;
    StepSpan sp = p.state;
    sp.grad = specs_[t].grad;
    sp.grad_dtype = specs_[t].grad_dtype;
    sp.param_dtype = specs_[t].param_dtype;
    sp.param = p.alias_param ? nullptr : specs_[t].param;
    spans.push_back(sp);
    index.push_back(specs_[t].group);
  }
  if (gpu()) {
    if (!spans.empty()) {
      hot_plan_ = std::make_unique<gpu::StepPlan>(cfg_.algorithm, f, spans, index);
      report_.device.metadata += hot_plan_->device_bytes();
    }
    std::vector<gpu::GradRef> grads;
    for (const TensorSpec& s : specs_) grads.push_back({s.grad, s.numel, s.grad_dtype});
    norm_plan_ = std::make_unique<gpu::GradNormPlan>(grads);
    report_.device.metadata += norm_plan_->device_bytes();
    report_.host.metadata += norm_plan_->pinned_bytes();
  } else {
    for (const StepSpan& sp : spans) hot_work_.push_back({nullptr, sp});
    hot_index_ = index;
  }
}


void HybridOptimizer::Impl::CopyToDeviceSide(void* dst, const void* src, size_t bytes) const {
  if (bytes == 0) return;
  if (gpu())
    TANDEM_CUDA(cudaMemcpy(dst, src, bytes, cudaMemcpyDefault), "(state upload)");
  else
    std::memcpy(dst, src, bytes);
}

void HybridOptimizer::Impl::CopyFromDeviceSide(void* dst, const void* src, size_t bytes) const {
  if (bytes == 0) return;
  if (gpu())
    TANDEM_CUDA(cudaMemcpy(dst, src, bytes, cudaMemcpyDefault), "(state download)");
  else
    std::memcpy(dst, src, bytes);
}

namespace {
float LoadParam(const void* p, DType t, size_t i) {
  switch (t) {
    case DType::kF32: return static_cast<const float*>(p)[i];
    case DType::kBF16: return num::Bf16ToF32(static_cast<const uint16_t*>(p)[i]);
    case DType::kF16: return num::F16ToF32(static_cast<const uint16_t*>(p)[i]);
  }
  return 0;
}

// Fills a freshly created TensorSnapshot's arrays (whole tensor) from fp32 weights.
TensorSnapshot EncodeInitial(const TensorSpec& s, const std::vector<float>& w, Algorithm algo,
                             const HyperParams& h, const StateFormats& f) {
  TensorSnapshot ts;
  ts.name = s.name;
  ts.numel = s.numel;
  ts.param_dtype = s.param_dtype;
  ts.grad_dtype = s.grad_dtype;
  ts.group = s.group;
  const size_t n = s.numel, groups = GroupCount(n);
  // Encoding is per element: parallel over blocks (an 8B model has 0.5G-element tensors).
  auto each = [n](auto fn) {
    tbb::parallel_for(tbb::blocked_range<size_t>(0, n, size_t{1} << 16),
                      [&](const tbb::blocked_range<size_t>& r) {
                        for (size_t i = r.begin(); i < r.end(); ++i) fn(i);
                      });
  };
  switch (f.master) {
    case MasterFormat::kF32: ts.master_f32 = w; break;
    case MasterFormat::kBF16:
      ts.master_bf16.resize(n);
      each([&](size_t i) { ts.master_bf16[i] = num::F32ToBf16(w[i]); });
      break;
    case MasterFormat::kBF16Ecc8:
      ts.master_bf16.resize(n);
      ts.ecc8.resize(n);
      each([&](size_t i) { num::EncodeEcc8(w[i], &ts.master_bf16[i], &ts.ecc8[i]); });
      break;
    case MasterFormat::kBF16Ecc16:
      ts.master_bf16.resize(n);
      ts.ecc16.resize(n);
      each([&](size_t i) { num::EncodeEcc16(w[i], &ts.master_bf16[i], &ts.ecc16[i]); });
      break;
  }
  const uint16_t zero_scale = num::GroupScaleBits(0.0f);
  if (HasMomentum(algo, h)) {
    if (f.momentum == MomentFormat::kF32) {
      ts.m_f32.assign(n, 0.0f);
    } else {
      ts.m_codes.assign(n, 0);
      ts.m_scales.assign(groups, zero_scale);
    }
  }
  if (HasVariance(algo)) {
    if (f.variance == MomentFormat::kF32) {
      ts.v_f32.assign(n, 0.0f);
    } else {
      ts.v_codes.assign(n, 0);
      ts.v_scales.assign(groups, zero_scale);
    }
  }
  return ts;
}

// Copies between a whole-tensor snapshot and one part's arrays, in either direction.
template <typename CopyFn>
void ForEachArray(const offload::Part& p, TensorSnapshot& ts, CopyFn copy) {
  const uint64_t o = p.offset, n = p.count, g0 = o / kQuantGroup, gn = GroupCount(n);
  const StepSpan& s = p.state;
  auto arr = [&](auto* part_ptr, auto& vec, uint64_t first, uint64_t count) {
    if (part_ptr != nullptr && !vec.empty())
      copy(static_cast<void*>(part_ptr), static_cast<void*>(vec.data() + first),
           count * sizeof(vec[0]));
  };
  arr(s.master.f32, ts.master_f32, o, n);
  arr(s.master.bf16, ts.master_bf16, o, n);
  arr(s.master.ecc8, ts.ecc8, o, n);
  arr(s.master.ecc16, ts.ecc16, o, n);
  arr(s.m.f32, ts.m_f32, o, n);
  arr(s.m.codes, ts.m_codes, o, n);
  arr(s.m.scales, ts.m_scales, g0, gn);
  arr(s.v.f32, ts.v_f32, o, n);
  arr(s.v.codes, ts.v_codes, o, n);
  arr(s.v.scales, ts.v_scales, g0, gn);
}
}  // namespace

std::vector<float> HybridOptimizer::Impl::ReadParamAsF32(size_t t) const {
  const TensorSpec& s = specs_[t];
  std::vector<uint8_t> raw(s.numel * DTypeSize(s.param_dtype));
  CopyFromDeviceSide(raw.data(), s.param, raw.size());
  std::vector<float> w(s.numel);
  tbb::parallel_for(tbb::blocked_range<size_t>(0, s.numel, size_t{1} << 16),
                    [&](const tbb::blocked_range<size_t>& r) {
                      for (size_t i = r.begin(); i < r.end(); ++i)
                        w[i] = LoadParam(raw.data(), s.param_dtype, i);
                    });
  return w;
}

void HybridOptimizer::Impl::InitState() {
  for (size_t t = 0; t < specs_.size(); ++t) {
    const TensorSpec& s = specs_[t];
    if (s.numel == 0) continue;
    TensorSnapshot ts = EncodeInitial(s, ReadParamAsF32(t), cfg_.algorithm,
                                      cfg_.groups[s.group], cfg_.formats);
    ForEachArray(hot_.part(t), ts, [&](void* part, void* whole, size_t bytes) {
      // An aliased master is the parameter itself: already holds these bits.
      CopyToDeviceSide(part, whole, bytes);
    });
    ForEachArray(cold_.part(t), ts,
                 [&](void* part, void* whole, size_t bytes) { std::memcpy(part, whole, bytes); });
  }
}

void HybridOptimizer::Impl::BuildChunks() {
  chunks_.clear();
  // Gradients arrive in backward order: the last registered tensor first.
  for (size_t t = specs_.size(); t-- > 0;) {
    const TensorSpec& s = specs_[t];
    const offload::Part& p = cold_.part(t);
    if (p.count == 0) continue;
    const size_t gsz = DTypeSize(s.grad_dtype), psz = DTypeSize(s.param_dtype);
    const bool direct = offload::MasterAliases(cfg_.formats.master, s.param_dtype);
    for (uint64_t off = 0; off < p.count; off += cfg_.chunk_elements) {
      const uint64_t n = std::min<uint64_t>(cfg_.chunk_elements, p.count - off);
      const uint64_t e = p.offset + off;  // element index in the tensor
      offload::OffloadChunk c;
      c.tensor = t;
      c.device_grad = static_cast<const uint8_t*>(s.grad) + e * gsz;
      c.device_param = static_cast<uint8_t*>(s.param) + e * psz;
      c.grad_bytes = n * gsz;
      c.param_bytes = n * psz;
      c.span = offload::SubSpan(p.state, off, n);
      c.span.grad_dtype = s.grad_dtype;
      c.span.param_dtype = s.param_dtype;
      if (direct)
        c.param_source = cfg_.formats.master == MasterFormat::kF32
                             ? static_cast<const void*>(c.span.master.f32)
                             : static_cast<const void*>(c.span.master.bf16);
      c.scalar_index = s.group;
      chunks_.push_back(c);
    }
  }
}

// ---------------------------------------------------------------------------------------
// The step

StepResult HybridOptimizer::Impl::Step(double lr, const StepOptions& opt) {
  const auto t0 = Clock::now();
  if (!std::isfinite(opt.loss_scale) || opt.loss_scale <= 0)
    throw Error(ErrorKind::kInvalidArgument,
                "loss_scale must be finite and > 0, got " + std::to_string(opt.loss_scale));
  if (!std::isfinite(opt.max_grad_norm) || opt.max_grad_norm < 0)
    throw Error(ErrorKind::kInvalidArgument, "max_grad_norm must be finite and >= 0, got " +
                                                 std::to_string(opt.max_grad_norm));
  times_ = {};
  // 1. Pre-pass over every gradient, hot and offloaded, before any update.
  offload::NormResult norm;
  if (gpu()) {
    TANDEM_CUDA(cudaEventRecord(ev_[0], stream()), "(prepass start)");
    norm_plan_->Launch(cfg_.cuda_stream);
    TANDEM_CUDA(cudaEventRecord(ev_[1], stream()), "(prepass end)");
    TANDEM_CUDA(cudaEventSynchronize(ev_[1]), "(waiting for the gradient pre-pass)");
    const gpu::GradNormPlan::Result r = norm_plan_->Read();
    norm.sum_squares = r.sum_squares;
    norm.nonfinite = r.nonfinite;
  } else {
    const auto p0 = Clock::now();
    std::vector<offload::HostGrad> grads;
    for (const TensorSpec& s : specs_) grads.push_back({s.grad, s.numel, s.grad_dtype});
    norm = offload::HostGradNorm(grads);
    times_.prepass_ms = std::chrono::duration<double, std::milli>(Clock::now() - p0).count();
  }
  StepResult result;
  result.step = step_;
  result.grad_norm = std::sqrt(norm.sum_squares) / opt.loss_scale;
  if (norm.nonfinite || !std::isfinite(result.grad_norm)) {
    result.applied = false;
    if (!std::isfinite(result.grad_norm) || norm.nonfinite)
      result.grad_norm = std::numeric_limits<double>::infinity();
    early_ticket_.assign(specs_.size(), 0);
    times_.step_ms = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
    return result;
  }
  double clip = 1.0;
  if (opt.max_grad_norm > 0 && result.grad_norm > opt.max_grad_norm)
    clip = opt.max_grad_norm / (result.grad_norm + 1e-6);
  const double grad_mul = clip / opt.loss_scale;
  // 2. Per-group scalars, validated before anything is written.
  for (size_t g = 0; g < cfg_.groups.size(); ++g)
    scalars_[g] = ComputeStepScalars(cfg_.algorithm, cfg_.groups[g], lr, step_ + 1, grad_mul);

  // 3. Hot elements: one fused launch (GPU) or one driver run (host).
  if (gpu()) {
    TANDEM_CUDA(cudaEventRecord(ev_[2], stream()), "(hot step start)");
    if (hot_plan_) hot_plan_->Launch(scalars_.data(), scalars_.size(), cfg_.cuda_stream);
    TANDEM_CUDA(cudaEventRecord(ev_[3], stream()), "(hot step end)");
    times_pending_gpu_ = true;
  } else if (!hot_work_.empty()) {
    const auto h0 = Clock::now();
    for (size_t i = 0; i < hot_work_.size(); ++i) hot_work_[i].scalars = &scalars_[hot_index_[i]];
    driver_.Run(hot_work_.data(), hot_work_.size());
    times_.gpu_update_ms = std::chrono::duration<double, std::milli>(Clock::now() - h0).count();
  }

  // 4. Offloaded elements through the pipeline, overlapping the hot step.
  if (pipeline_) {
    for (offload::OffloadChunk& c : chunks_) {
      const offload::Ticket et = early_ticket_[c.tensor];
      c.host_grad = nullptr;
      if (et != 0) {
        transport_->Wait(et);
        c.host_grad = early_grad_for(c);
      }
    }
    offload::PipelineTimes pt;
    cpu::HostDriver& drv = driver_;
    pipeline_->Run(
        chunks_, scalars_.data(),
        [&drv](const StepScalars& s, const StepSpan& span) {
          const cpu::HostWork w{&s, span};
          drv.Run(&w, 1);
        },
        &last_upload_, &pt);
    times_.d2h_ms = pt.d2h_ms;
    times_.host_update_ms = pt.host_ms;
    times_.h2d_ms = pt.h2d_ms;
    times_.chunks = chunks_.size();
  }
  early_ticket_.assign(specs_.size(), 0);
  ++step_;
  result.applied = true;
  result.step = step_;
  times_.step_ms = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
  return result;
}

void HybridOptimizer::Impl::SetHyperParams(size_t g, const HyperParams& h) {
  if (g >= cfg_.groups.size())
    throw Error(ErrorKind::kInvalidArgument, "SetHyperParams: group " + std::to_string(g) +
                                                 " of " + std::to_string(cfg_.groups.size()));
  ValidateHyperParams(cfg_.algorithm, h, "group " + std::to_string(g));
  if (HasMomentum(cfg_.algorithm, h) != HasMomentum(cfg_.algorithm, cfg_.groups[g]))
    throw Error(ErrorKind::kInvalidArgument,
                "group " + std::to_string(g) +
                    ": momentum cannot be switched between zero and non-zero after "
                    "construction (it decides whether a momentum buffer exists)");
  cfg_.groups[g] = h;
}

const HyperParams& HybridOptimizer::Impl::hyper_params(size_t g) const {
  if (g >= cfg_.groups.size())
    throw Error(ErrorKind::kInvalidArgument, "hyper_params: group " + std::to_string(g) +
                                                 " of " + std::to_string(cfg_.groups.size()));
  return cfg_.groups[g];
}

// Early start: the tensor's offloaded gradients go down into a full-size buffer as soon as
// backward produced them; Step then finds them on the host.
void HybridOptimizer::Impl::GradReady(size_t i) {
  if (i >= specs_.size())
    throw Error(ErrorKind::kInvalidArgument, "GradReady: tensor index " + std::to_string(i) +
                                                 " of " + std::to_string(specs_.size()));
  const offload::Part& p = cold_.part(i);
  if (!pipeline_ || p.count == 0 || early_ticket_[i] != 0) return;
  if (early_offset_.empty()) {
    offload::SlabLayout l;
    early_offset_.assign(specs_.size(), 0);
    for (size_t t = 0; t < specs_.size(); ++t)
      early_offset_[t] = l.Add(cold_.part(t).count * DTypeSize(specs_[t].grad_dtype));
    early_slab_ = offload::Slab(gpu() ? MemKind::kPinned : MemKind::kHost, l.total(),
                                "early-start gradient buffer");
    report_.host.staging += l.total();
  }
  const size_t gsz = DTypeSize(specs_[i].grad_dtype);
  transport_->DownloadsAfterComputeStream();
  early_ticket_[i] = transport_->Download(
      early_slab_.data() + early_offset_[i],
      static_cast<const uint8_t*>(specs_[i].grad) + p.offset * gsz, p.count * gsz);
}

const void* HybridOptimizer::Impl::early_grad_for(const offload::OffloadChunk& c) const {
  const size_t gsz = DTypeSize(specs_[c.tensor].grad_dtype);
  const uint8_t* part_start =
      static_cast<const uint8_t*>(specs_[c.tensor].grad) + cold_.part(c.tensor).offset * gsz;
  return early_slab_.data() + early_offset_[c.tensor] +
         (static_cast<const uint8_t*>(c.device_grad) - part_start);
}

StageTimes HybridOptimizer::Impl::last_step_times() {
  if (gpu() && times_pending_gpu_) {
    float ms = 0;
    TANDEM_CUDA(cudaEventSynchronize(ev_[3]), "(reading step timings)");
    if (cudaEventElapsedTime(&ms, ev_[0], ev_[1]) == cudaSuccess) times_.prepass_ms = ms;
    if (cudaEventElapsedTime(&ms, ev_[2], ev_[3]) == cudaSuccess) times_.gpu_update_ms = ms;
    times_pending_gpu_ = false;
  }
  return times_;
}

void HybridOptimizer::Impl::WaitParam(size_t i, void* stream) const {
  if (i >= specs_.size())
    throw Error(ErrorKind::kInvalidArgument, "WaitParam: tensor index " + std::to_string(i) +
                                                 " of " + std::to_string(specs_.size()));
  if (!gpu()) return;
  if (placement_.tensors[i].device_count > 0 && step_ > 0)
    TANDEM_CUDA(cudaStreamWaitEvent(static_cast<cudaStream_t>(stream), ev_[3], 0),
                "(waiting for the hot step of tensor '" + specs_[i].name + "')");
  if (last_upload_[i] != 0) transport_->StreamWaitFor(last_upload_[i], stream);
}


// ---------------------------------------------------------------------------------------
// Snapshots

OptimizerSnapshot HybridOptimizer::Impl::Snapshot() const {
  if (transport_) transport_->Drain();
  if (gpu()) TANDEM_CUDA(cudaStreamSynchronize(stream()), "(snapshot: waiting for the step)");
  OptimizerSnapshot snap;
  snap.algo = cfg_.algorithm;
  snap.formats = cfg_.formats;
  snap.groups = cfg_.groups;
  snap.step = step_;
  for (size_t t = 0; t < specs_.size(); ++t) {
    const TensorSpec& s = specs_[t];
    // Sized like a fresh state, then overwritten part by part.
    TensorSnapshot ts = EncodeInitial(s, std::vector<float>(s.numel, 0.0f), cfg_.algorithm,
                                      cfg_.groups[s.group], cfg_.formats);
    offload::Part hot = hot_.part(t);
    if (hot.alias_param) {  // the master (or its bf16 part) is the parameter
      if (cfg_.formats.master == MasterFormat::kF32)
        hot.state.master.f32 = static_cast<float*>(s.param);
      else
        hot.state.master.bf16 = static_cast<uint16_t*>(s.param);
    }
    ForEachArray(hot, ts, [&](void* part, void* whole, size_t bytes) {
      CopyFromDeviceSide(whole, part, bytes);
    });
    ForEachArray(cold_.part(t), ts,
                 [&](void* part, void* whole, size_t bytes) { std::memcpy(whole, part, bytes); });
    snap.tensors.push_back(std::move(ts));
  }
  return snap;
}

void HybridOptimizer::Impl::WriteParamsFromMasters(size_t t, const TensorSnapshot& ts) {
  const TensorSpec& s = specs_[t];
  const size_t n = s.numel;
  std::vector<uint8_t> raw(n * DTypeSize(s.param_dtype));
  for (size_t i = 0; i < n; ++i) {
    const bool bf = cfg_.formats.master != MasterFormat::kF32;
    if (bf && s.param_dtype == DType::kBF16) {
      reinterpret_cast<uint16_t*>(raw.data())[i] = ts.master_bf16[i];
      continue;
    }
    float w = 0;
    switch (cfg_.formats.master) {
      case MasterFormat::kF32: w = ts.master_f32[i]; break;
      case MasterFormat::kBF16: w = num::Bf16ToF32(ts.master_bf16[i]); break;
      case MasterFormat::kBF16Ecc8: w = num::DecodeEcc8(ts.master_bf16[i], ts.ecc8[i]); break;
      case MasterFormat::kBF16Ecc16: w = num::DecodeEcc16(ts.master_bf16[i], ts.ecc16[i]); break;
    }
    switch (s.param_dtype) {
      case DType::kF32: reinterpret_cast<float*>(raw.data())[i] = w; break;
      case DType::kBF16: reinterpret_cast<uint16_t*>(raw.data())[i] = num::F32ToBf16(w); break;
      case DType::kF16: reinterpret_cast<uint16_t*>(raw.data())[i] = num::F32ToF16(w); break;
    }
  }
  CopyToDeviceSide(s.param, raw.data(), raw.size());
}

void HybridOptimizer::Impl::Restore(const OptimizerSnapshot& snap) {
  ValidateSnapshot(snap);
  auto fail = [](const std::string& m) { throw Error(ErrorKind::kInvalidArgument, "restore: " + m); };
  if (snap.algo != cfg_.algorithm)
    fail(std::string("snapshot algorithm ") + Name(snap.algo) + " but optimizer uses " +
         Name(cfg_.algorithm));
  if (!(snap.formats == cfg_.formats))
    fail("snapshot formats " + Name(snap.formats) + " but optimizer uses " + Name(cfg_.formats));
  if (snap.groups.size() != cfg_.groups.size())
    fail("snapshot has " + std::to_string(snap.groups.size()) + " groups, optimizer " +
         std::to_string(cfg_.groups.size()));
  if (snap.tensors.size() != specs_.size())
    fail("snapshot has " + std::to_string(snap.tensors.size()) + " tensors, optimizer " +
         std::to_string(specs_.size()));
  for (size_t t = 0; t < specs_.size(); ++t) {
    const TensorSnapshot& ts = snap.tensors[t];
    const TensorSpec& s = specs_[t];
    const std::string who = "tensor " + std::to_string(t) + " '" + s.name + "'";
    if (ts.name != s.name) fail(who + ": snapshot has '" + ts.name + "' in its place");
    if (ts.numel != s.numel)
      fail(who + ": snapshot has " + std::to_string(ts.numel) + " elements, optimizer " +
           std::to_string(s.numel));
    if (ts.group != s.group)
      fail(who + ": snapshot group " + std::to_string(ts.group) + ", optimizer " +
           std::to_string(s.group));
    if (ts.param_dtype != s.param_dtype)
      fail(who + ": snapshot param dtype " + Name(ts.param_dtype) + ", optimizer " +
           Name(s.param_dtype));
    // SGD groups may differ in whether they keep momentum: the arrays must match ours.
    if (HasMomentum(snap.algo, snap.groups[ts.group]) !=
        HasMomentum(cfg_.algorithm, cfg_.groups[s.group]))
      fail(who + ": snapshot and optimizer disagree on keeping a momentum buffer");
  }
  // Everything checked: nothing above changed any state.
  if (transport_) transport_->Drain();
  if (gpu()) TANDEM_CUDA(cudaStreamSynchronize(stream()), "(restore: waiting for the step)");
  cfg_.groups = snap.groups;
  for (size_t t = 0; t < specs_.size(); ++t) {
    TensorSnapshot ts = snap.tensors[t];
    ForEachArray(hot_.part(t), ts, [&](void* part, void* whole, size_t bytes) {
      CopyToDeviceSide(part, whole, bytes);
    });
    ForEachArray(cold_.part(t), ts,
                 [&](void* part, void* whole, size_t bytes) { std::memcpy(part, whole, bytes); });
    if (ts.numel > 0) WriteParamsFromMasters(t, ts);
  }
  step_ = snap.step;
  early_ticket_.assign(specs_.size(), 0);
}

MemoryReport PredictMemory(const std::vector<TensorSpec>& tensors, const OptimizerConfig& config,
                           ExecutionMode mode) {
  std::vector<uint64_t> numels;
  for (const TensorSpec& s : tensors) numels.push_back(s.numel);
  for (const TensorSpec& s : tensors)
    if (s.group >= config.groups.size())
      throw Error(ErrorKind::kInvalidArgument, "tensor '" + s.name + "': group " +
                                                   std::to_string(s.group) + " out of range");
  const Placement p = ComputePlacement(numels, config.offload_fraction, config.placement);
  const bool gpu = mode == ExecutionMode::kGpu;
  MemoryReport r = PlanLayout(tensors, config, p, gpu).report;
  if (gpu) {
    std::vector<uint64_t> hot;
    for (size_t t = 0; t < tensors.size(); ++t)
      if (p.tensors[t].device_count > 0) hot.push_back(p.tensors[t].device_count);
    if (!hot.empty()) r.device.metadata += gpu::StepPlan::PredictDeviceBytes(hot);
    r.device.metadata += gpu::GradNormPlan::PredictDeviceBytes(numels);
    r.host.metadata += sizeof(double);  // the pre-pass result, pinned
  }
  return r;
}

// ---------------------------------------------------------------------------------------
// HybridOptimizer forwards to Impl.

HybridOptimizer::HybridOptimizer(std::vector<TensorSpec> tensors, OptimizerConfig config)
    : impl_(std::make_unique<Impl>(std::move(tensors), std::move(config))) {}
HybridOptimizer::~HybridOptimizer() = default;
StepResult HybridOptimizer::Step(double lr, const StepOptions& o) { return impl_->Step(lr, o); }
void HybridOptimizer::GradReady(size_t i) { impl_->GradReady(i); }
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
MemoryReport HybridOptimizer::memory() const { return impl_->memory(); }
StageTimes HybridOptimizer::last_step_times() const { return impl_->last_step_times(); }
int64_t HybridOptimizer::step_count() const { return impl_->step_count(); }
size_t HybridOptimizer::tensor_count() const { return impl_->tensor_count(); }
OptimizerSnapshot HybridOptimizer::Snapshot() const { return impl_->Snapshot(); }
void HybridOptimizer::Restore(const OptimizerSnapshot& s) { impl_->Restore(s); }

}  // namespace tandem
