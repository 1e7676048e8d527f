// The gradient pre-pass on the GPU: the exact sum of squares of every gradient element of
// many tensors and a non-finite flag (Note [Exact sum of squares] in engine/exact_sum.h).
//
// A unit is a range of pieces of one tensor (engine/layout/plan_sizes.h); block b takes unit b, its
// warps the unit's pieces in turn. A warp sums a piece in the note's order (lane j takes
// elements j, j+32, ...; then a shuffle tree), and its lane 0 adds the piece sum exactly
// into its 512-bit accumulator. The block adds its warps' accumulators into the unit's
// partial; a single-block finishing kernel adds the partials. Integer additions: the
// result depends on nothing but the pieces, and equals offload::HostGradNorm's.
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <string>

#include "cuda/cuda_check.h"
#include "cuda/gpu_step.h"
#include "engine/layout/plan_sizes.h"
#include "engine/exact_sum.h"
#include "engine/fp_bits.h"

namespace tandem::gpu {
namespace detail {

inline constexpr int kNormThreads = 256;
inline constexpr int kNormWarps = kNormThreads / 32;
inline constexpr int kFinishThreads = 1024;
inline constexpr int kLimbs = exact::kDigits;
inline constexpr int kPartialWords = kLimbs + 1;  // limbs, then the non-finite flag
static_assert(kNormPieceElems == exact::kNormPiece, "engine/layout/plan_sizes.h: piece size");
static_assert(kNormPartialBytes == kPartialWords * 8 && kNormResultBytes == kPartialWords * 8,
              "engine/layout/plan_sizes.h: partials");

struct NormTensor {
  const void* ptr;
  uint64_t n;    // 0 for a tensor left out of this step (SetActive)
  uint64_t run;  // elements per run (never 0 here)
  uint32_t dtype;
  uint32_t pad;  // kKept: its partials are kept from NormTensorKernel (SetActive's keep)
};
inline constexpr uint32_t kKept = 1;

struct NormUnit {
  uint64_t first_piece;
  uint32_t pieces;
  uint32_t tensor;
};
// Note [Plan sizes] in engine/layout/plan_sizes.h.
static_assert(sizeof(NormTensor) == kNormTensorBytes, "engine/layout/plan_sizes.h: NormTensor");
static_assert(sizeof(NormUnit) == kNormUnitBytes, "engine/layout/plan_sizes.h: NormUnit");

__device__ __forceinline__ double Square(const void* ptr, uint32_t dtype, uint64_t i) {
  double x;
  if (dtype == static_cast<uint32_t>(DType::kF32)) {
    x = static_cast<const float*>(ptr)[i];
  } else {
    const uint16_t h = static_cast<const uint16_t*>(ptr)[i];
    x = dtype == static_cast<uint32_t>(DType::kBF16) ? num::Bf16ToF32(h) : num::F16ToF32(h);
  }
  return __dmul_rn(x, x);  // exact: the square of a float fits in a double
}

// Unit `unit` of tensor `t`: its pieces' sums into `out` (17 words). A block-wide
// function (its threads all call it, with the same arguments).
__device__ __forceinline__ void UnitPartial(const NormTensor& t, const NormUnit& unit,
                                            uint64_t* out) {
  __shared__ uint64_t shared[kNormWarps][kPartialWords];
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const uint64_t per_run = (t.run + kNormPieceElems - 1) / kNormPieceElems;
  exact::Acc acc;
  exact::Clear(acc);
  bool bad = false;
  // A tensor left out of this step has n = 0: its units add nothing.
  const uint64_t end = t.n > 0 ? unit.first_piece + unit.pieces : unit.first_piece;
  for (uint64_t p = unit.first_piece + warp; p < end; p += kNormWarps) {
    const uint64_t in_run = p % per_run * kNormPieceElems;
    const uint64_t begin = p / per_run * t.run + in_run;
    const uint64_t len = t.run - in_run < kNormPieceElems ? t.run - in_run : kNormPieceElems;
    double sum = 0.0;
    for (uint64_t i = lane; i < len; i += 32)
      sum = __dadd_rn(sum, Square(t.ptr, t.dtype, begin + i));
#pragma unroll
    for (int s = 16; s > 0; s /= 2) sum = __dadd_rn(sum, __shfl_down_sync(0xFFFFFFFFu, sum, s));
    if (lane == 0) {
      if (isfinite(sum))
        exact::Add(acc, sum);
      else
        bad = true;
    }
  }
  if (lane == 0) {
    exact::Normalize(acc);  // at most 2^16 additions of < 2^33: no overflow
    for (int k = 0; k < kLimbs; ++k) shared[warp][k] = acc.limb[k];
    shared[warp][kLimbs] = bad ? 1 : 0;
  }
  __syncthreads();
  if (threadIdx.x < kPartialWords) {
    uint64_t sum = 0;
    for (int w = 0; w < kNormWarps; ++w) sum += shared[w][threadIdx.x];  // < 2^35
    out[threadIdx.x] = sum;
  }
}

// Block b: unit b of the table. A tensor marked kKept keeps the partials its last
// NormTensorKernel left (early start): its blocks return at once.
__global__ void __launch_bounds__(kNormThreads)
    NormPartialKernel(const NormTensor* tensors, const NormUnit* units, uint64_t* partials) {
  const NormUnit unit = units[blockIdx.x];
  const NormTensor t = tensors[unit.tensor];
  if (t.pad == kKept) return;  // the same for every thread of the block
  UnitPartial(t, unit, partials + uint64_t{blockIdx.x} * kPartialWords);
}

// Early start: block b takes unit first_unit + b, of tensor `t` (by value).
__global__ void __launch_bounds__(kNormThreads)
    NormTensorKernel(NormTensor t, const NormUnit* units, uint64_t first_unit,
                     uint64_t* partials) {
  const uint64_t u = first_unit + blockIdx.x;
  UnitPartial(t, units[u], partials + u * kPartialWords);
}

// Adds the partials word by word: thread i takes word i % 17 of units i / 17, i / 17 +
// kRows, ...; then the per-thread sums of each word are added. Each word of a partial is
// < 2^35 and there are fewer than 2^28 units: no overflow.
__global__ void __launch_bounds__(kFinishThreads)
    NormFinishKernel(const uint64_t* partials, uint64_t count, uint64_t* total) {
  constexpr int kRows = kFinishThreads / kPartialWords;
  __shared__ uint64_t shared[kRows][kPartialWords];
  const int word = threadIdx.x % kPartialWords, row = threadIdx.x / kPartialWords;
  if (row < kRows) {
    uint64_t sum = 0;
    for (uint64_t u = row; u < count; u += kRows) sum += partials[u * kPartialWords + word];
    shared[row][word] = sum;
  }
  __syncthreads();
  if (threadIdx.x < kPartialWords) {
    uint64_t sum = 0;
    for (int r = 0; r < kRows; ++r) sum += shared[r][threadIdx.x];
    total[threadIdx.x] = sum;
  }
}

}  // namespace detail

namespace {

using detail::CheckCuda;

std::string Where() { return "gpu::GradNormPlan: "; }

template <typename T>
DeviceBuffer DeviceArray(DeviceAllocator* memory, size_t count, const char* what) {
  return DeviceBuffer(memory, count * sizeof(T), Where() + "the " + what);
}

uint64_t* Words(const DeviceBuffer& b) { return static_cast<uint64_t*>(b.get()); }

}  // namespace

GradNormPlan::GradNormPlan(const std::vector<GradRef>& grads, DeviceAllocator* memory)
    : num_tensors_(grads.size()), grads_(grads), active_(grads.size(), 1) {
  std::vector<detail::NormTensor> tensors(grads.size());
  std::vector<detail::NormUnit> units;
  for (size_t i = 0; i < grads.size(); ++i) {
    const GradRef& g = grads[i];
    if (g.dtype != DType::kF32 && g.dtype != DType::kBF16 && g.dtype != DType::kF16)
      throw Error(ErrorKind::kInvalidArgument,
                  Where() + "tensor " + std::to_string(i) + " has an unknown dtype");
    if (g.n > 0 && g.ptr == nullptr)
      throw Error(ErrorKind::kInvalidArgument, Where() + "tensor " + std::to_string(i) + " has " +
                                                   std::to_string(g.n) +
                                                   " elements but a null pointer");
    const uint64_t run = g.run == 0 ? g.n : g.run;
    if (g.n > 0 && g.n % run != 0)
      throw Error(ErrorKind::kInvalidArgument, Where() + "tensor " + std::to_string(i) +
                                                   ": run " + std::to_string(run) +
                                                   " does not divide " + std::to_string(g.n));
    tensors[i] = detail::NormTensor{g.ptr, g.n, run, static_cast<uint32_t>(g.dtype), 0};
    const NormSize size{g.n, g.run};
    const uint64_t pieces = NormPieces(size), per = NormPiecesPerUnit(size);
    first_unit_.push_back(units.size());
    for (uint64_t p = 0; p < pieces; p += per)
      units.push_back({p, static_cast<uint32_t>(std::min(per, pieces - p)),
                       static_cast<uint32_t>(i)});
  }
  first_unit_.push_back(units.size());
  if (units.size() > 0x7FFFFFFFu)
    throw Error(ErrorKind::kInvalidArgument, Where() + "too many elements for one launch");
  num_units_ = units.size();
  try {
    if (!tensors.empty()) {
      device_tensors_ = DeviceArray<detail::NormTensor>(memory, tensors.size(), "tensor table");
      CheckCuda(cudaMemcpy(device_tensors_.get(), tensors.data(), tensors.size() * sizeof(tensors[0]),
                           cudaMemcpyHostToDevice),
                Where() + "cudaMemcpy of the tensor table");
    }
    if (!units.empty()) {
      device_units_ = DeviceArray<detail::NormUnit>(memory, units.size(), "work-unit map");
      CheckCuda(cudaMemcpy(device_units_.get(), units.data(), units.size() * sizeof(units[0]),
                           cudaMemcpyHostToDevice),
                Where() + "cudaMemcpy of the work-unit map");
      device_partials_ =
          DeviceArray<uint64_t>(memory, units.size() * detail::kPartialWords, "partial sums");
    }
    device_total_ = DeviceArray<uint64_t>(memory, detail::kPartialWords, "total");
    void* host = nullptr;
    CheckCuda(cudaMallocHost(&host, kNormResultBytes), Where() + "cudaMallocHost of the result");
    host_total_ = static_cast<uint64_t*>(host);
    for (int k = 0; k < detail::kPartialWords; ++k) host_total_[k] = 0;
    if (!tensors.empty()) {
      device_tensor_totals_ =
          DeviceArray<uint64_t>(memory, tensors.size() * detail::kPartialWords, "tensor totals");
      void* totals = nullptr;
      CheckCuda(cudaMallocHost(&totals, tensors.size() * kNormResultBytes),
                Where() + "cudaMallocHost of the tensor totals");
      host_tensor_totals_ = static_cast<uint64_t*>(totals);
      for (size_t k = 0; k < tensors.size() * detail::kPartialWords; ++k)
        host_tensor_totals_[k] = 0;
    }
  } catch (...) {
    Release();
    throw;
  }
}

GradNormPlan::~GradNormPlan() { Release(); }

void GradNormPlan::Release() noexcept {
  if (host_total_ != nullptr) cudaFreeHost(host_total_);
  if (host_tensor_totals_ != nullptr) cudaFreeHost(host_tensor_totals_);
  host_total_ = host_tensor_totals_ = nullptr;
  device_tensors_ = DeviceBuffer();
  device_units_ = DeviceBuffer();
  device_partials_ = DeviceBuffer();
  device_total_ = DeviceBuffer();
  device_tensor_totals_ = DeviceBuffer();
}

void GradNormPlan::Launch(void* stream) {
  const cudaStream_t s = static_cast<cudaStream_t>(stream);
  if (num_units_ > 0) {
    detail::NormPartialKernel<<<static_cast<unsigned>(num_units_), detail::kNormThreads, 0, s>>>(
        static_cast<const detail::NormTensor*>(device_tensors_.get()),
        static_cast<const detail::NormUnit*>(device_units_.get()), Words(device_partials_));
    TANDEM_CUDA(cudaGetLastError(), Where() + "partial-sum kernel (" +
                                          std::to_string(num_tensors_) + " tensors, grid " +
                                          std::to_string(num_units_) + ")");
  }
  detail::NormFinishKernel<<<1, detail::kFinishThreads, 0, s>>>(Words(device_partials_),
                                                                num_units_, Words(device_total_));
  TANDEM_CUDA(cudaGetLastError(), Where() + "finishing kernel");
  TANDEM_CUDA(cudaMemcpyAsync(host_total_, device_total_.get(), kNormResultBytes,
                              cudaMemcpyDeviceToHost, s),
              Where() + "cudaMemcpyAsync of the result");
}

void GradNormPlan::SetActive(const std::vector<uint8_t>& active, void* stream,
                             const std::vector<uint8_t>& keep) {
  for (const std::vector<uint8_t>* v : {&active, &keep})
    if (!v->empty() && v->size() != num_tensors_)
      throw Error(ErrorKind::kInvalidArgument, Where() + "SetActive: " +
                                                   std::to_string(v->size()) + " flags for " +
                                                   std::to_string(num_tensors_) + " tensors");
  std::vector<uint8_t> next(num_tensors_, 1);
  for (size_t i = 0; i < active.size(); ++i) next[i] = active[i] != 0 ? 1 : 0;
  for (size_t i = 0; i < keep.size(); ++i)
    if (keep[i] != 0 && next[i] != 0) next[i] = 2;
  if (next == active_ && !pointers_changed_) return;
  std::vector<detail::NormTensor> table(num_tensors_);
  for (size_t i = 0; i < num_tensors_; ++i) {
    const GradRef& g = grads_[i];
    table[i] = detail::NormTensor{g.ptr, next[i] != 0 ? g.n : 0, g.run == 0 ? g.n : g.run,
                                  static_cast<uint32_t>(g.dtype),
                                  next[i] == 2 ? detail::kKept : 0};
  }
  // From pageable memory: the copy is staged before cudaMemcpyAsync returns, so `table`
  // may go away; it runs in stream order, before the next Launch.
  TANDEM_CUDA(cudaMemcpyAsync(device_tensors_.get(), table.data(), table.size() * sizeof(table[0]),
                              cudaMemcpyHostToDevice, static_cast<cudaStream_t>(stream)),
              Where() + "cudaMemcpyAsync of the tensor table (SetActive)");
  active_ = std::move(next);
  pointers_changed_ = false;
}

void GradNormPlan::LaunchTensor(size_t tensor, void* stream) {
  if (tensor >= num_tensors_)
    throw Error(ErrorKind::kInvalidArgument, Where() + "LaunchTensor: tensor " +
                                                 std::to_string(tensor) + " of " +
                                                 std::to_string(num_tensors_));
  const cudaStream_t s = static_cast<cudaStream_t>(stream);
  const GradRef& g = grads_[tensor];
  const uint64_t first = first_unit_[tensor], count = first_unit_[tensor + 1] - first;
  uint64_t* partials = Words(device_partials_) + first * detail::kPartialWords;
  uint64_t* total = Words(device_tensor_totals_) + tensor * detail::kPartialWords;
  if (count > 0) {
    const detail::NormTensor t{g.ptr, g.n, g.run == 0 ? g.n : g.run,
                               static_cast<uint32_t>(g.dtype), 0};
    detail::NormTensorKernel<<<static_cast<unsigned>(count), detail::kNormThreads, 0, s>>>(
        t, static_cast<const detail::NormUnit*>(device_units_.get()), first,
        Words(device_partials_));
    TANDEM_CUDA(cudaGetLastError(), Where() + "partial-sum kernel of tensor " +
                                        std::to_string(tensor) + " (grid " +
                                        std::to_string(count) + ")");
  }
  detail::NormFinishKernel<<<1, detail::kFinishThreads, 0, s>>>(partials, count, total);
  TANDEM_CUDA(cudaGetLastError(), Where() + "finishing kernel of tensor " + std::to_string(tensor));
  TANDEM_CUDA(cudaMemcpyAsync(host_tensor_totals_ + tensor * detail::kPartialWords, total,
                              kNormResultBytes, cudaMemcpyDeviceToHost, s),
              Where() + "cudaMemcpyAsync of tensor " + std::to_string(tensor) + "'s total");
}

void GradNormPlan::SetGrad(size_t tensor, const void* grad) {
  if (tensor >= num_tensors_)
    throw Error(ErrorKind::kInvalidArgument, Where() + "SetGrad: tensor " +
                                                 std::to_string(tensor) + " of " +
                                                 std::to_string(num_tensors_));
  GradRef& g = grads_[tensor];
  if (grad == nullptr && g.n > 0)
    throw Error(ErrorKind::kInvalidArgument,
                Where() + "SetGrad: tensor " + std::to_string(tensor) + ": grad is null");
  if (g.ptr == grad) return;
  g.ptr = grad;
  pointers_changed_ = true;
}

namespace {
GradNormPlan::Result ReadTotal(const uint64_t* words) {
  GradNormPlan::Result r{};
  for (int k = 0; k < detail::kLimbs; ++k) r.exact.limb[k] = words[k];
  if (!exact::Normalize(r.exact))
    throw Error(ErrorKind::kInternal, Where() + "the exact sum overflowed");
  r.sum_squares = exact::ToDouble(r.exact);
  r.nonfinite = words[detail::kLimbs] != 0;
  return r;
}
}  // namespace

GradNormPlan::Result GradNormPlan::Read() const { return ReadTotal(host_total_); }

GradNormPlan::Result GradNormPlan::ReadTensor(size_t tensor) const {
  if (tensor >= num_tensors_)
    throw Error(ErrorKind::kInvalidArgument, Where() + "ReadTensor: tensor " +
                                                 std::to_string(tensor) + " of " +
                                                 std::to_string(num_tensors_));
  return ReadTotal(host_tensor_totals_ + tensor * detail::kPartialWords);
}

size_t GradNormPlan::device_bytes() const {
  return num_tensors_ * (sizeof(detail::NormTensor) + kNormResultBytes) +
         num_units_ * (sizeof(detail::NormUnit) + kNormPartialBytes) + kNormResultBytes;
}

size_t GradNormPlan::PredictDeviceBytes(const std::vector<NormSize>& tensors) {
  return PredictGradNormPlanBytes(tensors);
}

}  // namespace tandem::gpu
