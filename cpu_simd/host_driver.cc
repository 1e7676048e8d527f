// HostDriver: group-aligned pieces of every item, stepped in parallel in an owned
// oneTBB task_arena. Each worker task holds its own FpModeGuard (the MXCSR is per
// thread), so results never depend on a worker's FP mode.
#include <tbb/blocked_range.h>
#include <tbb/parallel_for.h>
#include <tbb/partitioner.h>
#include <tbb/task_arena.h>

#include <algorithm>
#include <cstdio>
#include <mutex>
#include <string>
#include <vector>

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
  int threads;
  size_t grain;
  tbb::task_arena arena;
  std::vector<Piece> pieces;  // reused between runs
  std::mutex run_mutex;

  Impl(int t, size_t g) : threads(t), grain(g), arena(t) {}
};

HostDriver::HostDriver(int threads, size_t grain_elements) {
  if (threads < 0)
    throw Error(ErrorKind::kInvalidArgument,
                "HostDriver: threads must be >= 0, got " + std::to_string(threads));
  const int t = threads == 0 ? tbb::this_task_arena::max_concurrency() : threads;
  size_t grain = (grain_elements + kQuantGroup - 1) / kQuantGroup * kQuantGroup;
  if (grain == 0) grain = kQuantGroup;
  impl_ = std::make_unique<Impl>(t, grain);
  impl_->arena.initialize();
}

HostDriver::~HostDriver() = default;

int HostDriver::threads() const { return impl_->threads; }
size_t HostDriver::grain_elements() const { return impl_->grain; }

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

  const SpanKernel kernel = ActiveKernel();
  impl_->arena.execute([&] {
    tbb::parallel_for(
        tbb::blocked_range<size_t>(0, pieces.size(), 1),
        [&](const tbb::blocked_range<size_t>& r) {
          FpModeGuard fp_mode;  // per worker thread
          for (size_t k = r.begin(); k != r.end(); ++k) {
            const Piece& pc = pieces[k];
            const HostWork& w = items[pc.item];
            kernel(*w.scalars, SubSpan(w.span, pc.offset, pc.count));
          }
        },
        tbb::simple_partitioner());
  });
}

}  // namespace tandem::cpu
