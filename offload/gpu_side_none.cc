// GpuSide in a build without CUDA (TANDEM_HAS_CUDA == 0): no device is ever available
// and GPU mode is refused; the memory prediction still works (offload/gpu_side.h).
#include "offload/gpu_side.h"
#include "tandem/error.h"

namespace tandem::offload {

bool GpuSide::Available() noexcept { return false; }

std::unique_ptr<GpuSide> GpuSide::Create(void*, std::shared_ptr<FaultPlan>) {
  throw Error(ErrorKind::kUnsupported,
              "GPU mode: this build of Tandem has no CUDA support (configured without a CUDA "
              "toolkit, TANDEM_CUDA=OFF); use host mode or rebuild with CUDA");
}


}  // namespace tandem::offload
