// HostTransport: a Transport whose "device" is ordinary host memory; each queue is a
// worker thread doing memcpy in FIFO order. Used by host mode and by host-side tests of
// the pipeline: a copy that the FaultPlan fails (transport.h) is reported from Wait as
// Error(kCuda, "injected ..."), and SetDelayUs() slows every copy down to expose
// ordering bugs.
#pragma once

#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "offload/transport/transport.h"
#include "tandem/faults.h"

namespace tandem::offload {

class HostTransport : public Transport {
 public:
  // cpus: where the two copy threads run (empty: anywhere; validated by the caller, e.g.
  // OptimizerConfig::host_cpus through HostDriver). faults: asked once per enqueued copy
  // (null: none fails).
  explicit HostTransport(std::vector<int> cpus = {}, std::shared_ptr<FaultPlan> faults = nullptr);
  ~HostTransport() override;

  void DownloadsAfterComputeStream() override {}
  void DownloadsAfter(const void*) override {}
  Ticket Download(void* dst, const void* src, size_t bytes) override;
  Ticket Upload(void* dst, const void* src, size_t bytes) override;
  void Wait(Ticket t) override;
  bool Done(Ticket t) override;
  // There is no compute stream on the host: the caller itself must see the parameters
  // when Step returns, so this blocks until every upload landed (and reports a failure).
  void ComputeStreamAfterUploads() override;
  void StreamWaitFor(Ticket t, void*) override { Wait(t); }
  void Drain() noexcept override;
  double DownloadBusyMs() override;
  double UploadBusyMs() override;
  void ResetTimes() override;

  // Test hooks.
  void SetDelayUs(int us) { delay_us_ = us; }
  uint64_t copies_enqueued() const { return enqueued_; }

 private:
  void StopWorkers() noexcept;  // stops and joins the copy threads that run
  struct Copy {
    Ticket ticket;
    void* dst;
    const void* src;
    size_t bytes;
    bool fail;
  };
  struct Queue {
    std::deque<Copy> pending;
    Ticket done_upto = 0;     // every ticket of this queue <= done_upto has finished
    Ticket failed = 0;        // first failed ticket of this queue (0: none)
    double busy_ms = 0;
    std::thread worker;
  };
  // Note [Tickets name their queue]: ticket = (sequence << 1) | is_upload, so no table
  // of owners grows with the number of copies; within a queue tickets increase.
  static bool IsUpload(Ticket t) { return (t & 1u) != 0; }
  Ticket Enqueue(Queue& q, void* dst, const void* src, size_t bytes, bool upload);
  void Work(Queue& q);

  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  Queue down_, up_;
  uint64_t next_seq_ = 1;
  uint64_t enqueued_ = 0;
  Ticket last_upload_ = 0;
  int delay_us_ = 0;
  std::vector<int> cpus_;
  std::shared_ptr<FaultPlan> faults_;
};

}  // namespace tandem::offload
