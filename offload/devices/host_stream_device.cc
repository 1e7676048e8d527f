// The host StreamDevice (offload/devices/stream_device.h): "device" memory is host
// memory; each queue but kCaller is a thread that runs its operations in FIFO order
// (memcpy, host calls, the host kernels through the optimizer's HostDriver), events are
// counters that a queue's marker operation raises when it is reached, and a Wait is an
// operation that blocks its queue until the event is. kCaller's operations happen on the
// calling thread. This is what host mode streams through, and what lets CI run the GPU
// stream executor's order with the queues really running at once.
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

#include "cpu_simd/cpu_pinning.h"
#include "cpu_simd/host_kernels.h"
#include "engine/elapsed.h"
#include "offload/devices/stream_device.h"

namespace tandem::offload {
namespace {

using Clock = std::chrono::steady_clock;

class HostStreamDevice final : public StreamDevice {
 public:
  HostStreamDevice(cpu::HostDriver* driver, std::vector<int> cpus)
      : driver_(driver), cpus_(std::move(cpus)) {
    try {
      for (Lane& lane : lanes_) lane.worker = std::thread([this, &lane] { Work(lane); });
    } catch (...) {  // a thread that cannot start: those that did must not outlive *this
      Stop();
      throw;
    }
  }
  ~HostStreamDevice() override { Stop(); }

  Event NewEvent() override {
    std::lock_guard<std::mutex> lock(mu_);
    events_.emplace_back();
    return static_cast<Event>(events_.size() - 1);
  }

  void Record(Event e, Queue q, const What&) override {
    std::unique_lock<std::mutex> lock(mu_);
    const uint64_t gen = ++events_[e].recorded;
    if (q == Queue::kCaller) {
      Reach(e, gen);
      return;
    }
    Push(q, [this, e, gen] {
      std::lock_guard<std::mutex> l(mu_);
      Reach(e, gen);
    });
  }

  void Wait(Queue q, Event e, const What&) override {
    std::unique_lock<std::mutex> lock(mu_);
    const uint64_t target = events_[e].recorded;
    if (target == 0) return;  // never recorded: nothing to wait for
    if (q == Queue::kCaller) {
      cv_.wait(lock, [&] { return events_[e].reached >= target; });
      return;
    }
    Push(q, [this, e, target] {
      std::unique_lock<std::mutex> l(mu_);
      cv_.wait(l, [&] { return events_[e].reached >= target; });
    });
  }

  void WaitForeign(Queue, const void*) override {}  // none on the host

  bool Query(Event e) override {
    std::lock_guard<std::mutex> lock(mu_);
    return events_[e].reached >= events_[e].recorded;
  }

  void Synchronize(Event e) override {
    std::unique_lock<std::mutex> lock(mu_);
    const uint64_t target = events_[e].recorded;
    cv_.wait(lock, [&] { return events_[e].reached >= target; });
    RethrowLocked();
  }

  void SynchronizeAll() override {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [&] {
      for (const Lane& lane : lanes_)
        if (!lane.ops.empty() || lane.busy) return false;
      return true;
    });
    RethrowLocked();
  }

  double ElapsedMs(Event from, Event to) override {
    std::lock_guard<std::mutex> lock(mu_);
    return MsBetween(events_[from].at, events_[to].at);
  }

  void StreamWait(void*, Event e) const override {  // no foreign streams on the host: wait
    std::unique_lock<std::mutex> lock(mu_);
    const uint64_t target = events_[e].recorded;
    cv_.wait(lock, [&] { return events_[e].reached >= target; });
  }

  void Copy(Queue q, void* dst, const void* src, uint64_t bytes, CopyKind, const What&) override {
    Enqueue(q, [dst, src, bytes] { std::memcpy(dst, src, bytes); });
  }

  void HostCall(Queue q, void (*fn)(void*), void* arg, const What&) override {
    Enqueue(q, [fn, arg] { fn(arg); });
  }

  size_t AddProgram(Algorithm, const std::vector<StepSpan>& spans,
                    std::vector<uint32_t> span_tensor, std::vector<uint64_t> grad_offset,
                    std::vector<const void*> slot_grad) override {
    programs_.push_back(
        {spans, std::move(span_tensor), std::move(grad_offset), std::move(slot_grad)});
    return programs_.size() - 1;
  }
  uint64_t program_bytes() const override { return 0; }

  void Run(Queue q, size_t program, const std::vector<StepScalars>& scalars,
           const std::vector<uint32_t>& scalar_index, const What&) override {
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

  void SetGrad(size_t t, const void* grad) override {
    for (Program& p : programs_) PointAt(p, t, grad, false);
  }
  void SetSlotGrads(size_t t) override {
    for (Program& p : programs_) PointAt(p, t, nullptr, true);
  }
  void SetProgramGrad(size_t program, size_t t, const void* grad) override {
    PointAt(programs_.at(program), t, grad, grad == nullptr);
  }

 private:
  struct Lane {
    std::deque<std::function<void()>> ops;
    bool busy = false;
    std::thread worker;
  };
  struct EventState {
    uint64_t recorded = 0, reached = 0;
    Clock::time_point at{};
  };
  struct Program {
    std::vector<StepSpan> spans;
    std::vector<uint32_t> span_tensor;
    std::vector<uint64_t> grad_offset;
    std::vector<const void*> slot_grad;
  };

  // Program p's spans of tensor t read `grad` + their offset, or (slot) their slot_grad.
  static void PointAt(Program& p, size_t t, const void* grad, bool slot) {
    for (size_t i = 0; i < p.spans.size(); ++i) {
      if (p.span_tensor[i] != t) continue;
      if (!slot)
        p.spans[i].grad = static_cast<const uint8_t*>(grad) + p.grad_offset[i];
      else if (i < p.slot_grad.size())
        p.spans[i].grad = p.slot_grad[i];
    }
  }

  // mu_ held.
  void Reach(Event e, uint64_t gen) {
    EventState& s = events_[e];
    if (gen > s.reached) {
      s.reached = gen;
      s.at = Clock::now();
    }
    cv_.notify_all();
  }
  void Push(Queue q, std::function<void()> op) {  // mu_ held
    lanes_[static_cast<int>(q) - 1].ops.push_back(std::move(op));
    cv_.notify_all();
  }
  void Enqueue(Queue q, std::function<void()> op) {
    if (q == Queue::kCaller) {
      op();
      return;
    }
    std::lock_guard<std::mutex> lock(mu_);
    Push(q, std::move(op));
  }
  void RethrowLocked() {  // mu_ held: reports an operation's failure once
    if (!error_) return;
    std::exception_ptr e = std::exchange(error_, nullptr);
    std::rethrow_exception(e);
  }

  void Work(Lane& lane) {
    try {
      cpu::PinThisThread(cpus_);  // validated by the optimizer: not expected to throw
    } catch (...) {
    }
    std::unique_lock<std::mutex> lock(mu_);
    for (;;) {
      cv_.wait(lock, [&] { return stop_ || !lane.ops.empty(); });
      if (lane.ops.empty()) return;  // stop_ with nothing left
      std::function<void()> op = std::move(lane.ops.front());
      lane.ops.pop_front();
      lane.busy = true;
      lock.unlock();
      std::exception_ptr failed;
      try {
        cpu::RunWorkProbe();
        op();
      } catch (...) {
        failed = std::current_exception();
      }
      lock.lock();
      lane.busy = false;
      if (failed && !error_) error_ = failed;
      cv_.notify_all();
    }
  }

  void Stop() noexcept {
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [&] {  // everything enqueued runs first: it may write the state
        for (const Lane& lane : lanes_)
          if (!lane.ops.empty() || lane.busy) return false;
        return true;
      });
      stop_ = true;
    }
    cv_.notify_all();
    for (Lane& lane : lanes_)
      if (lane.worker.joinable()) lane.worker.join();
  }

  cpu::HostDriver* driver_;
  std::vector<int> cpus_;
  mutable std::mutex mu_;
  mutable std::condition_variable cv_;
  Lane lanes_[4];  // kUp, kRun, kDown, kGrads
  std::vector<EventState> events_;
  std::exception_ptr error_;
  bool stop_ = false;
  std::vector<Program> programs_;
};

}  // namespace

std::unique_ptr<StreamDevice> MakeHostStreamDevice(cpu::HostDriver* driver, std::vector<int> cpus) {
  return std::make_unique<HostStreamDevice>(driver, std::move(cpus));
}

std::string StreamDevice::What::Text() const {
  return "(streamed chunk " + std::to_string(chunk) + " of " + std::to_string(chunks) + ", " +
         std::to_string(bytes) + " bytes: " + what + ")";
}

}  // namespace tandem::offload
