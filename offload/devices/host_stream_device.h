// The host StreamDevice (offload/devices/stream_device.h): "device" memory is host
// memory; each queue it serves but kCaller is a thread that runs its operations in FIFO
// order (memcpy, host calls, the host kernels through the optimizer's HostDriver),
// events are counters that a queue's marker operation raises when it is reached, and a
// Wait is an operation that blocks its queue until the event is. kCaller's operations
// happen on the calling thread. Host mode streams and runs the offload pipeline through
// it, and CI runs the GPU's streaming, pipeline and speculation orders on it with the
// queues really running at once.
//
// Failures: an operation that throws while it runs (a host kernel refusing its span, a
// copy the FaultPlan fails) is kept, first one per queue, with its place in the queue,
// and reported as stream_device.h says. Test hooks: SetDelayUs() slows every copy down
// to expose ordering bugs; copies_enqueued() counts the copies.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "offload/devices/stream_device.h"

namespace tandem::offload {

class HostStreamDevice final : public StreamDevice {
 public:
  // cpus: where the queues' threads run (empty: anywhere); driver: the host kernels
  // (outlives the device; null when it runs no program); faults: asked once per Copy
  // (null: none fails).
  HostStreamDevice(cpu::HostDriver* driver, std::vector<int> cpus,
                   const Queues& queues = kStreamQueues,
                   std::shared_ptr<FaultPlan> faults = nullptr);
  ~HostStreamDevice() override;

  Event NewEvent() override;
  void Record(Event e, Queue q, const What& w) override;
  Event Ticket(Queue q) override;
  void Wait(Queue q, Event e, const What& w) override;
  void WaitForeign(Queue, const void*) override {}  // none on the host
  bool Query(Event e) override;
  void Synchronize(Event e) override;
  void SynchronizeAll() override;
  double ElapsedMs(Event from, Event to) override;
  void StreamWait(void* stream, Event e) const override;  // no foreign streams: waits
  void Copy(Queue q, void* dst, const void* src, uint64_t bytes, CopyKind kind,
            const What& w) override;
  void HostCall(Queue q, void (*fn)(void*), void* arg, const What& w) override;
  size_t AddProgram(Algorithm algo, const std::vector<StepSpan>& spans,
                    std::vector<uint32_t> span_tensor, std::vector<uint64_t> grad_offset,
                    std::vector<const void*> slot_grad) override;
  uint64_t program_bytes() const override { return 0; }
  void Run(Queue q, size_t program, const std::vector<StepScalars>& scalars,
           const std::vector<uint32_t>& scalar_index, const What& w) override;
  void SetGrad(size_t t, const void* grad) override;
  void SetSlotGrads(size_t t) override;
  void SetProgramGrad(size_t program, size_t t, const void* grad) override;

  // Test hooks.
  void SetDelayUs(int us);
  uint64_t copies_enqueued() const;

 private:
  using Clock = std::chrono::steady_clock;
  static constexpr int kLanes = 4;  // kUp, kRun, kDown, kGrads
  struct Op {
    uint64_t seq;  // its place in its lane, from 1
    std::function<void()> fn;
  };
  struct Lane {
    bool served = false;
    std::deque<Op> ops;
    uint64_t pushed = 0;
    bool busy = false;
    // The first failure not reported yet, and its op's place (0: none).
    std::exception_ptr failure;
    uint64_t failed_at = 0;
    std::thread worker;
  };
  struct EventState {
    uint64_t recorded = 0, reached = 0;
    Clock::time_point at{};
    int lane = -1;     // where its last Record was enqueued (-1: kCaller, or never)
    uint64_t seq = 0;  // the marker's place in that lane
  };
  struct Program {
    std::vector<StepSpan> spans;
    std::vector<uint32_t> span_tensor;
    std::vector<uint64_t> grad_offset;
    std::vector<const void*> slot_grad;
  };

  // Program p's spans of tensor t read `grad` + their offset, or (slot) their slot_grad.
  static void PointAt(Program& p, size_t t, const void* grad, bool slot);
  // mu_ held in each.
  EventState& State(Event e);
  const EventState& State(Event e) const;
  void RecordLocked(Event e, Queue q);
  void Reach(Event e, uint64_t gen);
  uint64_t Push(Queue q, std::function<void()> fn);
  void WaitReached(std::unique_lock<std::mutex>& lock, Event e) const;
  void RethrowFailureLocked(Event e);  // e's queue's failure before e, once
  void RethrowAnyLocked();             // every queue's failures: the first, once
  bool IdleLocked() const;

  void Enqueue(Queue q, std::function<void()> fn);
  void Work(Lane& lane);
  void Stop() noexcept;

  cpu::HostDriver* driver_;
  std::vector<int> cpus_;
  std::shared_ptr<FaultPlan> faults_;
  mutable std::mutex mu_;
  mutable std::condition_variable cv_;
  Lane lanes_[kLanes];
  std::vector<EventState> events_, tickets_;
  uint64_t next_ticket_ = 0;
  uint64_t copies_ = 0;
  int delay_us_ = 0;
  bool stop_ = false;
  std::vector<Program> programs_;
};

}  // namespace tandem::offload
