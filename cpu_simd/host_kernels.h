// Host (CPU) optimizer-step kernels: xsimd kernels for every algorithm x state format,
// runtime ISA dispatch and a oneTBB driver that steps many spans on many threads.
//
// Every result is byte-for-byte the result of tandem::ReferenceStep on the same span,
// whatever the ISA, the thread count, the grain and the caller's FP mode
// (docs/host_kernels.md, "Bit identity").
//
// Tuning (the ISA, prefetch, streaming stores, pairing, VBMI) is a HostKernelOptions value
// (cpu_simd/host_kernel_options.h) handed to each entry point: no process-wide state.
//
// Thread safety: the free functions are thread-safe. StepSpanHost may run concurrently on
// disjoint spans. A HostDriver runs one Run() at a time (see the class).
#pragma once

#include <cstddef>
#include <functional>
#include <memory>
#include <vector>

#include "cpu_simd/host_kernel_options.h"
#include "engine/step_scalars.h"
#include "engine/step_span.h"

namespace tandem::cpu {

// Steps one span on the calling thread with the kernels `options` choose, holding an
// FpModeGuard. Validates like ReferenceStep (Error(kInvalidArgument), nothing written on a
// throw) and `options` like Resolve (host_kernel_options.h), before writing anything.
void StepSpanHost(const StepScalars& s, const StepSpan& span,
                  const HostKernelOptions& options = {});

// One unit of work for HostDriver. `scalars` must stay valid until Run returns.
struct HostWork {
  const StepScalars* scalars;
  StepSpan span;
};

// Owns a oneTBB task_arena of `threads` threads (0 = one per CPU of `cpus`, or all cores
// of the process' affinity when `cpus` is empty) whose threads run only on `cpus` (empty:
// anywhere the process may run; cpu_simd/cpu_pinning.h). Error(kInvalidArgument) naming
// the id for a CPU the process may not use, a duplicate or a negative id.
// Its kernels are those `options` choose (Resolve, host_kernel_options.h; the errors of
// Resolve are thrown by the constructor and set_options).
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
  explicit HostDriver(int threads = 0, size_t grain_elements = kHostGrainElements,
                      std::vector<int> cpus = {}, const HostKernelOptions& options = {});
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

  // Replaces the kernel options for later Runs (waits for a Run in progress). On a throw
  // (see Resolve) the previous options stay.
  void set_options(const HostKernelOptions& options);
  // The options in force, resolved (Resolve): `isa` is always set. Not concurrently with
  // set_options.
  const HostKernelOptions& options() const;

  int threads() const;
  size_t grain_elements() const;
  const std::vector<int>& cpus() const;  // empty: not pinned

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace tandem::cpu
