// HostDriver: group-aligned pieces of every item, stepped in parallel in an owned
// oneTBB task_arena. Each worker task holds its own FpModeGuard (the MXCSR is per
// thread), so results never depend on a worker's FP mode.
#include <tbb/blocked_range.h>
#include <tbb/parallel_for.h>
#include <tbb/partitioner.h>

#include <algorithm>
#include <cstdio>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "cpu_simd/cpu_pinning.h"
#include "cpu_simd/host_kernels.h"
#include "cpu_simd/span_kernels.h"
#include "engine/fp_mode.h"
#include "engine/state_arrays.h"
#include "tandem/error.h"

namespace tandem::cpu {
namespace {

// A piece: elements [offset, offset + count) of item `item`; offset is group aligned.
struct Piece {
  size_t item;
  size_t offset;
  size_t count;
};


}  // namespace

struct HostDriver::Impl {
  size_t grain;
  HostKernel kernel;  // guarded by run_mutex
  PinnedArena arena;
  std::vector<Piece> pieces;  // reused between runs
  std::mutex run_mutex;

  Impl(int t, size_t g, std::vector<int> cpus, const HostKernel& k)
      : grain(g), kernel(k), arena(t, std::move(cpus)) {}
};

HostDriver::HostDriver(int threads, size_t grain_elements, std::vector<int> cpus,
                       const HostKernelOptions& options) {
  if (threads < 0)
    throw Error(ErrorKind::kInvalidArgument,
                "HostDriver: threads must be >= 0, got " + std::to_string(threads));
  size_t grain = (grain_elements + kQuantGroup - 1) / kQuantGroup * kQuantGroup;
  if (grain == 0) grain = kQuantGroup;
  impl_ = std::make_unique<Impl>(threads, grain, std::move(cpus), ResolveHostKernel(options));
}

HostDriver::~HostDriver() = default;

int HostDriver::threads() const { return impl_->arena.concurrency(); }
size_t HostDriver::grain_elements() const { return impl_->grain; }
const std::vector<int>& HostDriver::cpus() const { return impl_->arena.cpus(); }

void HostDriver::set_options(const HostKernelOptions& options) {
  const HostKernel kernel = ResolveHostKernel(options);  // throws before anything changes
  std::lock_guard<std::mutex> lock(impl_->run_mutex);
  impl_->kernel = kernel;
}

const HostKernelOptions& HostDriver::options() const { return impl_->kernel.options; }

void HostDriver::Execute(const std::function<void()>& fn) { impl_->arena.Execute(fn); }

void HostDriver::Run(const HostWork* items, size_t count) {
  if (count == 0) return;
  if (items == nullptr)
    throw Error(ErrorKind::kInvalidArgument,
                "HostDriver::Run: items is null, count " + std::to_string(count));
  // Validate everything before touching anything (the item name is formatted on the
  // stack: no heap allocation on the success path).
  for (size_t i = 0; i < count; ++i) {
    char what[48];
    std::snprintf(what, sizeof what, "host work item %zu", i);
    if (items[i].scalars == nullptr)
      throw Error(ErrorKind::kInvalidArgument, std::string(what) + ": scalars is null");
    ValidateStepSpan(*items[i].scalars, items[i].span, what);
  }

  std::lock_guard<std::mutex> lock(impl_->run_mutex);
  std::vector<Piece>& pieces = impl_->pieces;
  pieces.clear();  // keeps capacity
  const size_t grain = impl_->grain;
  for (size_t i = 0; i < count; ++i) {
    const size_t n = items[i].span.n;
    for (size_t off = 0; off < n; off += grain)
      pieces.push_back(Piece{i, off, std::min(grain, n - off)});
  }
  if (pieces.empty()) return;

  const HostKernel& kernel = impl_->kernel;
  impl_->arena.Execute([&] {
    tbb::parallel_for(
        tbb::blocked_range<size_t>(0, pieces.size(), 1),
        [&](const tbb::blocked_range<size_t>& r) {
          FpModeGuard fp_mode;  // per worker thread
          RunWorkProbe();
          for (size_t k = r.begin(); k != r.end(); ++k) {
            const Piece& pc = pieces[k];
            const HostWork& w = items[pc.item];
            kernel.run(*w.scalars, SubSpan(w.span, pc.offset, pc.count), kernel.tuning);
          }
        },
        tbb::simple_partitioner());
  });
}

}  // namespace tandem::cpu
