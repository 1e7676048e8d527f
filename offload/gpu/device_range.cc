#include "offload/gpu/device_range.h"

#include <cuda.h>  // driver types only: the function comes from the runtime's entry point
#include <cuda_runtime.h>

namespace tandem::offload {
namespace {
using GetAddressRangeFn = CUresult (*)(CUdeviceptr* base, size_t* size, CUdeviceptr ptr);

// Looked up once through the runtime (which has loaded the driver already), so the library
// needs no link against libcuda and still runs where no driver is installed.
GetAddressRangeFn AddressRangeFn() noexcept {
  static const GetAddressRangeFn fn = [] {
    void* f = nullptr;
    cudaDriverEntryPointQueryResult found = cudaDriverEntryPointSymbolNotFound;
    if (cudaGetDriverEntryPointByVersion("cuMemGetAddressRange", &f, 12000, cudaEnableDefault,
                                         &found) != cudaSuccess ||
        found != cudaDriverEntryPointSuccess) {
      cudaGetLastError();
      f = nullptr;
    }
    return reinterpret_cast<GetAddressRangeFn>(f);
  }();
  return fn;
}
}  // namespace

std::optional<uint64_t> DeviceBytesFrom(const void* p) noexcept {
  const GetAddressRangeFn fn = AddressRangeFn();
  if (fn == nullptr || p == nullptr) return std::nullopt;
  CUdeviceptr base = 0;
  size_t size = 0;
  const auto ptr = static_cast<CUdeviceptr>(reinterpret_cast<uintptr_t>(p));
  if (fn(&base, &size, ptr) != CUDA_SUCCESS || ptr < base || ptr - base > size)
    return std::nullopt;
  return static_cast<uint64_t>(base + size - ptr);
}

}  // namespace tandem::offload
