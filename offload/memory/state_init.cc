// Note [Block-wise initialisation] (offload/memory/state_init.h).
#include "offload/memory/state_init.h"

#include <tbb/parallel_for.h>

#include <algorithm>
#include <condition_variable>
#include <cstring>
#include <mutex>
#include <type_traits>

#include "engine/initial_state.h"
#include "engine/state_arrays.h"
#include "tandem/error.h"

namespace tandem::offload {
namespace {

// The state pointers of `s` that are written at init: the aliased master is left out.
StepSpan WrittenArrays(const InitRegion& r) {
  StepSpan s = r.state;
  if (r.alias_param) {
    if (s.formats.master == MasterFormat::kF32)
      s.master.f32 = nullptr;
    else
      s.master.bf16 = nullptr;
  }
  return s;
}

// The arrays whose initial bytes are all zero (fp32 moments, q8 codes): a staged region
// zeroes them in place where InitIo::zero is given.
constexpr bool ZeroArray(StateArray a) {
  return a == StateArray::kMF32 || a == StateArray::kMCodes || a == StateArray::kVF32 ||
         a == StateArray::kVCodes;
}

// Whether array `a` of a staged block goes through staging (else it is zeroed in place).
bool Staged(StateArray a, const InitIo& io) { return !(io.zero && ZeroArray(a)); }

// Staging bytes for one block of `n` elements of region r.
uint64_t StagingBytes(const InitRegion& r, uint64_t n, const InitIo& io) {
  uint64_t bytes = io.params_on_device ? layout::Aligned(n * DTypeSize(r.param_dtype)) : 0;
  const StepSpan written = WrittenArrays(r);
  if (r.staged)
    ForEachStateArray(written, [&](StateArray a, auto* p) {
      if (p != nullptr && Staged(a, io)) bytes += layout::Aligned(ArrayEntries(a, n) * sizeof(*p));
    });
  return bytes;
}

struct Block {
  uint32_t region;
  uint64_t off, n;  // within the region
};

// A fixed set of staging buffers handed to one block at a time.
class StagingPool {
 public:
  StagingPool(MemKind kind, uint64_t bytes, int slots) : bytes_(bytes) {
    if (bytes == 0) return;
    slab_ = Slab(kind, bytes * slots, "optimizer state initialisation staging");
    for (int i = 0; i < slots; ++i) free_.push_back(slab_.data() + bytes * i);
  }
  uint8_t* Acquire() {
    if (bytes_ == 0) return nullptr;
    std::unique_lock lock(mu_);
    cv_.wait(lock, [&] { return !free_.empty(); });
    uint8_t* p = free_.back();
    free_.pop_back();
    return p;
  }
  void Release(uint8_t* p) {
    if (p == nullptr) return;
    {
      std::lock_guard lock(mu_);
      free_.push_back(p);
    }
    cv_.notify_one();
  }

 private:
  uint64_t bytes_;
  Slab slab_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<uint8_t*> free_;
};

void InitBlock(const InitRegion& r, const Block& b, const InitIo& io, uint8_t* staging) {
  const size_t psz = DTypeSize(r.param_dtype);
  const uint8_t* src = static_cast<const uint8_t*>(r.param) + (r.offset + b.off) * psz;
  if (io.params_on_device) {
    io.copy(staging, src, b.n * psz);
    src = staging;
    staging += layout::Aligned(b.n * psz);
  }
  const StepSpan dst = SubSpan(WrittenArrays(r), b.off, b.n);
  if (!r.staged) {
    EncodeInitialState(src, r.param_dtype, dst);
    return;
  }
  // The block's arrays in staging (the pointers of dst, less the arrays zeroed in
  // place), then one copy per array.
  StepSpan st = dst;
  ForEachStateArray(st, [&](StateArray a, auto*& p) {
    if (p == nullptr) return;
    if (!Staged(a, io)) {
      io.zero(p, ArrayEntries(a, b.n) * sizeof(*p));
      p = nullptr;
      return;
    }
    p = reinterpret_cast<std::remove_reference_t<decltype(p)>>(staging);
    staging += layout::Aligned(ArrayEntries(a, b.n) * sizeof(*p));
  });
  EncodeInitialState(src, r.param_dtype, st);
  void* to[kStateArrayCount];
  ForEachStateArray(dst, [&](StateArray a, auto* p) { to[static_cast<int>(a)] = p; });
  ForEachStateArray(st, [&](StateArray a, auto* p) {
    if (p != nullptr) io.copy(to[static_cast<int>(a)], p, ArrayEntries(a, b.n) * sizeof(*p));
  });
}

}  // namespace

InitRegion RegionOf(const TensorSpec& s, const layout::Part& p, bool staged) {
  InitRegion r;
  r.param = s.param;
  r.param_dtype = s.param_dtype;
  r.offset = p.offset;
  r.count = p.count;
  r.state = p.state;
  r.alias_param = p.alias_param;
  r.staged = staged;
  return r;
}

uint64_t RegionElements(const std::vector<InitRegion>& regions) {
  uint64_t n = 0;
  for (const InitRegion& r : regions) n += r.count;
  return n;
}

void InitRegions(const std::vector<InitRegion>& regions, const InitIo& io,
                 ProgressLog* progress) {
  const uint64_t be = io.block_elements;
  if (be == 0 || be % kQuantGroup != 0)
    throw Error(ErrorKind::kInvalidArgument,
                "InitRegions: block_elements must be a positive multiple of 32, got " +
                    std::to_string(be));
  std::vector<Block> blocks;
  uint64_t staging = 0;
  for (size_t i = 0; i < regions.size(); ++i) {
    const InitRegion& r = regions[i];
    if (r.count == 0) continue;
    if (r.offset % kQuantGroup != 0)
      throw Error(ErrorKind::kInvalidArgument,
                  "InitRegions: region " + std::to_string(i) + " starts at element " +
                      std::to_string(r.offset) + ", not a multiple of 32");
    for (uint64_t off = 0; off < r.count; off += be)
      blocks.push_back({static_cast<uint32_t>(i), off, std::min(be, r.count - off)});
    staging = std::max(staging, StagingBytes(r, std::min(be, r.count), io));
  }
  if (staging > 0 && !io.copy)
    throw Error(ErrorKind::kInvalidArgument, "InitRegions: staged regions need a copy function");
  StagingPool pool(io.staging_kind, staging, std::max(io.staging_slots, 1));
  tbb::parallel_for(tbb::blocked_range<size_t>(0, blocks.size(), 1),
                    [&](const tbb::blocked_range<size_t>& range) {
                      for (size_t k = range.begin(); k < range.end(); ++k) {
                        const Block& b = blocks[k];
                        uint8_t* s = pool.Acquire();
                        try {
                          InitBlock(regions[b.region], b, io, s);
                        } catch (...) {
                          pool.Release(s);
                          throw;
                        }
                        pool.Release(s);
                        if (progress != nullptr) progress->Add(b.n);
                      }
                    });
}

}  // namespace tandem::offload
