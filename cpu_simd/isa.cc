// Runtime ISA selection: cpuid through __builtin_cpu_supports, TANDEM_ISA, ForceIsa.
#include <atomic>
#include <cstdlib>
#include <mutex>
#include <string>

#include "cpu_simd/host_kernels.h"
#include "cpu_simd/span_kernels.h"
#include "cpu_simd/tuning.h"
#include "tandem/error.h"

namespace tandem::cpu {
namespace {

// Defaults chosen by measurement (docs/host_kernels.md, "Prefetch and non-temporal stores").
constexpr int kDefaultPrefetchGroups = 32;
constexpr int kDefaultNtParam = 1;
constexpr int kDefaultPairedGroups = 1;
constexpr int kDefaultVbmiDecode = 1;

// -1 until the first BestIsa/ActiveIsa call resolves it.
std::atomic<int> g_active{-1};
std::atomic<int> g_prefetch{-1};
std::atomic<int> g_nt_param{-1};
std::atomic<int> g_paired{-1};
std::atomic<int> g_vbmi{-1};

bool CpuHasVbmi() {
  __builtin_cpu_init();
  return IsaSupported(Isa::kAvx512) && __builtin_cpu_supports("avx512vbmi");
}

Isa ParseIsaName(const std::string& name) {
  if (name == "sse") return Isa::kSse;
  if (name == "avx2") return Isa::kAvx2;
  if (name == "avx512") return Isa::kAvx512;
  throw Error(ErrorKind::kInvalidArgument,
              "TANDEM_ISA='" + name + "' is not one of sse, avx2, avx512");
}

Isa Detect() {
  if (IsaSupported(Isa::kAvx512)) return Isa::kAvx512;
  if (IsaSupported(Isa::kAvx2)) return Isa::kAvx2;
  return Isa::kSse;
}

// The default ISA (TANDEM_ISA or the best supported); throws as BestIsa documents.
Isa ResolveDefault() {
  const char* env = std::getenv("TANDEM_ISA");
  if (env == nullptr || *env == '\0') return Detect();
  const Isa isa = ParseIsaName(env);
  if (!IsaSupported(isa))
    throw Error(ErrorKind::kUnsupported,
                std::string("TANDEM_ISA=") + env + ": this CPU does not support it");
  return isa;
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

Isa BestIsa() { return ResolveDefault(); }

Isa ActiveIsa() {
  int a = g_active.load(std::memory_order_acquire);
  if (a >= 0) return static_cast<Isa>(a);
  const Isa isa = ResolveDefault();
  int expected = -1;
  g_active.compare_exchange_strong(expected, static_cast<int>(isa), std::memory_order_acq_rel);
  return static_cast<Isa>(g_active.load(std::memory_order_acquire));
}

void ForceIsa(Isa isa) {
  if (static_cast<unsigned>(isa) > static_cast<unsigned>(Isa::kAvx512))
    throw Error(ErrorKind::kInvalidArgument, "ForceIsa: unknown ISA value");
  if (!IsaSupported(isa))
    throw Error(ErrorKind::kUnsupported,
                std::string("ForceIsa(") + IsaName(isa) + "): this CPU does not support it");
  g_active.store(static_cast<int>(isa), std::memory_order_release);
}

SpanKernel ActiveKernel() {
  switch (ActiveIsa()) {
    case Isa::kSse:
      return &StepSpanSse;
    case Isa::kAvx2:
      return &StepSpanAvx2;
    case Isa::kAvx512:
      return &StepSpanAvx512;
  }
  return &StepSpanSse;
}

namespace {
// The prefetch distances the kernels have a case for (PrefetchFor, step_kernel.h).
int SupportedPrefetchGroups(int groups) {
  if (groups <= 0) return 0;
  int pf = 8;
  while (pf < groups && pf < 64) pf *= 2;
  return pf;
}
}  // namespace

int PrefetchGroups() {
  int pf = g_prefetch.load(std::memory_order_relaxed);
  if (pf >= 0) return pf;
  const char* env = std::getenv("TANDEM_PREFETCH_GROUPS");
  pf = SupportedPrefetchGroups(env != nullptr ? std::atoi(env) : kDefaultPrefetchGroups);
  g_prefetch.store(pf, std::memory_order_relaxed);
  return pf;
}

void SetPrefetchGroups(int groups) {
  g_prefetch.store(SupportedPrefetchGroups(groups), std::memory_order_relaxed);
}

bool NtParamStores() {
  int nt = g_nt_param.load(std::memory_order_relaxed);
  if (nt >= 0) return nt != 0;
  const char* env = std::getenv("TANDEM_NT_PARAM");
  nt = env != nullptr ? (std::atoi(env) != 0) : kDefaultNtParam;
  g_nt_param.store(nt, std::memory_order_relaxed);
  return nt != 0;
}

void SetNtParamStores(bool on) { g_nt_param.store(on ? 1 : 0, std::memory_order_relaxed); }

int PairedGroups() {
  int mode = g_paired.load(std::memory_order_relaxed);
  if (mode >= 0) return mode;
  const char* env = std::getenv("TANDEM_PAIRED_GROUPS");
  mode = env != nullptr ? std::atoi(env) : kDefaultPairedGroups;
  if (mode < 0 || mode > 2) mode = kDefaultPairedGroups;
  g_paired.store(mode, std::memory_order_relaxed);
  return mode;
}

void SetPairedGroups(int mode) {
  g_paired.store(mode < 0 || mode > 2 ? kDefaultPairedGroups : mode, std::memory_order_relaxed);
}

bool VbmiDecode() {
  int on = g_vbmi.load(std::memory_order_relaxed);
  if (on >= 0) return on != 0;
  const char* env = std::getenv("TANDEM_VBMI_DECODE");
  const bool enabled = env != nullptr ? std::atoi(env) != 0 : kDefaultVbmiDecode != 0;
  on = enabled && CpuHasVbmi() ? 1 : 0;
  g_vbmi.store(on, std::memory_order_relaxed);
  return on != 0;
}

void SetVbmiDecode(bool on) { g_vbmi.store(on && CpuHasVbmi() ? 1 : 0, std::memory_order_relaxed); }

}  // namespace tandem::cpu
