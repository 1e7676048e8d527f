// The host-offload executor (offload/executors/host_offload.h).
#include "offload/executors/host_offload.h"

#include <algorithm>
#include <exception>
#include <string>
#include <utility>

#include "cpu_simd/host_kernels.h"
#include "engine/state_arrays.h"
#include "offload/executors/roles.h"
#include "offload/memory/slab.h"
#include "offload/pipeline/pipeline.h"
#include "offload/speculation/speculator.h"
#include "tandem/error.h"

namespace tandem::offload {
namespace {

using Q = StreamDevice::Queue;

class HostOffload final : public Executor, public Speculative, public Queued, public StreamOrdered {
 public:
  explicit HostOffload(OffloadSetup s);
  ~HostOffload() override;
  const char* name() const override { return "host-offload"; }
  Roles roles() override { return {.speculative = this, .queued = this, .stream_ordered = this}; }

  void AddMemory(MemoryReport* r) const override {
    layout_.Report(&r->host);
    r->classes.host_computed += layout_.bytes();
    r->host.staging += staging_.size() + early_.size();
    r->host.speculation += backup_slab_.size() + hold_slab_.size();
  }
  void AddInitRegions(std::vector<InitRegion>* regions) const override {
    for (size_t t = 0; t < specs_.size(); ++t)  // pinned or host memory: encoded in place
      if (layout_.part(t).count > 0)
        regions->push_back(RegionOf(specs_[t], layout_.part(t), false));
  }
  void VisitParts(size_t t, const PartVisitor& visit) const override {
    visit(layout_.part(t), false);
  }
  // The host-computed master is host memory: a copy of the parameter, never the parameter.
  bool MasterIsParam(size_t) const override { return false; }
  void Quiesce() const override { device_->Drain(); }

  void SetGrad(size_t t, const void* grad) override {
    const size_t gsz = DTypeSize(specs_[t].grad_dtype);
    const uint64_t first = layout_.part(t).offset;
    for (size_t c = chunk_begin_[t]; c < chunk_end_[t]; ++c)
      chunks_[c].device_grad =
          static_cast<const uint8_t*>(grad) + (first + chunk_part_off_[c]) * gsz;
  }

  void GradReady(size_t t, bool again, const std::vector<uint8_t>& ready,
                 const GradMark& mark) override;
  // The tensor's downloads into the early-start buffer: the last one ends them (FIFO).
  void WaitGradReads(size_t t, void* stream) const override {
    if (stream != nullptr)
      device_->StreamWait(stream, grad_ticket_[t]);
    else
      device_->Synchronize(grad_ticket_[t]);
  }
  bool GradReadsDone(size_t t) const override { return device_->Query(grad_ticket_[t]); }
  void StopSpeculation() override {
    if (!begun_ || !speculator_) return;
    stopped_ = true;
    speculator_->Cancel();
  }
  void BeginSpeculation(const std::vector<StepScalars>* scalars,
                        const std::vector<uint32_t>* scalar_index,
                        const std::vector<uint8_t>& ready) override;
  void AwaitSpeculation(StageTimes* times) override {
    if (!begun_ || !speculator_) return;
    const std::exception_ptr err = speculator_->WaitIdle();
    times->speculative_host_ms = speculator_->busy_ms();
    if (err) std::rethrow_exception(err);
  }
  // A chunk speculated on for a tensor that this step leaves out was stepped wrongly.
  bool SpeculatedActiveOnly(const std::vector<uint8_t>& active) const override {
    if (!begun_ || !speculator_ || active.empty()) return true;
    for (size_t c = 0; c < chunks_.size(); ++c)
      if (speculator_->stepped(c) && active[chunks_[c].tensor] == 0) return false;
    return true;
  }
  // The speculated chunks keep their update; only their uploads remain.
  void CommitSpeculation(StageTimes* times) override {
    if (!begun_ || !speculator_) return;
    commit_ = true;
    for (size_t c = 0; c < chunks_.size(); ++c) {
      chunks_[c].stepped = speculator_->stepped(c);
      chunks_[c].host_param = speculator_->hold(c);
      times->speculated_chunks += chunks_[c].stepped ? 1 : 0;
    }
  }
  void RollBackSpeculation(StageTimes* times) override {
    if (begun_ && speculator_) times->rolled_back_chunks = speculator_->Rollback();
  }
  void EndEarlyStart() noexcept override;

  void Launch(const StepWork& w) override;
  void WaitParam(size_t t, void* stream) const override {
    if (gpu_) device_->StreamWait(stream, last_upload_[t]);
  }
  // The pipeline waited for each of the step's downloads before it stepped the chunk:
  // nothing reads the gradients once Step returned.
  void WaitGradConsumed(size_t, void*) const override {}

 private:
  // The early-start gradient buffer: allocated on the first GradReady (and reported as
  // staging from then on), or at construction with speculative_early_start.
  void AllocateEarlyBuffer();
  StreamDevice::What At(size_t c, uint64_t bytes, const char* what) const {
    return {c, chunks_.size(), bytes, what, "offload chunk"};
  }
  const void* EarlyGrad(size_t c) const {
    const size_t t = chunks_[c].tensor;
    return early_.data() + early_off_[t] + chunk_part_off_[c] * DTypeSize(specs_[t].grad_dtype);
  }

  const std::vector<TensorSpec>& specs_;
  const bool gpu_;
  FaultPlan* const faults_;
  cpu::HostDriver* driver_;
  layout::StateLayout layout_;
  Slab slab_, staging_, early_;
  std::vector<uint64_t> early_off_;  // per tensor: its gradients' offset in early_
  uint64_t early_bytes_ = 0;
  std::unique_ptr<StreamDevice> device_;
  StreamDevice::Event after_caller_;  // the early downloads wait for the caller's work so far
  std::unique_ptr<Pipeline> pipeline_;
  // The chunks, in backward order: chunks_[chunk_begin_[t] .. chunk_end_[t]) are tensor
  // t's; chunk_part_off_[c] is chunk c's first element within its tensor's part.
  std::vector<OffloadChunk> chunks_;
  std::vector<size_t> chunk_begin_, chunk_end_;
  std::vector<uint64_t> chunk_part_off_;
  // Tickets (kNoEvent: none): per tensor, its last upload (WaitParam) and its last early
  // download; per chunk, its early download.
  std::vector<Event> last_upload_, grad_ticket_;
  std::vector<Event> chunk_ticket_;
  // Speculative early start: the backup (the layout again) and the holding buffer of
  // parameters that do not upload from their own state.
  layout::StateLayout backup_;
  Slab backup_slab_, hold_slab_;
  std::vector<uint8_t> speculative_;  // per chunk: within speculative_host_bytes
  bool begun_ = false, commit_ = false, stopped_ = false;
  // Last: destroyed first, so its worker is joined before the chunks, slabs and the
  // device it uses go away.
  std::unique_ptr<Speculator> speculator_;
};

HostOffload::HostOffload(OffloadSetup s)
    : specs_(*s.specs),
      gpu_(s.gpu),
      faults_(s.config->faults.get()),
      driver_(s.driver),
      layout_(s.plan->cold),
      device_(std::move(s.device)) {
  const layout::MemoryPlan& plan = *s.plan;
  const OptimizerConfig& cfg = *s.config;
  const MemKind far = gpu_ ? MemKind::kPinned : MemKind::kHost;
  slab_ = Slab(far, layout_.bytes(), "offloaded optimizer state", faults_);
  layout_.Bind(slab_.data());
  staging_ = Slab(far, plan.staging_bytes, "offload pipeline staging slots", faults_);
  std::vector<void*> grad_slots, param_slots;
  for (uint64_t o : plan.grad_slot_off) grad_slots.push_back(staging_.data() + o);
  for (uint64_t o : plan.param_slot_off) param_slots.push_back(staging_.data() + o);
  pipeline_ = std::make_unique<Pipeline>(device_.get(), grad_slots, param_slots);
  after_caller_ = device_->NewEvent();
  early_off_ = plan.early_off;
  early_bytes_ = plan.early_bytes;

  // The chunks. Gradients arrive in backward order: the last registered tensor first.
  chunk_begin_.assign(specs_.size(), 0);
  chunk_end_.assign(specs_.size(), 0);
  for (size_t t = specs_.size(); t-- > 0;) {
    const TensorSpec& sp = specs_[t];
    const layout::Part& p = layout_.part(t);
    chunk_begin_[t] = chunk_end_[t] = chunks_.size();
    if (p.count == 0) continue;
    const size_t gsz = DTypeSize(sp.grad_dtype), psz = DTypeSize(sp.param_dtype);
    const MasterFormat master = (*s.formats)[t].master;
    const bool direct = layout::MasterAliases(master, sp.param_dtype);
    for (uint64_t off = 0; off < p.count; off += cfg.chunk_elements) {
      const uint64_t n = std::min<uint64_t>(cfg.chunk_elements, p.count - off);
      const uint64_t e = p.offset + off;  // element index in the tensor
      OffloadChunk c;
      c.tensor = t;
      c.device_grad = static_cast<const uint8_t*>(sp.grad) + e * gsz;
      c.device_param = static_cast<uint8_t*>(sp.param) + e * psz;
      c.grad_bytes = n * gsz;
      c.param_bytes = n * psz;
      c.span = SubSpan(p.state, off, n);
      c.span.grad_dtype = sp.grad_dtype;
      c.span.param_dtype = sp.param_dtype;
      if (direct)
        c.param_source = master == MasterFormat::kF32
                             ? static_cast<const void*>(c.span.master.f32)
                             : static_cast<const void*>(c.span.master.bf16);
      c.scalar_index = sp.group;
      chunks_.push_back(c);
      chunk_part_off_.push_back(off);
    }
    chunk_end_[t] = chunks_.size();
  }
  last_upload_.assign(specs_.size(), StreamDevice::kNoEvent);
  chunk_ticket_.assign(chunks_.size(), StreamDevice::kNoEvent);
  grad_ticket_.assign(specs_.size(), StreamDevice::kNoEvent);
  speculative_.assign(chunks_.size(), 0);
  // Gradient release: every host-computed gradient lands in the early-start buffer, from
  // the first step on (allocated now: the plan reported it).
  if (cfg.release_grads) AllocateEarlyBuffer();
  if (!cfg.speculative_early_start) return;

  // The speculation's memory (the plan reported it) and its worker. The backup holds the
  // chunks within speculative_host_bytes (Note [Host speculation budget]): per tensor a
  // prefix of its part.
  AllocateEarlyBuffer();
  backup_ = plan.cold_backup;
  backup_slab_ =
      Slab(MemKind::kHost, backup_.bytes(), "speculation backup of the offloaded state", faults_);
  backup_.Bind(backup_slab_.data());
  // Pinned in GPU mode: Step uploads the held parameters straight from it.
  hold_slab_ = Slab(far, plan.hold_bytes, "speculation parameter holding buffer", faults_);
  std::vector<StepSpan> backup;
  std::vector<void*> hold;
  std::vector<const void*> early;
  for (size_t c = 0; c < chunks_.size(); ++c) {
    const size_t t = chunks_[c].tensor;
    const uint64_t off = chunk_part_off_[c];
    early.push_back(EarlyGrad(c));
    if (off >= backup_.part(t).count) {  // beyond the budget: updated at Step only
      backup.push_back(StepSpan{});
      hold.push_back(nullptr);
      continue;
    }
    speculative_[c] = 1;
    StepSpan b = SubSpan(backup_.part(t).state, off, chunks_[c].span.n);
    b.grad_dtype = specs_[t].grad_dtype;
    b.param_dtype = specs_[t].param_dtype;
    backup.push_back(b);
    hold.push_back(plan.hold_off[t] == layout::kNoOffset
                       ? nullptr
                       : hold_slab_.data() + plan.hold_off[t] +
                             off * DTypeSize(specs_[t].param_dtype));
  }
  speculator_ =
      std::make_unique<Speculator>(&chunks_, std::move(backup), std::move(hold), std::move(early),
                                   device_.get(), cfg.host_threads, cfg.host_cpus);
}

HostOffload::~HostOffload() {
  // Mid-speculation: the worker finishes the chunk it is on (its download completes) and
  // drops the rest; nothing it used is freed before it is joined.
  speculator_.reset();
  device_->Drain();
}

void HostOffload::AllocateEarlyBuffer() {
  if (early_.size() > 0 || early_bytes_ == 0) return;
  early_ = Slab(gpu_ ? MemKind::kPinned : MemKind::kHost, early_bytes_,
                "early-start gradient buffer", faults_);
}

// The tensor's gradients go down chunk by chunk into the early-start buffer as soon as
// backward produced them; Step then finds them on the host. Between BeginStep and Step
// each chunk is also handed to the speculation worker.
//
// Note [A second GradReady]: under gradient accumulation the hook fires once per
// micro-batch, and only the last gradient is final. A second call for a tensor in one
// step therefore redoes its early work: the worker is waited for (it may be reading the
// early buffer of these chunks), the tensor's speculated chunks are restored from their
// backup, and the downloads are enqueued again; the download queue is FIFO and ordered
// after the compute stream, so the new gradient lands after the old one. The step then
// gives the bits it gives without early start.
void HostOffload::GradReady(size_t t, bool again, const std::vector<uint8_t>&,
                            const GradMark& mark) {
  if (layout_.part(t).count == 0) return;
  AllocateEarlyBuffer();
  if (again && begun_ && speculator_) {
    (void)speculator_->WaitIdle();  // a chunk's error stays recorded; Step reports it
    for (size_t c = chunk_begin_[t]; c < chunk_end_[t]; ++c)
      if (speculative_[c] != 0) speculator_->Forget(c);
  }
  // The downloads come after the gradient's ready mark (GPU mode), else after the
  // caller's work so far.
  if (mark.ready != nullptr) {
    device_->WaitForeign(Q::kDown, mark.ready);
  } else {
    device_->Record(after_caller_, Q::kCaller, At(chunk_begin_[t], 0, "gradient final"));
    device_->Wait(Q::kDown, after_caller_, At(chunk_begin_[t], 0, "early downloads wait"));
  }
  for (size_t c = chunk_begin_[t]; c < chunk_end_[t]; ++c) {
    // A retry after a failed enqueue skips the chunks already downloading.
    if (!again && chunk_ticket_[c] != StreamDevice::kNoEvent) continue;
    const OffloadChunk& ch = chunks_[c];
    device_->Copy(Q::kDown, const_cast<void*>(EarlyGrad(c)), ch.device_grad, ch.grad_bytes,
                  StreamDevice::CopyKind::kDown, At(c, ch.grad_bytes, "early gradient download"));
    chunk_ticket_[c] = device_->Ticket(Q::kDown);
    grad_ticket_[t] = chunk_ticket_[c];
    if (begun_ && speculator_ && !stopped_ && speculative_[c] != 0)
      speculator_->Enqueue(c, chunk_ticket_[c]);
  }
}

void HostOffload::BeginSpeculation(const std::vector<StepScalars>* scalars,
                                   const std::vector<uint32_t>* scalar_index,
                                   const std::vector<uint8_t>&) {
  for (OffloadChunk& c : chunks_) c.scalar_index = (*scalar_index)[c.tensor];
  if (speculator_) {
    speculator_->Begin(*scalars, pipeline_->last_upload());
    // Gradients marked ready before BeginStep are speculated on too.
    for (size_t c = 0; c < chunks_.size(); ++c)
      if (chunk_ticket_[c] != StreamDevice::kNoEvent && speculative_[c] != 0)
        speculator_->Enqueue(c, chunk_ticket_[c]);
  }
  begun_ = true;
  commit_ = stopped_ = false;
}

void HostOffload::EndEarlyStart() noexcept {
  if (begun_ && speculator_) {
    try {
      if (!commit_) speculator_->Cancel();
      speculator_->WaitIdle();
      if (!commit_) speculator_->Rollback();
    } catch (...) {
      // Rollback copies host memory only; WaitIdle and Cancel do not throw.
    }
    speculator_->End();
  }
  begun_ = commit_ = stopped_ = false;
  for (size_t c = 0; c < chunks_.size(); ++c) {
    chunk_ticket_[c] = StreamDevice::kNoEvent;
    chunks_[c].stepped = false;
    chunks_[c].host_param = nullptr;
  }
}

// Every host-computed chunk through the pipeline (gradient down, host kernels, parameter
// up), chunks already downloaded by early start from the early-start buffer, chunks
// committed by the speculation only uploaded.
void HostOffload::Launch(const StepWork& w) {
  const std::vector<uint32_t>& index = *w.scalar_index;
  for (size_t i = 0; i < chunks_.size(); ++i) {
    OffloadChunk& c = chunks_[i];
    c.host_grad = nullptr;
    c.skip = index[c.tensor] == kSkipScalarIndex;
    c.scalar_index = c.skip ? 0 : index[c.tensor];
    if (!c.skip && !c.stepped && chunk_ticket_[i] != StreamDevice::kNoEvent) {
      device_->Synchronize(chunk_ticket_[i]);
      c.host_grad = EarlyGrad(i);
    }
  }
  PipelineTimes pt;
  cpu::HostDriver* drv = driver_;
  pipeline_->Run(
      chunks_, w.scalars->data(),
      [drv](const StepScalars& s, const StepSpan& span) {
        const cpu::HostWork hw{&s, span};
        drv->Run(&hw, 1);
      },
      &last_upload_, &pt);
  w.times->d2h_ms = pt.d2h_ms;
  w.times->host_update_ms = pt.host_ms;
  w.times->h2d_ms = pt.h2d_ms;
  w.times->chunks = chunks_.size();
}

}  // namespace

std::unique_ptr<Executor> MakeHostOffload(OffloadSetup setup) {
  return std::make_unique<HostOffload>(std::move(setup));
}

}  // namespace tandem::offload
