#include "engine/fp_mode.h"

#if defined(__x86_64__) || defined(_M_X64) || defined(__i386__)
#include <xmmintrin.h>
#define TANDEM_HAVE_MXCSR 1
#elif defined(__aarch64__)
#define TANDEM_HAVE_FPCR 1
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
#elif TANDEM_HAVE_FPCR
namespace {
// FPCR fields (Arm ARM, FPCR): bits 31:27 and 63:32 are RES0, so the low 32 bits are the
// whole register.
constexpr uint32_t kFlushInputsToZero = 1u << 0;  // FIZ (FEAT_AFP)
constexpr uint32_t kAltHandling = 1u << 1;        // AH (FEAT_AFP): other denormal/NaN rules
constexpr uint32_t kNep = 1u << 2;                // NEP (FEAT_AFP): scalar ops keep upper lanes
constexpr uint32_t kTrapEnables = 0x9F00u;        // IOE DZE OFE UFE IXE IDE: no SIGFPE
constexpr uint32_t kFlushToZero16 = 1u << 19;     // FZ16: half-precision flush to zero
constexpr uint32_t kRoundingMask = 3u << 22;      // RMode: 00 = round to nearest even
constexpr uint32_t kFlushToZero = 1u << 24;       // FZ
constexpr uint32_t kDefaultNan = 1u << 25;        // DN: NaN results lose their payload
constexpr uint32_t kAltHalfPrecision = 1u << 26;  // AHP: no Inf/NaN in fp16
constexpr uint32_t kCleared = kFlushInputsToZero | kAltHandling | kNep | kTrapEnables |
                              kFlushToZero16 | kRoundingMask | kFlushToZero | kDefaultNan |
                              kAltHalfPrecision;

uint32_t ReadFpcr() {
  uint64_t v;
  asm volatile("mrs %0, fpcr" : "=r"(v));
  return static_cast<uint32_t>(v);
}
void WriteFpcr(uint32_t v) { asm volatile("msr fpcr, %0" : : "r"(static_cast<uint64_t>(v))); }
}  // namespace

FpModeGuard::FpModeGuard() noexcept : saved_(ReadFpcr()) { WriteFpcr(saved_ & ~kCleared); }
FpModeGuard::~FpModeGuard() { WriteFpcr(saved_); }
#else
FpModeGuard::FpModeGuard() noexcept {}
FpModeGuard::~FpModeGuard() {}
#endif

}  // namespace tandem
