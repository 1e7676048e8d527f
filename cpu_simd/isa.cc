// ISA detection and the resolution of a HostKernelOptions value into the kernel and tuning
// it chooses. x86-64: cpuid through __builtin_cpu_supports; aarch64: the kernel's hardware
// capabilities (getauxval AT_HWCAP) and the SVE vector length (prctl PR_SVE_GET_VL).
// Nothing here keeps state.
#include <string>

#if defined(__aarch64__)
#include <sys/auxv.h>
#include <sys/prctl.h>
#endif

#include "cpu_simd/host_kernel_options.h"
#include "cpu_simd/span_kernels.h"
#include "tandem/error.h"

namespace tandem::cpu {
namespace {

constexpr Isa kAllIsas[] = {Isa::kSse, Isa::kAvx2, Isa::kAvx512, Isa::kNeon, Isa::kSve};

// The prefetch distances the kernels have a case for (PrefetchFor, prefetch.h).
int SupportedPrefetchGroups(int groups) {
  if (groups <= 0) return 0;
  int pf = 8;
  while (pf < groups && pf < 64) pf *= 2;
  return pf;
}

// The kernel of a supported ISA (IsaSupported).
SpanKernel KernelFor(Isa isa) {
#if defined(__aarch64__)
  return isa == Isa::kSve ? &StepSpanSve : &StepSpanNeon;
#else
  switch (isa) {
    case Isa::kAvx2:
      return &StepSpanAvx2;
    case Isa::kAvx512:
      return &StepSpanAvx512;
    default:
      return &StepSpanSse;
  }
#endif
}

}  // namespace

const char* IsaName(Isa isa) {
  switch (isa) {
    case Isa::kSse:
      return "sse";
    case Isa::kAvx2:
      return "avx2";
    case Isa::kAvx512:
      return "avx512";
    case Isa::kNeon:
      return "neon";
    case Isa::kSve:
      return "sve";
  }
  return "unknown";
}

Isa ParseIsa(const std::string& name) {
  for (Isa isa : kAllIsas)
    if (name == IsaName(isa)) return isa;
  throw Error(ErrorKind::kInvalidArgument,
              "ISA '" + name + "' is not one of sse, avx2, avx512, neon, sve");
}

#if defined(__aarch64__)

unsigned SveVectorBits() {
  if ((getauxval(AT_HWCAP) & HWCAP_SVE) == 0) return 0;
  const int vl = prctl(PR_SVE_GET_VL);
  return vl < 0 ? 0u : static_cast<unsigned>(vl & PR_SVE_VL_LEN_MASK) * 8u;
}

bool IsaSupported(Isa isa) {
  if (isa == Isa::kNeon) return (getauxval(AT_HWCAP) & HWCAP_ASIMD) != 0;
  if (isa != Isa::kSve) return false;
  const unsigned bits = SveVectorBits();
  for (unsigned built : kSveVectorBits)
    if (bits == built) return true;
  return false;
}

bool VbmiSupported() { return false; }

Isa BestIsa() { return IsaSupported(Isa::kSve) ? Isa::kSve : Isa::kNeon; }

#else

unsigned SveVectorBits() { return 0; }

bool IsaSupported(Isa isa) {
  __builtin_cpu_init();
  switch (isa) {
    case Isa::kSse:
      return __builtin_cpu_supports("sse4.2");
    case Isa::kAvx2:
      return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("f16c") &&
             __builtin_cpu_supports("sse4.2");
    case Isa::kAvx512:
      return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
             __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl") &&
             __builtin_cpu_supports("avx512cd") && __builtin_cpu_supports("f16c") &&
             __builtin_cpu_supports("avx2");
    case Isa::kNeon:
    case Isa::kSve:
      return false;
  }
  return false;
}

bool VbmiSupported() {
  __builtin_cpu_init();
  return IsaSupported(Isa::kAvx512) && __builtin_cpu_supports("avx512vbmi");
}

Isa BestIsa() {
  if (IsaSupported(Isa::kAvx512)) return Isa::kAvx512;
  if (IsaSupported(Isa::kAvx2)) return Isa::kAvx2;
  return Isa::kSse;
}

#endif

HostKernelOptions Resolve(const HostKernelOptions& options) {
  HostKernelOptions r = options;
  if (!r.isa) r.isa = BestIsa();
  if (static_cast<unsigned>(*r.isa) > static_cast<unsigned>(Isa::kSve))
    throw Error(ErrorKind::kInvalidArgument, "HostKernelOptions::isa: unknown ISA value " +
                                                 std::to_string(static_cast<int>(*r.isa)));
  if (!IsaSupported(*r.isa)) {
    std::string why = "this CPU does not support it";
    if (*r.isa == Isa::kSve && SveVectorBits() != 0)
      why = "this CPU's SVE vector length (" + std::to_string(SveVectorBits()) +
            " bits) has no kernel (built for 128, 256 and 512 bits; neon gives the same bits)";
    throw Error(ErrorKind::kUnsupported,
                std::string("HostKernelOptions::isa ") + IsaName(*r.isa) + ": " + why);
  }
  if (static_cast<unsigned>(r.paired_groups) > static_cast<unsigned>(PairedGroups::kWithoutQ8Var))
    throw Error(ErrorKind::kInvalidArgument, "HostKernelOptions::paired_groups: " +
                                                 std::to_string(static_cast<int>(r.paired_groups)) +
                                                 " is not 0, 1 or 2");
  r.prefetch_groups = SupportedPrefetchGroups(r.prefetch_groups);
  r.vbmi_decode = r.vbmi_decode && *r.isa == Isa::kAvx512 && VbmiSupported();
  return r;
}

HostKernel ResolveHostKernel(const HostKernelOptions& options) {
  const HostKernelOptions r = Resolve(options);
  return HostKernel{
      KernelFor(*r.isa),
      SpanTuning{r.prefetch_groups, r.nt_param_stores, r.paired_groups, r.vbmi_decode}, r};
}

}  // namespace tandem::cpu
