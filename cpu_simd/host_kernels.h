// Host (CPU) optimizer-step kernels: xsimd kernels for every algorithm x state format,
// runtime ISA dispatch and a oneTBB driver that steps many spans on many threads.
//
// Every result is byte-for-byte the result of tandem::ReferenceStep on the same span,
// whatever the ISA, the thread count, the grain and the caller's FP mode
// (docs/host_kernels.md, "Bit identity").
//
// Thread safety: the ISA functions are thread-safe (ForceIsa while another thread steps
// changes only which kernel later calls pick). StepSpanHost may run concurrently on
// disjoint spans. A HostDriver runs one Run() at a time (see the class).
#pragma once

#include <cstddef>
#include <functional>
#include <memory>
#include <vector>

#include "engine/step_scalars.h"
#include "engine/step_span.h"

namespace tandem::cpu {

// Instruction sets the host kernels are built for, lowest first.
//   kSse:    SSE4.2 (x86-64-v2), 4 floats per vector; f16 through scalar integer code.
//   kAvx2:   AVX2 + F16C, 8 floats per vector.
//   kAvx512: AVX-512 F/CD/BW/DQ/VL, 16 floats per vector (two per quantization group).
enum class Isa { kSse, kAvx2, kAvx512 };

// "sse", "avx2", "avx512" (the values TANDEM_ISA accepts).
const char* IsaName(Isa isa);

// Whether this CPU (and OS) can run the kernels built for `isa`.
bool IsaSupported(Isa isa);

// The ISA used when nothing is forced: the best this CPU supports, or the one named by the
// environment variable TANDEM_ISA (read once, at the first call of BestIsa/ActiveIsa).
// Throws Error(kInvalidArgument) if TANDEM_ISA holds an unknown name and
// Error(kUnsupported) if it names an ISA this CPU lacks (and on every later call).
Isa BestIsa();

// The ISA that StepSpanHost and HostDriver use now.
Isa ActiveIsa();

// Makes `isa` the active ISA for all later steps of the process. Throws
// Error(kUnsupported) if this CPU lacks it (the active ISA is then unchanged).
void ForceIsa(Isa isa);

// Steps one span on the calling thread with the active ISA, holding an FpModeGuard.
// Validates like ReferenceStep (Error(kInvalidArgument), nothing written on a throw).
void StepSpanHost(const StepScalars& s, const StepSpan& span);

// One unit of work for HostDriver. `scalars` must stay valid until Run returns.
struct HostWork {
  const StepScalars* scalars;
  StepSpan span;
};

// Owns a oneTBB task_arena of `threads` threads (0 = one per CPU of `cpus`, or all cores
// of the process' affinity when `cpus` is empty) whose threads run only on `cpus` (empty:
// anywhere the process may run; cpu_simd/cpu_pinning.h). Error(kInvalidArgument) naming
// the id for a CPU the process may not use, a duplicate or a negative id.
// Run() cuts every item into pieces of about `grain_elements` elements (rounded up to a
// multiple of kQuantGroup, at least one group), aligned to quantization groups, and steps
// them in parallel in the arena; pieces of one item never overlap, so the bytes written do
// not depend on the thread count or the grain. Run blocks until every piece is done.
// Internal buffers grow to the largest piece count seen and are reused (no heap
// allocation on the hot path after the first Run of that size).
//
// Thread safety: one Run at a time per driver (concurrent Run calls on the same driver
// are serialised by an internal mutex). Distinct drivers are independent.
class HostDriver {
 public:
  explicit HostDriver(int threads = 0, size_t grain_elements = 1 << 16,
                      std::vector<int> cpus = {});
  ~HostDriver();
  HostDriver(const HostDriver&) = delete;
  HostDriver& operator=(const HostDriver&) = delete;

  // Validates ALL items first (scalars non-null, then ValidateStepSpan on each span; the
  // message names the item index) and throws Error(kInvalidArgument) before touching any;
  // then steps every item. `items` may be null only when count is 0. Errors thrown by a
  // worker (none are expected after validation) are rethrown here.
  void Run(const HostWork* items, size_t count);

  // Runs fn in the driver's arena (its threads, pinned like Run's): the optimizer's other
  // host loops (gradient norm, state initialisation) use it. Exceptions propagate.
  void Execute(const std::function<void()>& fn);

  int threads() const;
  size_t grain_elements() const;
  const std::vector<int>& cpus() const;  // empty: not pinned

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace tandem::cpu
