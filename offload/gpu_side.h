// GpuSide: what GPU mode needs from CUDA, behind one interface, so that offload/ builds
// and runs host mode without a CUDA toolkit (TANDEM_HAS_CUDA == 0: gpu_side_none.cc).
//
// One object per optimizer in GPU mode, bound to the caller's stream: the fused hot step
// (gpu::StepPlan), the gradient pre-pass (gpu::GradNormPlan), the copy transport, the
// checks of the caller's device pointers, synchronous copies to and from the device, and
// the events that time the step and order other streams after it.
//
// Thread safety: used by the optimizer's thread only (except CopyConcurrent and
// ZeroConcurrent). Every failing CUDA call throws Error(kCuda) (kOutOfMemory for
// allocations) naming the call and `context`.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "engine/step_scalars.h"
#include "engine/step_span.h"
#include "offload/grad_stats.h"
#include "engine/layout/stream_layout.h"
#include "offload/transport.h"
#include "tandem/compute_split.h"
#include "tandem/faults.h"
#include "tandem/types.h"

namespace tandem::offload {

class GpuSide {
 public:
  // Whether this build has CUDA and this process can use a CUDA device. Never throws.
  static bool Available() noexcept;
  // A GpuSide on `stream` (a cudaStream_t as void*; nullptr = legacy default stream).
  // `faults` (may be null) is asked once per copy of its transport and of each streamed
  // chunk (tandem/faults.h). Throws Error(kUnsupported) in a build without CUDA.
  static std::unique_ptr<GpuSide> Create(void* stream, std::shared_ptr<FaultPlan> faults);
  virtual ~GpuSide() = default;

  // Throws Error(kInvalidArgument) "<who>: <what> ..." unless `p` is device memory with
  // at least `need` bytes from `p` (where the driver can tell the allocation's size);
  // `need_detail` explains `need` in the message, e.g. "(9000 elements of f32)".
  virtual void CheckDevicePointer(const void* p, uint64_t need, const std::string& need_detail,
                                  const std::string& who, const char* what) const = 0;
  // The transport of GPU mode: two copy streams ordered after the caller's stream.
  virtual std::unique_ptr<Transport> MakeTransport() = 0;

  // Builds the hot plans over `spans`, one per distinct StepSpan::formats (Note [One plan
  // per format set]; scalar index per span, kSkipScalarIndex: left out until a
  // LaunchHot), and the norm plan over every tensor's gradient; returns the device bytes
  // they hold. span_tensor[i]: the tensor of span i (which starts at its element 0).
  virtual uint64_t BuildPlans(Algorithm algo, const std::vector<StepSpan>& spans,
                              const std::vector<uint32_t>& scalar_index,
                              const std::vector<size_t>& span_tensor,
                              const std::vector<HostGrad>& grads) = 0;
  // Points every plan's reads of tensor t's gradient (the pre-pass, the hot plans, the
  // stream plans) at `grad`, the tensor's element 0, from their next launch on.
  virtual void SetGrad(size_t t, const void* grad) = 0;

  // The pre-pass over the gradients of the tensors with active[i] != 0 (empty: all),
  // timed, then waited for: the norm is needed on the host before any update.
  virtual NormResult Prepass(const std::vector<uint8_t>& active) = 0;
  // One or more fused launches of the hot plans: span i uses scalars[span_index[i]], or
  // is left out where span_index[i] == kSkipScalarIndex. Any number of distinct entries
  // (launches of at most gpu::kMaxScalarGroups each, per plan). Timed as one stage; not
  // waited for.
  virtual void LaunchHot(const std::vector<StepScalars>& scalars,
                         const std::vector<uint32_t>& span_index) = 0;
  // Makes `stream` wait for the last LaunchHot (non-blocking).
  virtual void StreamWaitHot(void* stream) const = 0;
  // Pre-pass and hot-step times of the last step in ms (waits for the hot step's end).
  virtual void ReadTimes(double* prepass_ms, double* hot_ms) = 0;

  // The GPU-stream executor (Note [Chunk-major streaming], offload/stream_layout.h).
  // Chunk c's `bytes` move from pinned `host` into the device slot `slot` (slot_index of
  // `slots`), its spans (pointers into the slot, the gradients and parameters) are stepped
  // there, and the bytes move back. Builds one plan per format set of each chunk; returns
  // the device bytes they hold.
  struct StreamChunkSpans {
    uint8_t* host = nullptr;
    uint8_t* slot = nullptr;
    uint64_t bytes = 0;
    int slot_index = 0;
    std::vector<StepSpan> spans;
    std::vector<uint32_t> span_tensor;       // per span: its tensor
    std::vector<uint64_t> span_grad_offset;  // per span: byte offset in its tensor's gradient
    // Only for a chunk that may be updated during backward (Note [Speculating streamed
    // chunks], offload/stream_speculation.h; empty hold_spans: never): where its state's
    // old bytes go (pinned, `bytes`), its spans with the parameters in the holding place,
    // and the parameter ranges that place mirrors.
    uint8_t* backup = nullptr;
    std::vector<StepSpan> hold_spans;
    std::vector<layout::StreamLayout::HoldCopy> hold_copies;
    bool speculative() const { return !hold_spans.empty(); }
  };
  // host_copy(dst, src, bytes): a host-to-host copy (the speculation's backups); it runs
  // on a CUDA callback thread, so it must not call CUDA and must not throw.
  using HostCopy = std::function<void(void*, const void*, size_t)>;
  virtual uint64_t BuildStream(Algorithm algo, std::vector<StreamChunkSpans> chunks, int slots,
                               HostCopy host_copy) = 0;
  // Enqueues every chunk that has an active span (scalar_index[t] != kSkipScalarIndex, as
  // for LaunchHot): uploads wait for the slot's previous download (and the last step's
  // downloads), kernels for their upload and for the last Prepass (the gradients: call
  // after Prepass; the hot launch runs beside them), downloads for their kernel. Never
  // waits on the host. Returns the chunks enqueued.
  // committed (empty, or one entry per chunk): chunks whose speculative update this step
  // keeps; for those only their held parameters are copied into place (after the pre-pass:
  // backward has stopped reading the parameters), nothing is streamed.
  virtual uint64_t LaunchStream(const std::vector<StepScalars>& scalars,
                                const std::vector<uint32_t>& scalar_index,
                                const std::vector<uint8_t>& committed) = 0;
  // Speculative early start of chunk c (chunks[c].speculative()), during backward, after
  // the gradients queued so far on the caller's stream: upload its state; beside it, copy
  // the host chunk into its backup on the host (host_copy, from a stream callback); copy
  // its parameters into the holding place, step the hold spans with `scalars`, and, after
  // the backup, download the new state into the host chunk. The parameters are not
  // written. Never waits on the host; call between two Steps only.
  virtual void SpeculateStream(size_t c, const std::vector<StepScalars>& scalars,
                               const std::vector<uint32_t>& scalar_index) = 0;
  // Waits until every SpeculateStream's downloads are done (the host chunks and backups
  // are final).
  virtual void WaitSpeculated() = 0;
  // Makes the caller's stream wait for the last LaunchStream's kernels (the parameters).
  // Step calls it after the offload pipeline has ordered its downloads after the caller's
  // stream: called before, it would hold those downloads behind every streamed chunk.
  virtual void JoinStream() = 0;
  // Makes `stream` wait for the last LaunchStream's kernels (non-blocking).
  virtual void StreamWaitStreamed(void* stream) const = 0;
  // GPU time of the last LaunchStream, first upload to last download, in ms (waits for it).
  virtual double ReadStreamMs() = 0;
  // Measures PCIe both ways at once through `bytes` of pinned and device memory, and
  // estimates the fused kernel's rate for `kernel_bytes` of HBM traffic per element.
  // Fills h2d_gbps, d2h_gbps and gpu_gparams of `rates`.
  virtual void ProbeRates(uint64_t bytes, double kernel_bytes, MachineRates* rates) = 0;

  // Synchronous copies between device (or pinned) and host memory, and a wait for
  // everything queued on the caller's stream.
  virtual void Copy(void* dst, const void* src, size_t bytes, const char* context) const = 0;
  // The exceptions to "the optimizer's thread only" (for the block-wise initialisation,
  // offload/state_init.h): a synchronous copy like Copy that any thread may call,
  // concurrently with other CopyConcurrent and ZeroConcurrent calls (not with the other
  // methods). It makes the optimizer's device current on the calling thread (it stays
  // current there afterwards) and copies on that thread's per-thread stream, so copies of
  // several threads overlap; it does not wait for the caller's stream (call SyncStream
  // first where that matters). Host memory should be pinned for the copies to overlap.
  virtual void CopyConcurrent(void* dst, const void* src, size_t bytes,
                              const char* context) const = 0;
  // Sets `bytes` of device memory at `dst` to zero, synchronously, under the same rules
  // as CopyConcurrent (any thread, per-thread stream, the device left current).
  virtual void ZeroConcurrent(void* dst, size_t bytes, const char* context) const = 0;
  // Waits for the caller's stream and for everything the stream executor queued.
  virtual void SyncStream(const char* context) const = 0;
};

}  // namespace tandem::offload
