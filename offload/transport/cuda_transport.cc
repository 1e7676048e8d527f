#include "offload/transport/cuda_transport.h"

#include <string>
#include <utility>

#include "cuda/cuda_check.h"

namespace tandem::offload {
namespace {
// Copies of one step that can be timed; older tickets' events are reused (a Wait on a
// ticket that old waits for a newer copy of the same queue, which is conservative).
constexpr size_t kRing = 1 << 14;
std::string Ctx(Ticket t, size_t bytes, bool up) {
  return std::string(up ? "upload" : "download") + " copy " + std::to_string(t) + " of " +
         std::to_string(bytes) + " bytes";
}
}  // namespace

CudaTransport::CudaTransport(cudaStream_t compute, std::shared_ptr<FaultPlan> faults)
    : compute_(compute), ring_(kRing), faults_(std::move(faults)) {
  TANDEM_CUDA(cudaStreamCreateWithFlags(&down_, cudaStreamNonBlocking), "(download stream)");
  TANDEM_CUDA(cudaStreamCreateWithFlags(&up_, cudaStreamNonBlocking), "(upload stream)");
  TANDEM_CUDA(cudaEventCreateWithFlags(&fence_, cudaEventDisableTiming), "(fence event)");
}

CudaTransport::~CudaTransport() {
  Drain();
  for (Copy& c : ring_) {
    if (c.start) cudaEventDestroy(c.start);
    if (c.end) cudaEventDestroy(c.end);
  }
  cudaEventDestroy(fence_);
  cudaStreamDestroy(down_);
  cudaStreamDestroy(up_);
}

void CudaTransport::DownloadsAfterComputeStream() {
  std::lock_guard<std::mutex> lock(mu_);
  TANDEM_CUDA(cudaEventRecord(fence_, compute_), "(gradients-ready fence)");
  TANDEM_CUDA(cudaStreamWaitEvent(down_, fence_, 0), "(download stream waits for gradients)");
}

void CudaTransport::DownloadsAfter(const void* ready) {
  if (ready == nullptr) return DownloadsAfterComputeStream();
  std::lock_guard<std::mutex> lock(mu_);
  TANDEM_CUDA(cudaStreamWaitEvent(down_, static_cast<cudaEvent_t>(const_cast<void*>(ready)), 0),
              "(download stream waits for the gradient's producer)");
}

Ticket CudaTransport::Enqueue(bool upload, void* dst, const void* src, size_t bytes) {
  std::lock_guard<std::mutex> lock(mu_);
  const Ticket t = next_++;
  Copy& c = Slot(t);
  const std::string ctx = Ctx(t, bytes, upload);
  if (faults_ != nullptr && faults_->CopyFails())
    throw Error(ErrorKind::kCuda, "injected failure of " + ctx);
  if (c.start == nullptr) {
    TANDEM_CUDA(cudaEventCreate(&c.start), ctx);
    TANDEM_CUDA(cudaEventCreate(&c.end), ctx);
  }
  c.upload = upload;
  cudaStream_t s = upload ? up_ : down_;
  TANDEM_CUDA(cudaEventRecord(c.start, s), ctx);
  TANDEM_CUDA(cudaMemcpyAsync(dst, src, bytes,
                              upload ? cudaMemcpyHostToDevice : cudaMemcpyDeviceToHost, s),
              ctx);
  TANDEM_CUDA(cudaEventRecord(c.end, s), ctx);
  return t;
}

Ticket CudaTransport::Download(void* dst, const void* src, size_t bytes) {
  return Enqueue(false, dst, src, bytes);
}
Ticket CudaTransport::Upload(void* dst, const void* src, size_t bytes) {
  return Enqueue(true, dst, src, bytes);
}

void CudaTransport::Wait(Ticket t) {
  cudaEvent_t end = nullptr;
  {
    std::lock_guard<std::mutex> lock(mu_);
    end = Slot(t).end;
  }
  TANDEM_CUDA(cudaEventSynchronize(end), "waiting for copy " + std::to_string(t));
}

// A ticket older than the ring names a newer copy's event: conservative (that copy ends
// later on the same stream).
bool CudaTransport::Done(Ticket t) {
  if (t == 0) return true;
  cudaEvent_t end = nullptr;
  {
    std::lock_guard<std::mutex> lock(mu_);
    end = Slot(t).end;
  }
  const cudaError_t q = cudaEventQuery(end);
  if (q == cudaErrorNotReady) return false;
  if (q != cudaSuccess) cudaGetLastError();  // a failed copy: no longer reading; Wait reports it
  return true;
}

void CudaTransport::ComputeStreamAfterUploads() {
  std::lock_guard<std::mutex> lock(mu_);
  TANDEM_CUDA(cudaEventRecord(fence_, up_), "(uploads-done fence)");
  TANDEM_CUDA(cudaStreamWaitEvent(compute_, fence_, 0), "(compute stream waits for uploads)");
}

void CudaTransport::StreamWaitFor(Ticket t, void* stream) {
  std::lock_guard<std::mutex> lock(mu_);
  TANDEM_CUDA(cudaStreamWaitEvent(static_cast<cudaStream_t>(stream), Slot(t).end, 0),
              "(stream waits for copy " + std::to_string(t) + ")");
}

void CudaTransport::Drain() noexcept {
  cudaStreamSynchronize(down_);
  cudaStreamSynchronize(up_);
}

double CudaTransport::BusyMs(bool upload) {
  Drain();
  double total = 0;
  const Ticket first = next_ - first_of_step_ > kRing ? next_ - kRing : first_of_step_;
  for (Ticket t = first; t < next_; ++t) {
    Copy& c = Slot(t);
    if (c.upload != upload) continue;
    float ms = 0;
    if (cudaEventElapsedTime(&ms, c.start, c.end) == cudaSuccess) total += ms;
  }
  return total;
}

double CudaTransport::DownloadBusyMs() { return BusyMs(false); }
double CudaTransport::UploadBusyMs() { return BusyMs(true); }
void CudaTransport::ResetTimes() { first_of_step_ = next_; }

std::unique_ptr<Transport> MakeCudaTransport(void* stream, std::shared_ptr<FaultPlan> faults) {
  return std::make_unique<CudaTransport>(static_cast<cudaStream_t>(stream), std::move(faults));
}

}  // namespace tandem::offload
