// The training iteration of one rank: forward and backward from the training throughput,
// and what of the optimizer step backward hides (Note [What backward hides]).
//
// Note [What backward hides]: the engine this models (early start and gradient release
// under FSDP2: GradReady per gradient as its reduce-scatter completes) takes each
// gradient as backward produces it. During backward, per rank and with the rates of
// Note [The node is one machine] (every rank busy at once):
//   * a speculated host-computed element: its gradient goes down and the host copies its
//     state (b bytes, read and written: the backup) then updates it,
//     c_hb = max(g / d2h, 2 b / (copy / ranks) + 1 / host);
//   * a speculated streamed element: its state goes up, the fused kernel updates it and
//     it comes down into its spare (the new parameter waits on the GPU),
//     c_s = B_s / min(d2h, h2d); with release its gradient goes down too (the copy a
//     rollback reads) and comes up again beside the state, c_sr' = (B_s + g) /
//     min(d2h, h2d), unless the kernel reads it where it was handed over (Note [Reading
//     the handed gradient in place], offload/executors/gpu_stream.h: at most
//     in_place_grad_bytes / g elements at once, taken as that many elements; such a
//     gradient waits on the GPU for its kernel as another waits for its download, so the
//     GPU holds no more), c_si = max((B_s + g) / d2h, B_s / h2d);
//   * any other offloaded element whose gradient leaves the GPU (gradient release, or a
//     host-computed element with early start): its gradient goes down, c_g = g / d2h.
// These queue behind each other on the rank's copy engines and host as the step's two
// classes do (tandem/compute_split.h: one after the other), as the gradients arrive, one
// block at a time. What is still queued when backward ends is exposed: the larger of the
// work beyond backward's span (less the first block, before which nothing has arrived)
// and the work of the gradients that arrive last (block 0 and the embedding, in the final
// callback). Then Step:
//   * a streamed element not speculated: its state up and down, with release also its
//     gradient up again (it left the GPU): c_sr = max(B_s / d2h, (B_s + g) / h2d);
//   * a host-computed element not speculated, its gradient already on the host:
//     c_hs = max(p / h2d, 1 / host);
//   * a speculated host-computed element commits: its parameter goes up, p / h2d; a
//     speculated streamed one copies its held parameter on the GPU (2 p / HBM);
//   * the GPU-resident kernel (the global norm needs every gradient) beside them.
// A host kernel pays tandem::kHostChunkMs per pipeline chunk too. The pre-pass partials of
// tensors handed during backward are taken as they arrive, so only the last block's
// remain. Speculation rolled back (clipping triggers, a non-finite gradient on any
// rank), counted at its worst, at backward's end: the speculated work done for nothing,
// the host-computed chunks' backups copied back (every rank of the node at once; a
// streamed chunk's spare is dropped, nothing copied), then every offloaded element
// at Step. Without early start or release nothing overlaps: the step of
// docs/planner.md "Step-time model" runs after backward.
#include <algorithm>
#include <cmath>
#include <string>

#include "planner/plan.h"
#include "tandem/compute_split.h"

namespace tandem::planner {
namespace {

// Per-element costs (ms) of Note [What backward hides].
struct Costs {
  double stream = 0, stream_release = 0, stream_spec_release = 0, stream_in_place = 0;
  double grad_down = 0;
  double host_backward = 0, host_step = 0, host_commit = 0, host_full = 0;
};

// A rank's share of the host's copy bandwidth (every rank of the node at once), B/ms.
double HostCopyPerRank(const PlanInputs& in) {
  const double gbps =
      in.profile.host.copy_gbps > 0 ? in.profile.host.copy_gbps : in.profile.host.triad_gbps;
  return gbps / std::max<uint32_t>(in.gpus_per_node, 1) * 1e6;
}

// `backup`: the bytes a speculated host-computed element's backup copies.
Costs CostsFor(const PlanInputs& in, const Rates& rates, double backup) {
  const double d = rates.machine.d2h_gbps * 1e6, u = rates.machine.h2d_gbps * 1e6;  // B/ms
  const double kernel = 1.0 / (rates.machine.host_gparams * 1e6) +
                        kHostChunkMs / static_cast<double>(std::max<uint64_t>(in.chunk_elements, 1));
  const double copy = HostCopyPerRank(in);
  const double bs = rates.stream_bytes_per_element;
  const double g = static_cast<double>(DTypeSize(in.grad_dtype));
  const double p = static_cast<double>(DTypeSize(in.param_dtype));
  Costs c;
  c.stream = bs / std::min(d, u);
  c.stream_release = std::max(bs / d, (bs + g) / u);
  c.stream_spec_release = (bs + g) / std::min(d, u);
  c.stream_in_place = std::max((bs + g) / d, bs / u);
  c.grad_down = g / d;
  c.host_backward = std::max(g / d, (copy > 0 ? 2.0 * backup / copy : 0.0) + kernel);
  c.host_step = std::max(p / u, kernel);
  c.host_commit = p / u;
  c.host_full = std::max({g / d, p / u, kernel});
  return c;
}

bool EarlyStart(const PlanInputs& in, bool release) {
  return release || in.speculative_early_start;
}

// The span of backward in which handed work can run: all of it but the first block's.
double UsableBackwardMs(const TrainingModel& tm) {
  if (!tm.modelled) return 0;
  return tm.backward_ms * (1.0 - 1.0 / static_cast<double>(std::max<uint64_t>(tm.blocks, 1)));
}

// The work handed during backward (ms) with `sh` host-computed and `ss` streamed elements
// speculated, `si` of the latter reading their released gradients in place.
double DuringBackward(const Costs& k, const PointClasses& c, bool release, double sh, double ss,
                      double si = 0) {
  const double nh = static_cast<double>(c.host), ns = static_cast<double>(c.streamed);
  return (release ? (ss - si) * k.stream_spec_release + si * k.stream_in_place
                  : ss * k.stream) +
         sh * k.host_backward +
         (nh - sh) * k.grad_down +
         (release ? (ns - ss) * k.grad_down : 0.0);
}

// The work of the gradients that arrive last: they cannot start before backward ends.
double TailWork(const Costs& k, const PointClasses& c, bool release) {
  return static_cast<double>(c.tail_host) * k.grad_down +
         (release ? static_cast<double>(c.tail_streamed) * k.grad_down : 0.0);
}

}  // namespace

TrainingModel ResolveTraining(const PlanInputs& in) {
  TrainingModel tm;
  const Profile::Gpu& gpu = in.profile.gpu;
  const bool one_gpu = !in.fsdp2 && in.gpus_per_node * in.nodes == 1;
  tm.tflops = gpu.train_tflops > 0 ? gpu.train_tflops
              : one_gpu            ? kDefaultTrainTflopsOneGpu
                                   : kDefaultTrainTflops;
  tm.tflops_source = gpu.train_tflops > 0 ? "measured"
                     : one_gpu ? "not in the profile: built-in, measured with transformers' "
                                 "Llama-3-8B and Qwen2.5-7B on one H200 "
                                 "(tandem.calibrate_training measures it)"
                               : "not in the profile: built-in, fitted to Llama-3-8B under "
                                 "FSDP2 on 4 x H200 (tandem.calibrate_training measures it)";
  tm.peak = gpu.peak_tflops > 0 ? gpu.peak_tflops : kDefaultPeakTflops;
  tm.peak_source = gpu.peak_tflops > 0 ? "the profile's" : "built-in: H100/H200 SXM dense bf16";
  if (in.activation_shape.seq_len == 0) {
    tm.note = "no iteration modelled: give --seq (and --batch, --recompute) for forward, "
              "backward and what of the step backward hides";
    return tm;
  }
  if (in.model.hidden_size == 0 || in.model.num_layers == 0) {
    tm.note = "no iteration modelled: the model has no transformer shape (a preset or a "
              "config.json has one)";
    return tm;
  }
  if (IsMixtureOfExperts(in.model)) {
    tm.note = "no iteration modelled: the training FLOPs of a mixture of experts are not "
              "modelled (each token runs only its routed experts)";
    return tm;
  }
  tm.flops = EstimateTrainingFlops(in.model, in.activation_shape, in.recompute);
  const double ms = tm.flops.hardware() / (tm.tflops * 1e12) * 1e3;
  tm.forward_ms = ms * tm.flops.forward_share;
  tm.backward_ms = ms - tm.forward_ms;
  tm.blocks = std::max<uint64_t>(in.model.num_layers, 1);
  tm.modelled = true;
  return tm;
}

PointClasses ClassesOf(const PlanInputs& in, const Placement& placement) {
  PointClasses c;
  // Block 0 and what comes before it (the embedding) arrive last in backward.
  size_t tail_end = 0;
  while (tail_end < in.model.tensors.size() && in.model.tensors[tail_end].layer <= 0) ++tail_end;
  const bool blocks = std::any_of(in.model.tensors.begin(), in.model.tensors.end(),
                                  [](const ModelTensor& t) { return t.layer >= 0; });
  if (!blocks) tail_end = 0;
  for (size_t t = 0; t < placement.tensors.size(); ++t) {
    const TensorPlacement& tp = placement.tensors[t];
    c.hot += tp.device_count;
    c.streamed += tp.stream_count;
    c.host += tp.host_compute_count();
    if (t < tail_end) {
      c.tail_hot += tp.device_count;
      c.tail_streamed += tp.stream_count;
      c.tail_host += tp.host_compute_count();
    }
  }
  return c;
}

SpeculationElements ChooseSpeculation(const PlanInputs& in, const Rates& rates,
                                      const TrainingModel& tm, const PointClasses& c, bool release,
                                      const SpeculationRoom& room) {
  SpeculationElements s;
  s.host_backup_per_element = room.host_per_element;
  const Costs k = CostsFor(in, rates, room.host_per_element);
  const double nh = static_cast<double>(c.host), ns = static_cast<double>(c.streamed);
  // What backward can cover: host-computed elements arrive first (placement puts them
  // last in registration order), then the streamed ones.
  const double span = UsableBackwardMs(tm);
  double left = span - DuringBackward(k, c, release, 0, 0);
  double sh = 0, ss = 0;
  if (left > 0 && nh > 0)
    sh = std::min(nh, left / std::max(k.host_backward - k.grad_down, 1e-30));
  left -= sh * (k.host_backward - k.grad_down);
  if (left > 0 && ns > 0)
    ss = std::min(ns, left / std::max(release ? k.stream_spec_release - k.grad_down : k.stream,
                                        1e-30));
  // What the memory left holds.
  double host = static_cast<double>(room.host_bytes);
  if (room.host_per_element > 0) sh = std::min(sh, host / room.host_per_element);
  host -= sh * room.host_per_element;
  if (room.stream_spare_per_element > 0)
    ss = std::min(ss, std::max(host, 0.0) / room.stream_spare_per_element);
  if (room.stream_hold_per_element > 0)
    ss = std::min(ss, static_cast<double>(room.gpu_bytes) / room.stream_hold_per_element);
  s.host = static_cast<uint64_t>(std::max(sh, 0.0));
  s.streamed = static_cast<uint64_t>(std::max(ss, 0.0));
  return s;
}

double GradientsWaiting(const PlanInputs& in, const Rates& rates, const TrainingModel& tm,
                        const PointClasses& c, bool release, const SpeculationElements& s) {
  if (!release || !tm.modelled) return 0;
  const Costs k = CostsFor(in, rates, s.host_backup_per_element);
  const double work =
      DuringBackward(k, c, release, static_cast<double>(s.host), static_cast<double>(s.streamed),
                     static_cast<double>(s.in_place));
  const double beyond = work - UsableBackwardMs(tm);
  if (!(beyond > 0) || !(work > 0)) return 0;
  return static_cast<double>(c.host + c.streamed) * beyond / work;
}

IterationTime PredictIteration(const PlanInputs& in, const Rates& rates, const TrainingModel& tm,
                               const StepTime& step, const PointClasses& c, bool release,
                               const SpeculationElements& s, uint64_t backup_bytes) {
  IterationTime it;
  it.modelled = tm.modelled;
  it.forward_ms = tm.forward_ms;
  it.backward_ms = tm.backward_ms;
  const double fixed = step.engine_overhead_ms + step.binding_overhead_ms;
  if (!EarlyStart(in, release) || c.host + c.streamed == 0) {
    // Nothing is handed during backward (or nothing is offloaded): the whole step after.
    it.at_step_ms = step.step_ms - step.prepass_ms - fixed;
    it.exposed_ms = it.exposed_abort_ms = step.step_ms;
  } else {
    const Costs k = CostsFor(in, rates, s.host_backup_per_element);
    const double sh = static_cast<double>(s.host), ss = static_cast<double>(s.streamed);
    const double nh = static_cast<double>(c.host), ns = static_cast<double>(c.streamed);
    const double p = static_cast<double>(DTypeSize(in.param_dtype));
    const double g = static_cast<double>(DTypeSize(in.grad_dtype));
    it.during_backward_ms = DuringBackward(k, c, release, sh, ss, static_cast<double>(s.in_place));
    const double tail = TailWork(k, c, release);
    it.backlog_ms = std::max(it.during_backward_ms - UsableBackwardMs(tm), tail);
    const double stream_step = release ? k.stream_release : k.stream;
    it.at_step_ms = (ns - ss) * stream_step + (nh - sh) * k.host_step + sh * k.host_commit +
                    ss * 2 * p / (in.profile.gpu.hbm_copy_gbps * 1e6);
    // The pre-pass of the last block's gradients; the GPU-resident kernel.
    const double last = static_cast<double>(c.tail_hot + c.tail_streamed + c.tail_host);
    const double prepass = std::max(last * g / (in.profile.gpu.hbm_copy_gbps * 1e6),
                                    last / (rates.prepass_gparams_per_s * 1e6));
    const double gpu = static_cast<double>(c.hot) / (rates.machine.gpu_gparams * 1e6);
    const double fill = it.at_step_ms > 0 ? step.fill_ms : 0.0;
    it.exposed_ms = prepass + std::max(gpu, it.backlog_ms + it.at_step_ms) + fill + fixed;
    // Rolled back at backward's end: the speculated work was done, the host backups go back
    // (each rank's share of the host's copy bandwidth), then every element at Step.
    const double restore = 2.0 * static_cast<double>(backup_bytes) / HostCopyPerRank(in);
    const double all_at_step = ns * stream_step + nh * k.host_step;
    it.exposed_abort_ms = prepass + it.backlog_ms + restore + std::max(gpu, all_at_step) +
                          (all_at_step > 0 ? step.fill_ms : 0.0) + fixed;
    // Work handed during backward is the step's own work done sooner, plus the
    // speculation's backups: what is left after backward never takes longer than the
    // whole step after it and those backups (the sum above adds the backlog to the work
    // at Step, where the two link directions overlap). A rollback wastes the speculated
    // work and redoes it: it may take longer than the step.
    it.exposed_ms = std::min(it.exposed_ms, step.step_ms + restore / 2);
    if (s.host + s.streamed == 0) it.exposed_abort_ms = it.exposed_ms;
  }
  if (tm.modelled) {
    const double fb = tm.forward_ms + tm.backward_ms;
    it.iteration_ms = fb + it.exposed_ms;
    it.iteration_abort_ms = fb + it.exposed_abort_ms;
    it.tokens_per_s = tm.flops.tokens / (it.iteration_ms * 1e-3);
    it.mfu = tm.flops.model() / (it.iteration_ms * 1e-3) / (tm.peak * 1e12);
  }
  return it;
}

}  // namespace tandem::planner
