// The plan as a text report: inputs, per-category table, fraction sweep, verdict.
#include <cstdarg>
#include <cstdio>
#include <string>
#include <string_view>

#include "tandem/planner.h"

namespace tandem::planner {
namespace {

void Append(std::string* out, const char* fmt, ...) __attribute__((format(printf, 2, 3)));
void Append(std::string* out, const char* fmt, ...) {
  char buf[512];
  va_list ap;
  va_start(ap, fmt);
  std::vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  *out += buf;
}

}  // namespace

std::string PlanToText(const PlanResult& plan) {
  const PlanInputs& in = plan.inputs;
  std::string s;
  Append(&s, "Model      %s (%s): %llu parameters in %zu tensors\n", in.model.name.c_str(),
         in.model.architecture.c_str(), static_cast<unsigned long long>(in.model.total_params()),
         in.model.tensors.size());
  const FractionPoint& r = plan.recommended;
  std::string release;
  if (in.grad_release != Choice::kOff)
    release = std::string(" (gradient release ") + Name(in.grad_release) +
              (in.grad_release == Choice::kAuto ? (r.grad_release ? ": on" : ": off") : "") + ")";
  Append(&s, "Optimizer  %s, %s, params %s, grads %s%s, placement %s\n", Name(in.algorithm),
         Name(in.formats).c_str(), Name(in.param_dtype), Name(in.grad_dtype), release.c_str(),
         Name(in.placement));
  Append(&s, "Ranks      %u GPU(s)/node x %u node(s) = %llu; ", in.gpus_per_node, in.nodes,
         static_cast<unsigned long long>(plan.ranks));
  if (in.fsdp2) {
    Append(&s, "FSDP2 over %llu rank(s)%s: rank 0 steps its shards, %llu elements\n",
           static_cast<unsigned long long>(plan.shard_size),
           plan.shard_size < plan.ranks ? " (HSDP)" : "",
           static_cast<unsigned long long>(plan.shard_elements));
    Append(&s,
           "FSDP2      figures per rank (rank 0, the largest shards); unsharded working set: "
           "root unit + %u block(s) in flight; %llu tensor(s) with f32 moments (group rule)\n",
           in.fsdp2_blocks_in_flight, static_cast<unsigned long long>(plan.f32_moment_tensors));
  } else {
    Append(&s, "%s: %llu elements\n",
           in.zero1_sharding ? "rank 0 optimizer shard (ZeRO-1 what-if: not available in this "
                               "version)"
                             : "each rank steps the whole model (plain data parallelism; "
                               "ZeRO-1 sharding: not available in this version; --fsdp2 for "
                               "FSDP2 shards)",
           static_cast<unsigned long long>(plan.shard_elements));
  }
  Append(&s, "Budgets    GPU %.2f GiB per GPU, of which %.2f GiB usable (headroom",
         ToGiB(in.gpu_budget), ToGiB(plan.usable_gpu_bytes));
  if (in.gpu_headroom_fraction > 0) Append(&s, " %g%%", in.gpu_headroom_fraction * 100);
  if (in.gpu_headroom_bytes > 0) Append(&s, " %.2f GiB", ToGiB(in.gpu_headroom_bytes));
  if (in.gpu_headroom_fraction == 0 && in.gpu_headroom_bytes == 0) s += " none";
  Append(&s, "); host %.2f GiB per node\n", ToGiB(in.host_budget));
  Append(&s, "Activations %.2f GiB per GPU", ToGiB(plan.activation_bytes));
  if (in.activation_bytes_given) {
    s += " (given)";
  } else if (in.activation_shape.seq_len > 0 &&
             plan.activation_model == ActivationModel::kTransformers) {
    const TransformerShape& t = in.model.transformer;
    const bool eager = t.eager_attention || in.activation_shape.attention == Attention::kEager;
    Append(&s, " (estimated as transformers runs it: batch %llu, seq %llu, %s, %s; peak in the %s)",
           static_cast<unsigned long long>(in.activation_shape.batch),
           static_cast<unsigned long long>(in.activation_shape.seq_len),
           in.recompute == Recompute::kFull ? "gradient checkpointing" : "no recomputation",
           eager ? "eager attention: s x s scores kept" : "SDPA: no s x s scores kept",
           plan.transformers_activations.where());
  } else if (in.activation_shape.seq_len > 0) {
    Append(&s, " (estimated: batch %llu, seq %llu, recompute %s, %s)",
           static_cast<unsigned long long>(in.activation_shape.batch),
           static_cast<unsigned long long>(in.activation_shape.seq_len), Name(in.recompute),
           in.activation_shape.attention == Attention::kFlash
               ? "FlashAttention-style: no s x s scores kept"
               : "eager attention: s x s scores kept");
  } else {
    s += " (none given: pass --activations or --seq)";
  }
  s += "\n";
  Append(&s, "Profile    %s%s\n", in.profile.machine.c_str(),
         in.profile.builtin_default ? " [BUILT-IN DEFAULT]" : "");
  Append(&s, "  GPU kernel  %.1f Gparam/s  (%s)\n", plan.rates.gpu_gparams_per_s,
         plan.rates.gpu_source.c_str());
  Append(&s, "  host kernel %.2f Gparam/s  (%s)\n", plan.rates.host_gparams_per_s,
         plan.rates.host_source.c_str());
  Append(&s, "  PCIe        H2D %.1f, D2H %.1f, both %.1f GB/s; HBM copy %.0f GB/s\n",
         in.profile.pcie.h2d_gbps, in.profile.pcie.d2h_gbps, in.profile.pcie.bidir_gbps,
         in.profile.gpu.hbm_copy_gbps);
  Append(&s, "  split model PCIe %s; host %.2f Gparam/s (%s)\n", plan.rates.pcie_source.c_str(),
         plan.rates.machine.host_gparams, plan.rates.host_dma_source.c_str());
  Append(&s, "  offload_compute %s; a streamed element moves %.4g B each way\n",
         OffloadComputeName(in.offload_compute).c_str(), plan.rates.stream_bytes_per_element);
  Append(&s, "  pre-pass    %.0f Gelem/s (%s)\n", plan.rates.prepass_gparams_per_s,
         plan.rates.prepass_source.c_str());
  Append(&s, "  fixed step cost, %zu tensors: engine %.2f ms (%s); binding %.2f ms (%s)\n",
         in.model.tensors.size(), plan.recommended.time.engine_overhead_ms,
         plan.rates.engine_overhead_source.c_str(), plan.recommended.time.binding_overhead_ms,
         plan.rates.binding_overhead_source.c_str());
  if (in.gpus_per_node > 1)
    Append(&s, "  node        %u ranks share host DRAM under DMA: %.0f GB/s (%s)\n",
           in.gpus_per_node, plan.rates.dram_gbps, plan.rates.dram_source.c_str());
  if (plan.iteration_modelled)
    Append(&s,
           "  training    %.0f TFLOP/s (%s); %.1f TFLOP per GPU per iteration, %.0f tokens; "
           "peak %.0f TFLOP/s\n",
           plan.train_tflops, plan.train_source.c_str(), plan.flops.hardware() / 1e12,
           plan.flops.tokens, plan.peak_tflops);
  s += "\n";

  Append(&s, "Memory at offload fraction %.4f (%s)\n", r.fraction,
         in.fraction >= 0 ? "given" : plan.feasible ? "recommended" : "closest to fitting");
  Append(&s, "  %-12s %14s %14s\n", "category", in.fsdp2 ? "GPU GiB/rank" : "GPU GiB",
         "host GiB/rank");
  const struct {
    const char* name;
    uint64_t gpu, host;
  } rows[] = {{"weights", r.gpu.weights, r.host.weights},
              {"master", r.gpu.master, r.host.master},
              {"correction", r.gpu.correction, r.host.correction},
              {"moments", r.gpu.moments, r.host.moments},
              {"scales", r.gpu.scales, r.host.scales},
              {"gradients", r.gpu.gradients, r.host.gradients},
              {"unsharded", r.gpu.unsharded, r.host.unsharded},
              {"staging", r.gpu.staging, r.host.staging},
              {"activations", r.gpu.activations, r.host.activations},
              {"metadata", r.gpu.metadata, r.host.metadata},
              {"speculation", r.gpu.speculation, r.host.speculation},
              {"runtime", r.gpu.runtime, r.host.runtime},
              {"total", r.gpu.total(), r.host.total()}};
  for (const auto& row : rows) {
    if (!in.fsdp2 && std::string_view(row.name) == "unsharded") continue;  // FSDP2 only
    Append(&s, "  %-12s %14.3f %14.3f\n", row.name, ToGiB(row.gpu), ToGiB(row.host));
  }
  Append(&s, "  host per node (%u rank(s)): %.3f GiB\n", in.gpus_per_node,
         ToGiB(r.host_node_bytes));
  Append(&s,
         "  step: prepass %.2f + max(gpu %.2f, pipeline %.2f: d2h %.2f, host %.2f, h2d %.2f, "
         "fill %.2f%s) + fixed (engine %.2f + binding %.2f) = %.2f ms\n\n",
         r.time.prepass_ms, r.time.gpu_ms, r.time.pipeline_ms, r.time.d2h_ms, r.time.host_ms,
         r.time.h2d_ms, r.time.fill_ms,
         r.time.streamed > 0 && r.time.streamed < r.cold_elements
             ? "; streamed, then host-computed"
             : "",
         r.time.engine_overhead_ms, r.time.binding_overhead_ms, r.time.step_ms);
  const ComputeSplit& sp = r.time.split;
  Append(&s,
         "  compute split: offload_compute %s -> share %.4f of the %llu offloaded elements "
         "computed on the GPU (%llu streamed); model max(d2h %.2f, h2d %.2f, host %.2f, "
         "gpu %.2f) = %.2f ms, bound: %s\n%s",
         OffloadComputeName(in.offload_compute).c_str(), sp.share,
         static_cast<unsigned long long>(r.cold_elements),
         static_cast<unsigned long long>(r.time.streamed), sp.down_ms, sp.up_ms, sp.host_ms,
         sp.gpu_ms, sp.step_ms, r.cold_elements > 0 ? sp.bound() : "none",
         r.split_fallback ? "" : "\n");
  if (r.split_fallback)
    s += "  (auto's share would stream, but the GPU cannot also hold the stream slots: "
         "computed on the host)\n\n";
  if (plan.gpu_bytes_with_release != plan.gpu_bytes_without_release &&
      (in.grad_release != Choice::kOff || r.iteration.modelled))
    Append(&s, "  GPU peak: %.3f GiB with gradient release, %.3f GiB without\n\n",
           ToGiB(plan.gpu_bytes_with_release), ToGiB(plan.gpu_bytes_without_release));
  if (r.iteration.modelled) {
    const IterationTime& it = r.iteration;
    Append(&s,
           "Iteration at fraction %.4f: forward %.2f + backward %.2f + step exposed %.2f = "
           "%.2f ms; %.0f tokens/s per GPU, MFU %.1f%%\n",
           r.fraction, it.forward_ms, it.backward_ms, it.exposed_ms, it.iteration_ms,
           it.tokens_per_s, 100 * it.mfu);
    Append(&s,
           "  during backward %.2f ms of offload work handed (speculated: %llu host-computed, "
           "%llu streamed elements), %.2f left when it ends; at Step %.2f\n",
           it.during_backward_ms, static_cast<unsigned long long>(r.speculated_host),
           static_cast<unsigned long long>(r.speculated_streamed), it.backlog_ms, it.at_step_ms);
    Append(&s, "  rolled back (clipping triggers, a non-finite gradient): step exposed %.2f, "
               "iteration %.2f ms\n\n",
           it.exposed_abort_ms, it.iteration_abort_ms);
  }

  const bool iter = plan.iteration_modelled;
  const bool rel = in.grad_release == Choice::kAuto;
  Append(&s, "Fraction sweep\n  %8s %10s %14s %6s %10s %7s", "fraction", "GPU GiB", "host GiB/node",
         "fits?", "step ms", "share");
  if (iter) Append(&s, " %10s %10s", "exposed", "iter ms");
  if (rel) Append(&s, " %7s", "release");
  s += "  bottleneck\n";
  for (const FractionPoint& p : plan.sweep) {
    const char* fits = p.fits_gpu && p.fits_host ? "yes" : !p.fits_gpu ? "GPU" : "host";
    Append(&s, "  %8.4f %10.2f %14.2f %6s %10.2f %7.4f", p.fraction, ToGiB(p.gpu.total()),
           ToGiB(p.host_node_bytes), fits, p.time.step_ms, p.time.split.share);
    if (iter) Append(&s, " %10.2f %10.2f", p.iteration.exposed_ms, p.iteration.iteration_ms);
    if (rel) Append(&s, " %7s", p.grad_release ? "on" : "off");
    Append(&s, "  %s\n", Name(p.time.bottleneck));
  }
  s += "  (fits? column: yes, or the budget that is exceeded; share: of the offloaded "
       "elements, computed on the GPU";
  if (iter) s += "; exposed: the step after backward; iter: forward + backward + exposed";
  s += ")\n\n";
  for (const std::string& m : plan.messages) s += m + "\n";
  return s;
}

}  // namespace tandem::planner
