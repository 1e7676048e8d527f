// PinnedArena and the CPU-set helpers (Note [Pinning a oneTBB arena] in cpu_pinning.h).
#include "cpu_simd/cpu_pinning.h"

#include <pthread.h>
#include <sched.h>
#include <tbb/task_scheduler_observer.h>

#include <algorithm>
#include <chrono>
#include <set>
#include <string>
#include <thread>
#include <utility>

#include "tandem/error.h"

namespace tandem::cpu {

std::atomic<WorkProbe> g_work_probe{nullptr};

void SetWorkProbeForTesting(WorkProbe probe) { g_work_probe.store(probe); }

std::vector<int> ProcessCpus() {
  std::vector<int> cpus;
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) == 0)
    for (int c = 0; c < CPU_SETSIZE; ++c)
      if (CPU_ISSET(c, &set)) cpus.push_back(c);
  if (cpus.empty()) {
    const int n = std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
    for (int c = 0; c < n; ++c) cpus.push_back(c);
  }
  return cpus;
}

void ValidateCpuSet(const std::vector<int>& cpus, const char* what) {
  if (cpus.empty()) return;
  const std::vector<int> allowed = ProcessCpus();
  std::set<int> seen;
  for (int c : cpus) {
    const std::string id = std::string(what) + ": CPU " + std::to_string(c);
    if (c < 0) throw Error(ErrorKind::kInvalidArgument, id + " is negative");
    if (!seen.insert(c).second) throw Error(ErrorKind::kInvalidArgument, id + " is given twice");
    if (!std::binary_search(allowed.begin(), allowed.end(), c)) {
      std::string m = id + " is not in this process's CPU affinity (";
      m += std::to_string(allowed.size()) + " CPUs, " + std::to_string(allowed.front()) + ".." +
           std::to_string(allowed.back()) + ")";
      throw Error(ErrorKind::kInvalidArgument, m);
    }
  }
}

namespace {
bool MaskOf(const std::vector<int>& cpus, cpu_set_t* set) {
  CPU_ZERO(set);
  for (int c : cpus) {
    if (c < 0 || c >= CPU_SETSIZE) return false;
    CPU_SET(c, set);
  }
  return true;
}
}  // namespace

void PinThisThread(const std::vector<int>& cpus) {
  if (cpus.empty()) return;
  cpu_set_t set;
  if (!MaskOf(cpus, &set) || pthread_setaffinity_np(pthread_self(), sizeof(set), &set) != 0)
    throw Error(ErrorKind::kInvalidArgument,
                "cannot pin a host thread to " + std::to_string(cpus.size()) +
                    " CPUs starting with CPU " + std::to_string(cpus.front()));
}

// Pins each thread entering the arena; restores its own mask when it leaves. A thread
// may enter several pinned arenas nested (an external thread inside Execute of one that
// calls Execute of another): the saved masks form a per-thread stack.
class PinnedArena::Observer : public tbb::task_scheduler_observer {
 public:
  Observer(tbb::task_arena& arena, const std::vector<int>& cpus)
      : tbb::task_scheduler_observer(arena) {
    MaskOf(cpus, &mask_);  // validated by the arena's constructor
    observe(true);
  }
  ~Observer() override { observe(false); }

  // Threads between on_scheduler_entry and on_scheduler_exit.
  int inside() const { return inside_.load(); }

  void on_scheduler_entry(bool) override {
    inside_.fetch_add(1);
    Saved s;
    s.ok = pthread_getaffinity_np(pthread_self(), sizeof(s.mask), &s.mask) == 0;
    stack().push_back(s);
    // Best effort: an observer cannot throw. A refusal leaves the thread where it was.
    (void)pthread_setaffinity_np(pthread_self(), sizeof(mask_), &mask_);
  }
  void on_scheduler_exit(bool) override {
    std::vector<Saved>& st = stack();
    if (!st.empty()) {
      const Saved s = st.back();
      st.pop_back();
      if (s.ok) (void)pthread_setaffinity_np(pthread_self(), sizeof(s.mask), &s.mask);
    }
    inside_.fetch_sub(1);
  }

 private:
  struct Saved {
    cpu_set_t mask;
    bool ok;
  };
  static std::vector<Saved>& stack() {
    thread_local std::vector<Saved> saved;
    return saved;
  }
  cpu_set_t mask_;
  std::atomic<int> inside_{0};
};

namespace {
int ArenaThreads(int threads, const std::vector<int>& cpus) {
  if (threads > 0) return threads;
  if (!cpus.empty()) return static_cast<int>(cpus.size());
  return tbb::this_task_arena::max_concurrency();
}
}  // namespace

PinnedArena::PinnedArena(int threads, std::vector<int> cpus, const char* what)
    : threads_(0), cpus_(std::move(cpus)) {
  if (threads < 0)
    throw Error(ErrorKind::kInvalidArgument,
                std::string(what) + ": thread count must be >= 0, got " + std::to_string(threads));
  if (threads > kMaxArenaThreads)  // Note [Arena size limit]
    throw Error(ErrorKind::kInvalidArgument,
                std::string(what) + ": thread count " + std::to_string(threads) + " exceeds " +
                    std::to_string(kMaxArenaThreads) + ", the most a oneTBB arena holds");
  ValidateCpuSet(cpus_, what);
  threads_ = ArenaThreads(threads, cpus_);
  arena_.initialize(threads_);
  if (!cpus_.empty()) observer_ = std::make_unique<Observer>(arena_, cpus_);
}

PinnedArena::~PinnedArena() {
  if (!observer_) return;
  // Pool workers leave an arena shortly after its work is done (they spin a little
  // first), and only on leaving do they get their affinity back. Stopping the observer
  // while one is still inside would send it back to the pool pinned, so wait for them to
  // leave (normally microseconds; bounded, as a destructor must not hang).
  for (int i = 0; i < 20000 && observer_->inside() > 0; ++i)
    std::this_thread::sleep_for(std::chrono::microseconds(100));
  observer_.reset();
}

void PinnedArena::Execute(const std::function<void()>& fn) {
  if (cpus_.empty()) {
    arena_.execute(fn);
    return;
  }
  // The calling thread works in the arena too. Whether oneTBB notifies the observer for an
  // external thread depends on how it joins, so it is pinned here for the call and its
  // own mask restored afterwards, also when fn throws.
  struct Restore {
    cpu_set_t mask;
    bool ok;
    ~Restore() {
      if (ok) (void)pthread_setaffinity_np(pthread_self(), sizeof(mask), &mask);
    }
  } restore{};
  restore.ok = pthread_getaffinity_np(pthread_self(), sizeof(restore.mask), &restore.mask) == 0;
  cpu_set_t mask;
  MaskOf(cpus_, &mask);
  (void)pthread_setaffinity_np(pthread_self(), sizeof(mask), &mask);
  arena_.execute(fn);
}

}  // namespace tandem::cpu
