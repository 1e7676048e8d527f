// ISA detection (cpuid through __builtin_cpu_supports) and the resolution of a
// HostKernelOptions value into the kernel and tuning it chooses. Nothing here keeps state.
#include <string>

#include "cpu_simd/host_kernel_options.h"
#include "cpu_simd/span_kernels.h"
#include "tandem/error.h"

namespace tandem::cpu {
namespace {

// The prefetch distances the kernels have a case for (PrefetchFor, prefetch.h).
int SupportedPrefetchGroups(int groups) {
  if (groups <= 0) return 0;
  int pf = 8;
  while (pf < groups && pf < 64) pf *= 2;
  return pf;
}

SpanKernel KernelFor(Isa isa) {
  switch (isa) {
    case Isa::kSse:
      return &StepSpanSse;
    case Isa::kAvx2:
      return &StepSpanAvx2;
    case Isa::kAvx512:
      return &StepSpanAvx512;
  }
  return &StepSpanSse;
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
  }
  return "unknown";
}

Isa ParseIsa(const std::string& name) {
  for (Isa isa : {Isa::kSse, Isa::kAvx2, Isa::kAvx512})
    if (name == IsaName(isa)) return isa;
  throw Error(ErrorKind::kInvalidArgument, "ISA '" + name + "' is not one of sse, avx2, avx512");
}

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

HostKernelOptions Resolve(const HostKernelOptions& options) {
  HostKernelOptions r = options;
  if (!r.isa) r.isa = BestIsa();
  if (static_cast<unsigned>(*r.isa) > static_cast<unsigned>(Isa::kAvx512))
    throw Error(ErrorKind::kInvalidArgument, "HostKernelOptions::isa: unknown ISA value " +
                                                 std::to_string(static_cast<int>(*r.isa)));
  if (!IsaSupported(*r.isa))
    throw Error(ErrorKind::kUnsupported, std::string("HostKernelOptions::isa ") + IsaName(*r.isa) +
                                             ": this CPU does not support it");
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
