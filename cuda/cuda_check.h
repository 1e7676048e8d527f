// Checking CUDA runtime calls: every failure becomes tandem::Error naming the call.
#pragma once

#include <cuda_runtime.h>

#include <string>

#include "tandem/error.h"

namespace tandem::gpu::detail {

// Throws Error(kCuda) (kOutOfMemory for cudaErrorMemoryAllocation) with
// "<what>: <cuda error name>: <cuda error string>" when err != cudaSuccess.
inline void CheckCuda(cudaError_t err, const std::string& what) {
  if (err == cudaSuccess) return;
  (void)cudaGetLastError();  // clear a sticky-free error so later calls are not blamed
  const ErrorKind kind =
      err == cudaErrorMemoryAllocation ? ErrorKind::kOutOfMemory : ErrorKind::kCuda;
  throw Error(kind, what + ": " + cudaGetErrorName(err) + ": " + cudaGetErrorString(err));
}

}  // namespace tandem::gpu::detail
