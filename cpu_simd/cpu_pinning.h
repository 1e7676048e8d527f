// CPU sets for the optimizer's host threads: validation, pinning a thread, and a oneTBB
// task_arena whose threads run only on a given set (OptimizerConfig::host_cpus).
//
// Note [Pinning a oneTBB arena]: oneTBB arenas take a thread count, a NUMA node or a core
// type, never an arbitrary CPU set, and their worker threads come from one process-wide
// pool that moves between arenas. PinnedArena therefore attaches a
// tbb::task_scheduler_observer to its arena: every thread that enters the arena (a pool
// worker, or the external thread that calls Execute) saves its affinity and is pinned to
// the set; when it leaves, its saved affinity is restored, so a pool worker that later
// serves another arena, or the caller's own thread, is not left pinned. The destructor
// waits (up to 2 s) for the pool workers still inside to leave, so that none returns to
// the pool pinned.
//
// Thread safety: the free functions are thread-safe. PinnedArena::Execute may be called
// from several threads at once (the arena queues them), like tbb::task_arena::execute.
#pragma once

#include <tbb/task_arena.h>

#include <atomic>
#include <functional>
#include <memory>
#include <vector>

namespace tandem::cpu {

// The logical CPU ids this process may run on (the calling thread's affinity mask, which
// is the process's unless someone pinned this thread), ascending. Never empty: when the
// mask cannot be read it returns 0 .. hardware_concurrency - 1.
std::vector<int> ProcessCpus();

// Checks a CPU set given as `what` (e.g. "host_cpus"): every id must be >= 0, appear
// once and be one this process may run on (ProcessCpus). Throws Error(kInvalidArgument)
// naming the first bad id and why. An empty set is valid (it means "no restriction").
void ValidateCpuSet(const std::vector<int>& cpus, const char* what);

// Pins the calling thread to `cpus` (no-op when empty). Throws Error(kInvalidArgument)
// naming the set when the kernel refuses it.
void PinThisThread(const std::vector<int>& cpus);

// Note [Arena size limit]: oneTBB (2021.x, Debian 12's) accepts
// task_arena::initialize(n) for any n, but an arena of more than 65536 slots is not
// usable: its initialisation returns as if it had worked and its teardown
// (task_arena::terminate) then crashes the process (SIGSEGV in tbbmalloc). PinnedArena
// therefore refuses such a count before the arena is made, with an error.
inline constexpr int kMaxArenaThreads = 65536;

// A tbb::task_arena whose threads run on `cpus` while they work in it (Note [Pinning a
// oneTBB arena]). threads: the arena's concurrency; 0 means cpus.size(), or every core of
// the process when cpus is empty (then nothing is pinned: a plain arena); at most
// kMaxArenaThreads (Note [Arena size limit]). cpus must pass ValidateCpuSet. The
// constructor checks both before making the arena, throwing Error(kInvalidArgument)
// naming `what`.
class PinnedArena {
 public:
  PinnedArena(int threads, std::vector<int> cpus, const char* what = "host_cpus");
  ~PinnedArena();
  PinnedArena(const PinnedArena&) = delete;
  PinnedArena& operator=(const PinnedArena&) = delete;

  // Runs fn in the arena (tbb::task_arena::execute): parallel algorithms called by fn use
  // the arena's threads. Exceptions thrown by fn propagate.
  void Execute(const std::function<void()>& fn);

  int concurrency() const { return threads_; }
  const std::vector<int>& cpus() const { return cpus_; }

 private:
  class Observer;
  int threads_;
  std::vector<int> cpus_;
  tbb::task_arena arena_;
  std::unique_ptr<Observer> observer_;  // after arena_: destroyed (unobserved) first
};

// Test hook: when set, called on the thread that runs each piece of the optimizer's host
// work (HostDriver pieces, speculation pieces, the gradient-norm pieces, HostStreamDevice
// copies), so a test can read that thread's affinity. nullptr (the default) disables it.
using WorkProbe = void (*)();
void SetWorkProbeForTesting(WorkProbe probe);
extern std::atomic<WorkProbe> g_work_probe;
inline void RunWorkProbe() {
  if (const WorkProbe p = g_work_probe.load(std::memory_order_relaxed)) p();
}

}  // namespace tandem::cpu
