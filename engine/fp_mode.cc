#include "engine/fp_mode.h"

#if defined(__x86_64__) || defined(_M_X64) || defined(__i386__)
#include <xmmintrin.h>
#define TANDEM_HAVE_MXCSR 1
#endif

namespace tandem {

#if TANDEM_HAVE_MXCSR
namespace {
constexpr uint32_t kFlushToZero = 0x8000u;
constexpr uint32_t kDenormalsAreZero = 0x0040u;
constexpr uint32_t kRoundingMask = 0x6000u;  // 00 = round to nearest even
constexpr uint32_t kAllExceptionsMasked = 0x1F80u;  // no SIGFPE inside the kernels
}  // namespace

FpModeGuard::FpModeGuard() noexcept : saved_(_mm_getcsr()) {
  _mm_setcsr((saved_ & ~(kFlushToZero | kDenormalsAreZero | kRoundingMask)) |
             kAllExceptionsMasked);
}
FpModeGuard::~FpModeGuard() { _mm_setcsr(saved_); }
#else
FpModeGuard::FpModeGuard() noexcept {}
FpModeGuard::~FpModeGuard() {}
#endif

}  // namespace tandem
