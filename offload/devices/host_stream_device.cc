// The host StreamDevice (offload/devices/host_stream_device.h).
#include "offload/devices/host_stream_device.h"

#include <cstring>
#include <string>
#include <utility>

#include "cpu_simd/cpu_pinning.h"
#include "cpu_simd/host_kernels.h"
#include "engine/elapsed.h"
#include "tandem/error.h"

namespace tandem::offload {
namespace {
// Ids: NewEvent's count from 1 (kNoEvent is 0); a ticket's is its ring index with this
// bit set.
constexpr StreamDevice::Event kTicketBit = StreamDevice::Event{1} << 31;

const char* KindName(StreamDevice::CopyKind kind) {
  switch (kind) {
    case StreamDevice::CopyKind::kUp:
      return "upload";
    case StreamDevice::CopyKind::kDown:
      return "download";
    case StreamDevice::CopyKind::kDevice:
      break;
  }
  return "device";
}
}  // namespace

HostStreamDevice::HostStreamDevice(cpu::HostDriver* driver, std::vector<int> cpus,
                                   const Queues& queues, std::shared_ptr<FaultPlan> faults)
    : driver_(driver), cpus_(std::move(cpus)), faults_(std::move(faults)) {
  for (Queue q : queues)
    if (q != Queue::kCaller) lanes_[static_cast<int>(q) - 1].served = true;
  try {
    for (Lane& lane : lanes_)
      if (lane.served) lane.worker = std::thread([this, &lane] { Work(lane); });
  } catch (...) {  // a thread that cannot start: those that did must not outlive *this
    Stop();
    throw;
  }
}

HostStreamDevice::~HostStreamDevice() { Stop(); }

StreamDevice::Event HostStreamDevice::NewEvent() {
  std::lock_guard<std::mutex> lock(mu_);
  events_.emplace_back();
  return static_cast<Event>(events_.size());
}

HostStreamDevice::EventState& HostStreamDevice::State(Event e) {
  return (e & kTicketBit) != 0 ? tickets_[e & ~kTicketBit] : events_[e - 1];
}
const HostStreamDevice::EventState& HostStreamDevice::State(Event e) const {
  return (e & kTicketBit) != 0 ? tickets_[e & ~kTicketBit] : events_[e - 1];
}

void HostStreamDevice::Reach(Event e, uint64_t gen) {
  EventState& s = State(e);
  if (gen > s.reached) {
    s.reached = gen;
    s.at = Clock::now();
  }
  cv_.notify_all();
}

uint64_t HostStreamDevice::Push(Queue q, std::function<void()> fn) {
  Lane& lane = lanes_[static_cast<int>(q) - 1];
  if (!lane.served)
    throw Error(ErrorKind::kInternal, "host stream device: queue " +
                                          std::to_string(static_cast<int>(q)) + " is not served");
  const uint64_t seq = ++lane.pushed;
  lane.ops.push_back({seq, std::move(fn)});
  cv_.notify_all();
  return seq;
}

void HostStreamDevice::RecordLocked(Event e, Queue q) {
  const uint64_t gen = State(e).recorded + 1;
  if (q == Queue::kCaller) {
    State(e).recorded = gen;
    State(e).lane = -1;
    Reach(e, gen);
    return;
  }
  const uint64_t seq = Push(q, [this, e, gen] {
    std::lock_guard<std::mutex> l(mu_);
    Reach(e, gen);
  });
  EventState& s = State(e);
  s.recorded = gen;
  s.lane = static_cast<int>(q) - 1;
  s.seq = seq;
}

void HostStreamDevice::Record(Event e, Queue q, const What&) {
  std::lock_guard<std::mutex> lock(mu_);
  RecordLocked(e, q);
}

StreamDevice::Event HostStreamDevice::Ticket(Queue q) {
  std::lock_guard<std::mutex> lock(mu_);
  const uint64_t index = next_ticket_ % kTicketRing;
  if (index == tickets_.size()) tickets_.emplace_back();  // the ring grows to its size
  const Event e = kTicketBit | static_cast<Event>(index);
  RecordLocked(e, q);
  ++next_ticket_;
  return e;
}

void HostStreamDevice::WaitReached(std::unique_lock<std::mutex>& lock, Event e) const {
  const uint64_t target = State(e).recorded;
  cv_.wait(lock, [&] { return State(e).reached >= target; });
}

void HostStreamDevice::RethrowFailureLocked(Event e) {
  const EventState& s = State(e);
  if (s.lane < 0) return;
  Lane& lane = lanes_[s.lane];
  if (!lane.failure || lane.failed_at > s.seq) return;
  std::exception_ptr f = std::exchange(lane.failure, nullptr);
  lane.failed_at = 0;  // reported once; the queue goes on
  std::rethrow_exception(f);
}

void HostStreamDevice::RethrowAnyLocked() {
  std::exception_ptr first;
  for (Lane& lane : lanes_) {
    if (lane.failure && !first) first = lane.failure;
    lane.failure = nullptr;
    lane.failed_at = 0;
  }
  if (first) std::rethrow_exception(first);
}

bool HostStreamDevice::IdleLocked() const {
  for (const Lane& lane : lanes_)
    if (!lane.ops.empty() || lane.busy) return false;
  return true;
}

void HostStreamDevice::Wait(Queue q, Event e, const What&) {
  if (e == kNoEvent) return;
  std::unique_lock<std::mutex> lock(mu_);
  const uint64_t target = State(e).recorded;
  if (target == 0) return;  // never recorded: nothing to wait for
  if (q == Queue::kCaller) {
    WaitReached(lock, e);
    RethrowFailureLocked(e);
    return;
  }
  Push(q, [this, e, target] {
    std::unique_lock<std::mutex> l(mu_);
    cv_.wait(l, [&] { return State(e).reached >= target; });
  });
}

bool HostStreamDevice::Query(Event e) {
  if (e == kNoEvent) return true;
  std::lock_guard<std::mutex> lock(mu_);
  return State(e).reached >= State(e).recorded;
}

void HostStreamDevice::Synchronize(Event e) {
  if (e == kNoEvent) return;
  std::unique_lock<std::mutex> lock(mu_);
  WaitReached(lock, e);
  RethrowFailureLocked(e);
}

void HostStreamDevice::SynchronizeAll() {
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait(lock, [&] { return IdleLocked(); });
  RethrowAnyLocked();
}

double HostStreamDevice::ElapsedMs(Event from, Event to) {
  if (from == kNoEvent || to == kNoEvent) return 0;
  std::lock_guard<std::mutex> lock(mu_);
  return MsBetween(State(from).at, State(to).at);
}

void HostStreamDevice::StreamWait(void*, Event e) const {
  if (e == kNoEvent) return;
  std::unique_lock<std::mutex> lock(mu_);
  WaitReached(lock, e);
}

void HostStreamDevice::Copy(Queue q, void* dst, const void* src, uint64_t bytes, CopyKind kind,
                            const What& w) {
  std::string failure;
  if (faults_ != nullptr && faults_->CopyFails())
    failure = std::string("injected failure of ") + KindName(kind) + " copy " + w.Text();
  int delay = 0;
  {
    std::lock_guard<std::mutex> lock(mu_);
    ++copies_;
    delay = delay_us_;
  }
  Enqueue(q, [dst, src, bytes, delay, failure = std::move(failure)] {
    if (delay > 0) std::this_thread::sleep_for(std::chrono::microseconds(delay));
    if (!failure.empty()) throw Error(ErrorKind::kCuda, failure);  // the copy does not run
    if (bytes > 0) std::memcpy(dst, src, bytes);
  });
}

void HostStreamDevice::HostCall(Queue q, void (*fn)(void*), void* arg, const What&) {
  Enqueue(q, [fn, arg] { fn(arg); });
}

size_t HostStreamDevice::AddProgram(Algorithm, const std::vector<StepSpan>& spans,
                                    std::vector<uint32_t> span_tensor,
                                    std::vector<uint64_t> grad_offset,
                                    std::vector<const void*> slot_grad) {
  programs_.push_back(
      {spans, std::move(span_tensor), std::move(grad_offset), std::move(slot_grad)});
  return programs_.size() - 1;
}

void HostStreamDevice::Run(Queue q, size_t program, const std::vector<StepScalars>& scalars,
                           const std::vector<uint32_t>& scalar_index, const What&) {
  // The work is taken now, by value: the spans may be pointed elsewhere (SetGrad) and
  // the scalars reused before the queue reaches it.
  struct Work {
    std::vector<StepScalars> scalars;
    std::vector<cpu::HostWork> items;
  };
  auto work = std::make_shared<Work>();
  work->scalars = scalars;
  const Program& p = programs_[program];
  for (size_t i = 0; i < p.spans.size(); ++i) {
    const uint32_t k = scalar_index[p.span_tensor[i]];
    if (k != kSkipScalarIndex) work->items.push_back({&work->scalars[k], p.spans[i]});
  }
  cpu::HostDriver* driver = driver_;
  Enqueue(q, [driver, work] { driver->Run(work->items.data(), work->items.size()); });
}

void HostStreamDevice::PointAt(Program& p, size_t t, const void* grad, bool slot) {
  for (size_t i = 0; i < p.spans.size(); ++i) {
    if (p.span_tensor[i] != t) continue;
    if (!slot)
      p.spans[i].grad = static_cast<const uint8_t*>(grad) + p.grad_offset[i];
    else if (i < p.slot_grad.size())
      p.spans[i].grad = p.slot_grad[i];
  }
}

void HostStreamDevice::SetGrad(size_t t, const void* grad) {
  for (Program& p : programs_) PointAt(p, t, grad, false);
}
void HostStreamDevice::SetSlotGrads(size_t t) {
  for (Program& p : programs_) PointAt(p, t, nullptr, true);
}
void HostStreamDevice::SetProgramGrad(size_t program, size_t t, const void* grad) {
  PointAt(programs_.at(program), t, grad, grad == nullptr);
}

void HostStreamDevice::SetDelayUs(int us) {
  std::lock_guard<std::mutex> lock(mu_);
  delay_us_ = us;
}
uint64_t HostStreamDevice::copies_enqueued() const {
  std::lock_guard<std::mutex> lock(mu_);
  return copies_;
}

void HostStreamDevice::Enqueue(Queue q, std::function<void()> fn) {
  if (q == Queue::kCaller) {
    fn();
    return;
  }
  std::lock_guard<std::mutex> lock(mu_);
  Push(q, std::move(fn));
}

void HostStreamDevice::Work(Lane& lane) {
  try {
    cpu::PinThisThread(cpus_);  // validated by the optimizer: not expected to throw
  } catch (...) {
  }
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    cv_.wait(lock, [&] { return stop_ || !lane.ops.empty(); });
    if (lane.ops.empty()) return;  // stop_ with nothing left
    Op op = std::move(lane.ops.front());
    lane.ops.pop_front();
    lane.busy = true;
    lock.unlock();
    std::exception_ptr failed;
    try {
      cpu::RunWorkProbe();
      op.fn();
    } catch (...) {
      failed = std::current_exception();
    }
    lock.lock();
    lane.busy = false;
    if (failed && !lane.failure) {
      lane.failure = failed;
      lane.failed_at = op.seq;
    }
    cv_.notify_all();
  }
}

void HostStreamDevice::Stop() noexcept {
  {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [&] { return IdleLocked(); });  // everything enqueued runs first: it may
    stop_ = true;                                  // write the state
  }
  cv_.notify_all();
  for (Lane& lane : lanes_)
    if (lane.worker.joinable()) lane.worker.join();
}

std::unique_ptr<StreamDevice> MakeHostStreamDevice(cpu::HostDriver* driver, std::vector<int> cpus,
                                                   const Queues& queues,
                                                   std::shared_ptr<FaultPlan> faults) {
  return std::make_unique<HostStreamDevice>(driver, std::move(cpus), queues, std::move(faults));
}

}  // namespace tandem::offload
