// CUDA_CHECK-style helper for the offload layer: turns a failed CUDA runtime call into
// tandem::Error(kCuda) that names the call and the context.
#pragma once

#include <cuda_runtime.h>

#include <string>

#include "tandem/error.h"

namespace tandem::offload {

inline void CheckCuda(cudaError_t err, const char* call, const std::string& context) {
  if (err != cudaSuccess)
    throw Error(ErrorKind::kCuda, std::string(call) + " failed (" + cudaGetErrorName(err) +
                                      ": " + cudaGetErrorString(err) + ") " + context);
}

}  // namespace tandem::offload

#define TANDEM_CUDA(call, context) ::tandem::offload::CheckCuda((call), #call, (context))
