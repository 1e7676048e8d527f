// HybridOptimizer::Impl: construction (validation, the one placement decision, the
// executors, the initial state), destruction, the memory report.
#include <tbb/task_arena.h>

#include <cstdio>
#include <optional>
#include <set>
#include <string>

#include "engine/grain.h"
#include "engine/layout/memory_plan.h"
#include "engine/layout/tensor_rules.h"
#include "engine/shape.h"
#include "offload/devices/stream_device.h"
#include "offload/executors/gpu_stream.h"
#include "offload/executors/host_offload.h"
#include "offload/executors/resident.h"
#include "offload/facade/impl.h"
#include "offload/memory/progress_log.h"
#include "offload/memory/state_init.h"
#include "tandem/error.h"

namespace tandem {

using offload::MemKind;

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
      driver_(CheckedHostThreads(cfg_.host_threads), kGrainElements, cfg_.host_cpus) {
  const auto start = std::chrono::steady_clock::now();  // the progress lines count from it
  if (mode_ == ExecutionMode::kAuto)
    mode_ = offload::GpuSide::Available() ? ExecutionMode::kGpu : ExecutionMode::kHost;
  if (gpu()) {
    // kUnsupported in a build without CUDA
    gpu_ = offload::GpuSide::Create(cfg_.cuda_stream, cfg_.device_allocator);
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
  BuildExecutors(*resolved.plan);
  driver_.Execute([&] { InitState(start); });  // on the optimizer's own (pinned) threads
  steps_.tensor.assign(specs_.size(), 0);
  grads_.ready.assign(specs_.size(), 0);
  for (const TensorSpec& s : specs_) grads_.current.push_back(s.grad);
  grads_.used = grads_.checked = grads_.current;
}

HybridOptimizer::Impl::~Impl() {
  // Early start's work first (it writes the pre-pass's partials and the executors'
  // gradient buffers); then, last launched first: the host-offload executor joins its
  // speculation worker and drains its device, the stream executor waits for its
  // queues, before anything they use goes. The device memory goes back to its allocator
  // only once nothing queued uses it (tandem/device_allocator.h): the device is waited
  // for first, as cudaFree would (the hot launch and the pre-pass ran on the caller's
  // stream, which may be gone by now).
  if (fences_) fences_->Synchronize();
  if (gpu_) {
    try {
      gpu_->SyncDevice("(destroying the optimizer)");
    } catch (...) {  // a sticky CUDA error: nothing runs any more
    }
  }
  for (offload::Queued* e : executors_.queued()) {
    try {
      e->Quiesce();
    } catch (...) {  // its failure was reported when it happened, or nothing runs any more
    }
  }
  executors_.Clear();
}

void HybridOptimizer::Impl::Validate() const {
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
  if (c.stream_slots < 2) fail("stream_slots must be >= 2, got " + std::to_string(c.stream_slots));

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
      gpu_->CheckDevicePointer(s.param, s.numel * DTypeSize(s.param_dtype), detail(s.param_dtype),
                               who, "param");
      gpu_->CheckDevicePointer(s.grad, s.numel * DTypeSize(s.grad_dtype), detail(s.grad_dtype), who,
                               "grad");
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

void HybridOptimizer::Impl::BuildExecutors(const layout::MemoryPlan& plan) {
  const bool streams = !plan.stream.chunks().empty();
  // State allocations in executor order: resident, streamed, host-computed.
  DeviceAllocator* const device_memory = gpu() ? gpu_->memory() : nullptr;
  offload::ResidentSetup resident{cfg_.algorithm,   &specs_,        &formats_,
                                  plan.hot,         cfg_.faults.get(), device_memory,
                                  plan.hot_grad_off, plan.hot_grad_bytes};
  executors_.Add(gpu() ? offload::MakeGpuResident(std::move(resident), cfg_.cuda_stream,
                                                  streams ? offload::kStreamSms : 0)
                       : offload::MakeHostResident(std::move(resident), &driver_));
  if (streams) {
    std::unique_ptr<offload::StreamDevice> device =
        gpu() ? offload::MakeCudaStreamDevice(cfg_.cuda_stream, device_memory)
              : offload::MakeHostStreamDevice(&driver_, cfg_.host_cpus);
    executors_.Add(offload::MakeGpuStream({cfg_.algorithm, &specs_, &formats_, &plan,
                                           cfg_.stream_slots, gpu(), cfg_.release_grads,
                                           cfg_.in_place_grad_bytes, cfg_.faults, device_memory},
                                          std::move(device)));
  }
  if (plan.grad_slot_bytes > 0) {  // host-computed elements: the offload pipeline
    std::unique_ptr<offload::StreamDevice> device =
        gpu() ? offload::MakeCudaStreamDevice(cfg_.cuda_stream, nullptr, offload::kCopyQueues,
                                              cfg_.faults)
              : offload::MakeHostStreamDevice(nullptr, cfg_.host_cpus, offload::kCopyQueues,
                                              cfg_.faults);
    executors_.Add(offload::MakeHostOffload(
        {&specs_, &formats_, &plan, &cfg_, gpu(), std::move(device), &driver_}));
  }
  prepass_ = gpu() ? offload::MakeCudaPrepass(cfg_.cuda_stream, specs_, device_memory)
                   : offload::MakeHostPrepass(&driver_, specs_);
  if (gpu()) fences_ = offload::MakeCudaGradFences(cfg_.cuda_stream, specs_.size());
}

// Note [Block-wise initialisation] (offload/memory/state_init.h): every executor's parts
// in blocks, in parallel on the driver's arena; no whole-tensor copy.
void HybridOptimizer::Impl::InitState(std::chrono::steady_clock::time_point start) {
  std::vector<offload::InitRegion> regions;
  for (const auto& e : executors_.all()) e->AddInitRegions(&regions);
  offload::InitIo io;
  if (gpu()) {
    io.copy = [this](void* dst, const void* src, size_t bytes) {
      gpu_->CopyConcurrent(dst, src, bytes, "(optimizer state initialisation)");
    };
    io.zero = [this](void* dst, size_t bytes) {
      gpu_->ZeroConcurrent(dst, bytes, "(optimizer state initialisation)");
    };
    io.params_on_device = true;
    io.staging_kind = MemKind::kPinned;
    gpu_->SyncStream("(optimizer state initialisation: waiting for the parameters)");
  }
  io.block_elements = kInitBlockElements;
  io.staging_slots = tbb::this_task_arena::max_concurrency();
  const std::shared_ptr<Logger> log = cfg_.info_log ? cfg_.info_log : StderrLogger();
  offload::ProgressLog progress("initialising optimizer state", offload::RegionElements(regions),
                                kInitQuietSeconds, kInitProgressSeconds, log.get(), start);
  offload::InitRegions(regions, io, &progress);
  progress.Finish();
}

MemoryReport HybridOptimizer::Impl::memory() const {
  MemoryReport r;
  for (const auto& e : executors_.all()) e->AddMemory(&r);
  prepass_->AddMemory(&r);
  r.host_budget = cfg_.pinned_budget_bytes;
  return r;
}

}  // namespace tandem
