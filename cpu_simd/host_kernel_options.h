// The tuning of the host kernels as a value: which ISA's kernels run and how their span
// loop maps work to the core (prefetch, streaming stores, groups per iteration, the VBMI
// paths). A HostDriver and StepSpanHost take one (cpu_simd/host_kernels.h); the
// optimizer's configuration can carry one. No field changes a result, only speed: every
// ISA and every setting writes the bytes of tandem::ReferenceStep (Note [Same ops, same
// order], cpu_simd/group_step.h). The defaults are the measured best
// (docs/host_kernels.md, "Prefetch and non-temporal stores", "Two groups per iteration").
#pragma once

#include <cstddef>
#include <optional>
#include <string>

#include "engine/grain.h"

namespace tandem::cpu {

// Instruction sets the host kernels are built for, lowest first on each architecture; a
// build has the kernels of its own architecture only (x86-64: kSse, kAvx2, kAvx512;
// aarch64: kNeon, kSve), and IsaSupported is false for the others.
//   kSse:    SSE4.2 (x86-64-v2), 4 floats per vector; f16 through scalar integer code.
//   kAvx2:   AVX2 + F16C, 8 floats per vector.
//   kAvx512: AVX-512 F/CD/BW/DQ/VL, 16 floats per vector (two per quantization group).
//   kNeon:   AArch64 Advanced SIMD, 4 floats per vector (every aarch64 CPU).
//   kSve:    SVE at the vector length the calling thread runs with: 128, 256 or 512 bits
//            (4, 8 or 16 floats), one build each (Note [SVE vector lengths],
//            cpu_simd/kernel_sve.cc); supported where the CPU has SVE at one of them.
enum class Isa { kSse, kAvx2, kAvx512, kNeon, kSve };

// Note [Two groups per iteration] (cpu_simd/pairing.h): which q8 kernels step two
// adjacent groups per iteration (AVX-512 only; elsewhere every kernel steps one).
enum class PairedGroups {
  kOff = 0,          // one group per iteration everywhere
  kAllQ8 = 1,        // two groups for every kernel with a q8 moment (default)
  kWithoutQ8Var = 2  // two for kernels without a q8 variance (Lion, SGD), one for AdamW
};

// Elements per piece of host work handed to one task: HostDriver's default grain and the
// pieces of the host gradient norm (cpu_simd/host_norm.cc). About 0.8-1.8 MB of traffic per
// piece: enough to amortise scheduling, small enough to balance (docs/host_kernels.md,
// "The TBB driver"). The engine's one grain (Note [Grain] in engine/grain.h).
inline constexpr size_t kHostGrainElements = kGrainElements;

struct HostKernelOptions {
  // The ISA whose kernels run. Default (empty): the best this CPU supports (BestIsa()).
  // Requirement: an ISA this CPU supports (IsaSupported), else Error(kUnsupported).
  std::optional<Isa> isa;

  // Note [Software prefetch] (cpu_simd/prefetch.h): how many quantization groups ahead the
  // span loop prefetches every array it reads. The kernels have a case for 0 (off), 8, 16,
  // 32 and 64; any other positive value is rounded up to the next of them (64 at most),
  // a negative one means off. Default 32.
  int prefetch_groups = 32;

  // Note [Non-temporal parameter stores] (cpu_simd/step_kernel.h): streaming stores for a
  // separate parameter copy that is 64-byte aligned and not fp16. Default on.
  bool nt_param_stores = true;

  // Default kAllQ8: on the H200 host's Emerald Rapids cores pairing made AdamW
  // bf16+ecc8/q8/q8 8% faster at 16 threads (docs/host_kernels.md). Requirement: one of
  // the enumerators, else Error(kInvalidArgument).
  PairedGroups paired_groups = PairedGroups::kAllQ8;

  // Note [VBMI momentum decode] (cpu_simd/ops_avx512vbmi.h): AVX-512 spans with a q8
  // momentum run the kernels built with AVX512-VBMI where the CPU has it. Default on;
  // false runs the plain AVX-512 kernels that CPUs without VBMI run. Ignored where the CPU
  // lacks VBMI or the ISA is not kAvx512.
  bool vbmi_decode = true;
};

// "sse", "avx2", "avx512", "neon", "sve".
const char* IsaName(Isa isa);

// The ISA named "sse", "avx2", "avx512", "neon" or "sve"; Error(kInvalidArgument) naming
// `name` otherwise.
Isa ParseIsa(const std::string& name);

// Whether this CPU (and OS) can run the kernels built for `isa` (always false for the
// other architecture's ISAs).
bool IsaSupported(Isa isa);

// Whether this CPU has AVX-512 (kAvx512) with AVX512-VBMI: where `vbmi_decode` applies.
bool VbmiSupported();

// The best ISA this CPU supports: kAvx512, kAvx2 or kSse on x86-64; kSve or kNeon on
// aarch64.
Isa BestIsa();

// aarch64: the SVE vector length of the calling thread in bits (prctl PR_SVE_GET_VL), 0
// without SVE; 0 on x86-64.
unsigned SveVectorBits();

// `options` as the kernels apply them on this CPU: `isa` set, `prefetch_groups` one of
// 0, 8, 16, 32, 64, `vbmi_decode` true only where it applies and is on. Throws
// Error(kUnsupported) for an ISA this CPU lacks, Error(kInvalidArgument) for an ISA or
// pairing value that is not an enumerator.
HostKernelOptions Resolve(const HostKernelOptions& options);

}  // namespace tandem::cpu
