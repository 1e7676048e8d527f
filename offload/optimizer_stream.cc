// HybridOptimizer: where host-resident elements are computed (offload_compute) and the
// GPU-stream executor's set-up (Note [Three placement classes] in tandem/compute_split.h;
// Note [Chunk-major streaming] in offload/stream_layout.h).
#include <algorithm>
#include <chrono>
#include <cstring>
#include <fstream>
#include <set>
#include <string>
#include <vector>

#include <tbb/parallel_for.h>

#include "engine/tensor_state.h"
#include "offload/executors.h"
#include "offload/optimizer_impl.h"
#include "tandem/error.h"

namespace tandem {

using Clock = std::chrono::steady_clock;

namespace {

// Bytes of the host's last-level caches together (every distinct L3 instance, from
// sysfs), 0 when unknown.
uint64_t LastLevelCacheBytes() {
  std::set<std::string> seen;
  uint64_t total = 0;
  for (int cpu = 0;; ++cpu) {
    const std::string dir =
        "/sys/devices/system/cpu/cpu" + std::to_string(cpu) + "/cache/index3/";
    std::ifstream size(dir + "size"), shared(dir + "shared_cpu_list");
    if (!size || !shared) {
      if (cpu == 0 || !std::ifstream("/sys/devices/system/cpu/cpu" + std::to_string(cpu)))
        return total;
      continue;  // a CPU without an L3 entry
    }
    std::string text, list;
    size >> text;
    shared >> list;
    if (!seen.insert(list).second) continue;
    uint64_t kib = 0;
    for (char c : text)
      if (c >= '0' && c <= '9') kib = kib * 10 + static_cast<uint64_t>(c - '0');
    total += text.find('M') != std::string::npos ? kib << 20 : kib << 10;
  }
}

}  // namespace

// The host kernel's rate on this optimizer's threads for the rate key's formats and
// parameter dtype (those of the largest host-resident tensor, with its group's
// hyper-parameters), bf16 gradients, stepped chunk by chunk as the pipeline steps them,
// best of four runs, as the model takes it: under the pipeline's own DMA traffic
// (HostRateUnderDma). Its state, gradient and parameter take at least four times the
// host's last-level caches and 512 MiB (Note [The node is one machine] in
// tandem/compute_split.h): a probe that fits in cache measures the cache, not the DRAM
// the step streams through (with 8M elements, 128 MiB of fp32 AdamW state, auto predicted
// 330 ms for a step of Llama-3-8B at fraction 0.5 on a 64-core host, which took 918 ms:
// docs/planner.md "Auto's own rates").
double HybridOptimizer::Impl::ProbeHostRate(const RateCache::Key& key) {
  std::vector<uint64_t> numels;
  for (const TensorSpec& t : specs_) numels.push_back(t.numel);
  const TensorSpec& s =
      specs_[LargestHostTensor(ComputePlacement(numels, cfg_.offload_fraction, cfg_.placement))];
  // key.kernel_bytes = gradient + separate parameter + 2 x state: the footprint is about
  // half of it plus the gradient and parameter again.
  const double footprint =
      0.5 * (key.kernel_bytes + 2.0 + static_cast<double>(DTypeSize(key.param_dtype)));
  const uint64_t want = std::max<uint64_t>(uint64_t{512} << 20, 4 * LastLevelCacheBytes());
  const size_t n = std::max<size_t>(
      size_t{1} << 23, static_cast<size_t>(static_cast<double>(want) / std::max(footprint, 1.0)));
  std::vector<float> init(n, 0.5f);
  const HyperParams& h = cfg_.groups[s.group];
  TensorState state(cfg_.algorithm, h, key.formats, init.data(), n);
  std::vector<uint16_t> grad(n, 0x3c00);  // bf16 0.0078125
  std::vector<uint8_t> param(n * DTypeSize(key.param_dtype));
  const bool alias = layout::MasterAliases(key.formats.master, key.param_dtype);
  const StepScalars sc = GroupStepScalars(cfg_.algorithm, h, 1e-4, 1, 1.0);
  const size_t chunk = std::min<size_t>(n, cfg_.chunk_elements);
  double best = 0;
  for (int rep = 0; rep < 5; ++rep) {
    const auto t0 = Clock::now();
    for (size_t off = 0; off < n; off += chunk) {
      const size_t len = std::min(chunk, n - off);
      const cpu::HostWork w{&sc, state.Span(off, len, grad.data() + off, DType::kBF16,
                                            alias ? nullptr
                                                  : param.data() + off * DTypeSize(key.param_dtype),
                                            key.param_dtype)};
      driver_.Run(&w, 1);
    }
    const double sec = std::chrono::duration<double>(Clock::now() - t0).count();
    if (rep > 0) best = std::max(best, static_cast<double>(n) / sec / 1e9);
  }
  return HostRateUnderDma(best, key.kernel_bytes, 2.0,
                          static_cast<double>(DTypeSize(key.param_dtype)));
}

MachineRates HybridOptimizer::Impl::MeasureRates(const RateCache::Key& key) {
  MachineRates probed;
  gpu_->ProbeRates(uint64_t{64} << 20, key.kernel_bytes, &probed);
  probed.host_gparams = ProbeHostRate(key);
  return probed;
}

std::optional<MachineRates> HybridOptimizer::Impl::Rates() {
  if (cfg_.machine_rates) return cfg_.machine_rates;
  if (!gpu() || cfg_.offload_compute != kOffloadComputeAuto) return std::nullopt;
  std::vector<uint64_t> numels;
  for (const TensorSpec& t : specs_) numels.push_back(t.numel);
  if (ComputePlacement(numels, cfg_.offload_fraction, cfg_.placement).offloaded == 0)
    return std::nullopt;  // nothing offloaded: no share to choose
  RateCache& cache = cfg_.rate_cache ? *cfg_.rate_cache : DefaultRateCache();
  const RateCache::Key key = RateKeyFor(specs_, cfg_);
  return cache.FindOrMeasure(key, [&] { return MeasureRates(key); });
}

void HybridOptimizer::Impl::BuildExecutors(std::vector<StepSpan> hot) {
  executors_.clear();
  stream_exec_ = nullptr;
  stream_spec_.reset();
  if (gpu())
    executors_.push_back(offload::MakeGpuResident(gpu_.get(), hot_tensor_, specs_.size()));
  else
    executors_.push_back(offload::MakeHostResident(&driver_, std::move(hot), hot_tensor_));
  const std::vector<layout::StreamChunk>& chunks = stream_.chunks();
  if (!chunks.empty()) {
    const uint64_t slot_bytes = layout::Aligned(stream_.slot_bytes());
    std::vector<offload::GpuSide::StreamChunkSpans> all;
    for (size_t c = 0; c < chunks.size(); ++c) {
      offload::GpuSide::StreamChunkSpans ch;
      ch.slot_index = static_cast<int>(c % static_cast<size_t>(cfg_.stream_slots));
      ch.slot = stream_slots_.data() + ch.slot_index * slot_bytes;
      ch.host = stream_.host_chunk(c);
      ch.bytes = chunks[c].bytes;
      ch.spans = stream_.SlotSpans(c, ch.slot, specs_, &ch.span_tensor);
      for (uint32_t i = chunks[c].first; i < chunks[c].end; ++i) {
        const layout::StreamPiece& piece = stream_.pieces()[i];
        ch.span_grad_offset.push_back(piece.offset * DTypeSize(specs_[piece.tensor].grad_dtype));
      }
      if (stream_backup_off_[c] != layout::kNoOffset) {
        ch.backup = stream_backup_slab_.data() + stream_backup_off_[c];
        ch.hold_spans = stream_.HoldSpans(c, ch.spans, specs_,
                                          stream_hold_slab_.data() + stream_hold_off_[c],
                                          &ch.hold_copies);
      }
      all.push_back(std::move(ch));
    }
    // The speculation's view of the chunks (Note [Speculating streamed chunks]).
    std::vector<std::vector<uint32_t>> chunk_tensors;
    std::vector<offload::StreamSpeculation::Restore> restore;
    bool speculative = false;
    for (const offload::GpuSide::StreamChunkSpans& ch : all) {
      chunk_tensors.push_back(ch.span_tensor);
      restore.push_back({ch.speculative() ? ch.host : nullptr, ch.backup, ch.bytes});
      speculative |= ch.speculative();
    }
    std::unique_ptr<offload::StreamExecutor> exec;
    if (gpu()) {
      // The speculation's backups: a copy in kBackupPieces pieces on the optimizer's
      // threads, called from a CUDA callback thread during backward (Note [Speculating
      // streamed chunks]); a few threads match the link, and the rest of the cores stay
      // with the training loop, which is launching backward's kernels.
      auto host_copy = [this](void* dst, const void* src, size_t bytes) {
        constexpr size_t kBackupPieces = 6;
        auto* d = static_cast<uint8_t*>(dst);
        const auto* s = static_cast<const uint8_t*>(src);
        const size_t piece = (bytes + kBackupPieces - 1) / kBackupPieces;
        try {
          driver_.Execute([&] {
            tbb::parallel_for(size_t{0}, kBackupPieces, [&](size_t i) {
              const size_t at = std::min(bytes, i * piece);
              std::memcpy(d + at, s + at, std::min(bytes, at + piece) - at);
            });
          });
        } catch (...) {  // no threads to be had: copy on this one
          std::memcpy(d, s, bytes);
        }
      };
      report_.device.metadata +=
          gpu_->BuildStream(cfg_.algorithm, std::move(all), cfg_.stream_slots, host_copy);
      std::vector<uint8_t> streamed(specs_.size(), 0);
      for (size_t t = 0; t < specs_.size(); ++t)
        streamed[t] = placement_.tensors[t].stream_count > 0 ? 1 : 0;
      exec = offload::MakeGpuStream(gpu_.get(), std::move(streamed));
    } else {
      exec = offload::MakeHostStream(&driver_, std::move(all), cfg_.faults);
    }
    stream_exec_ = exec.get();
    executors_.push_back(std::move(exec));
    if (speculative)
      stream_spec_ = std::make_unique<offload::StreamSpeculation>(
          stream_exec_, std::move(chunk_tensors), std::move(restore), specs_.size());
  }
  if (pipeline_) {
    offload::ExecutorFns fns;
    fns.name = "host-offload";
    fns.launch = [this](const offload::StepWork& w) { RunOffload(w); };
    if (gpu())
      fns.wait_param = [this](size_t t, void* stream) {
        if (last_upload_[t] != 0) transport_->StreamWaitFor(last_upload_[t], stream);
      };
    executors_.push_back(offload::MakeExecutor(std::move(fns)));
  }
}

}  // namespace tandem
