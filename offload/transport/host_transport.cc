#include "offload/transport/host_transport.h"

#include <chrono>
#include <cstring>
#include <utility>

#include "cpu_simd/cpu_pinning.h"
#include "engine/elapsed.h"
#include "tandem/error.h"

namespace tandem::offload {

HostTransport::HostTransport(std::vector<int> cpus, std::shared_ptr<FaultPlan> faults)
    : cpus_(std::move(cpus)), faults_(std::move(faults)) {
  down_.worker = std::thread([this] { Work(down_); });
  try {
    up_.worker = std::thread([this] { Work(up_); });
  } catch (...) {  // (a thread that cannot start: the first must not outlive *this)
    StopWorkers();
    throw;
  }
}

HostTransport::~HostTransport() { StopWorkers(); }

void HostTransport::StopWorkers() noexcept {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  for (Queue* q : {&down_, &up_})
    if (q->worker.joinable()) q->worker.join();
}

Ticket HostTransport::Enqueue(Queue& q, void* dst, const void* src, size_t bytes, bool upload) {
  std::lock_guard<std::mutex> lock(mu_);
  const Ticket t = (next_seq_++ << 1) | (upload ? 1u : 0u);
  ++enqueued_;
  const bool fail = faults_ != nullptr && faults_->CopyFails();
  q.pending.push_back({t, dst, src, bytes, fail});
  cv_.notify_all();
  return t;
}

Ticket HostTransport::Download(void* dst, const void* src, size_t bytes) {
  return Enqueue(down_, dst, src, bytes, false);
}
Ticket HostTransport::Upload(void* dst, const void* src, size_t bytes) {
  const Ticket t = Enqueue(up_, dst, src, bytes, true);
  std::lock_guard<std::mutex> lock(mu_);
  last_upload_ = t;
  return t;
}

void HostTransport::Work(Queue& q) {
  try {
    cpu::PinThisThread(cpus_);  // the set was validated: not expected to throw
  } catch (...) {
  }
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    cv_.wait(lock, [&] { return stop_ || !q.pending.empty(); });
    if (q.pending.empty()) return;  // stop_ with nothing left
    const Copy c = q.pending.front();
    const int delay = delay_us_;
    lock.unlock();
    const auto t0 = std::chrono::steady_clock::now();
    if (delay > 0) std::this_thread::sleep_for(std::chrono::microseconds(delay));
    cpu::RunWorkProbe();
    if (!c.fail && c.bytes > 0) std::memcpy(c.dst, c.src, c.bytes);
    const auto t1 = std::chrono::steady_clock::now();
    lock.lock();
    q.pending.pop_front();
    q.busy_ms += MsBetween(t0, t1);
    if (c.fail && q.failed == 0) q.failed = c.ticket;
    q.done_upto = c.ticket;
    cv_.notify_all();
  }
}

void HostTransport::Wait(Ticket t) {
  std::unique_lock<std::mutex> lock(mu_);
  if (t == 0 || (t >> 1) >= next_seq_)
    throw Error(ErrorKind::kInternal, "HostTransport::Wait: unknown ticket " + std::to_string(t));
  Queue& q = IsUpload(t) ? up_ : down_;
  cv_.wait(lock, [&] { return q.done_upto >= t; });
  if (q.failed != 0 && q.failed <= t) {
    const Ticket f = q.failed;
    q.failed = 0;  // reported once; the queue is usable again
    throw Error(ErrorKind::kCuda, std::string("injected failure of ") +
                                      (IsUpload(t) ? "upload" : "download") + " copy " +
                                      std::to_string(f));
  }
}

bool HostTransport::Done(Ticket t) {
  if (t == 0) return true;
  std::lock_guard<std::mutex> lock(mu_);
  return (IsUpload(t) ? up_ : down_).done_upto >= t;
}

void HostTransport::ComputeStreamAfterUploads() {
  Ticket last = 0;
  {
    std::lock_guard<std::mutex> lock(mu_);
    last = last_upload_;
  }
  if (last != 0) Wait(last);
}

void HostTransport::Drain() noexcept {
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait(lock, [&] { return down_.pending.empty() && up_.pending.empty(); });
  down_.failed = up_.failed = 0;
}

double HostTransport::DownloadBusyMs() {
  std::lock_guard<std::mutex> lock(mu_);
  return down_.busy_ms;
}
double HostTransport::UploadBusyMs() {
  std::lock_guard<std::mutex> lock(mu_);
  return up_.busy_ms;
}
void HostTransport::ResetTimes() {
  std::lock_guard<std::mutex> lock(mu_);
  down_.busy_ms = up_.busy_ms = 0;
}

}  // namespace tandem::offload
