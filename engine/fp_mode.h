// FpModeGuard: for its lifetime, the calling thread's x86 MXCSR is set to round to
// nearest even with flush-to-zero and denormals-are-zero off and every floating-point
// exception masked (a caller that unmasks them gets no SIGFPE from Tandem); on aarch64
// its FPCR likewise: round to nearest even (RMode 0), no flush to zero (FZ, FZ16, FIZ),
// NaN payloads propagated (DN off), IEEE fp16 (AHP off), the standard rules (AH off) and
// no exception traps. The caller's mode is restored on destruction. Every host kernel
// entry point holds one, so results do not depend on the FP mode of the thread that calls
// (docs/numerics.md, "FP mode").
// Not copyable; use on the thread whose mode it changes.
#pragma once

#include <cstdint>

namespace tandem {

class FpModeGuard {
 public:
  FpModeGuard() noexcept;
  ~FpModeGuard();
  FpModeGuard(const FpModeGuard&) = delete;
  FpModeGuard& operator=(const FpModeGuard&) = delete;

 private:
  uint32_t saved_ = 0;
};

}  // namespace tandem
