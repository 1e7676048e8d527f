// Checking CUDA runtime calls, the one place for it (cuda/ and offload/): every failure
// becomes tandem::Error naming the call and what it was for.
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

// TANDEM_CUDA(call, context): runs `call` and throws as CheckCuda does, with the call's
// text and `context` (a string naming the stream, copy, tensor or chunk) in the message:
// "cudaEventRecord(c.end, s) (copy 12, 4096 bytes): cudaErrorLaunchFailure: ...".
// `context` is evaluated only when the call failed: the calls on the hand-over's path run
// on the thread that launches backward's kernels, and their messages cost more than the
// calls.
#define TANDEM_CUDA(call, context)                                                            \
  do {                                                                                        \
    const cudaError_t tandem_cuda_err_ = (call);                                              \
    if (tandem_cuda_err_ != cudaSuccess)                                                      \
      ::tandem::gpu::detail::CheckCuda(tandem_cuda_err_, std::string(#call " ") + (context)); \
  } while (0)
