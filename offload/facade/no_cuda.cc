// GPU mode in a build without CUDA (TANDEM_HAS_CUDA == 0): no device is ever available,
// and every factory of a CUDA part throws Error(kUnsupported); host mode and the memory
// prediction are complete (offload/gpu/gpu_side.h).
#include "offload/devices/stream_device.h"
#include "offload/executors/resident.h"
#include "offload/gpu/gpu_side.h"
#include "offload/gpu/grad_fences.h"
#include "offload/prepass/prepass.h"
#include "tandem/error.h"

namespace tandem::offload {
namespace {
[[noreturn]] void NoCuda() {
  throw Error(ErrorKind::kUnsupported,
              "GPU mode: this build of Tandem has no CUDA support (configured without a CUDA "
              "toolkit, TANDEM_CUDA=OFF); use host mode or rebuild with CUDA");
}
}  // namespace

bool GpuSide::Available() noexcept { return false; }
std::unique_ptr<GpuSide> GpuSide::Create(void*, std::shared_ptr<DeviceAllocator>) { NoCuda(); }
std::unique_ptr<Prepass> MakeCudaPrepass(void*, const std::vector<TensorSpec>&, DeviceAllocator*) {
  NoCuda();
}
std::unique_ptr<Executor> MakeGpuResident(ResidentSetup, void*, int) { NoCuda(); }
std::unique_ptr<StreamDevice> MakeCudaStreamDevice(void*, DeviceAllocator*, const Queues&,
                                                   std::shared_ptr<FaultPlan>) {
  NoCuda();
}
std::unique_ptr<GradFences> MakeCudaGradFences(void*, size_t) { NoCuda(); }

}  // namespace tandem::offload
