// Deterministic global gradient norm pre-pass: sum of squares (in double) of every
// gradient element of many tensors and a non-finite flag.
//
// Partition: a work-unit map cuts each tensor into chunks of kNormUnitElems; block b sums
// unit b (each thread a fixed strided subset, then a fixed shared-memory tree) into slot
// b. A single-block finishing kernel sums the slots in the same fixed way. Nothing
// depends on scheduling, so every run gives the same bits. Squares of finite floats are
// finite in double and the sum of at most 2^64 of them stays finite, so the total is
// non-finite exactly when some element is NaN or Inf.
#include <cuda_runtime.h>

#include <cmath>
#include <string>

#include "cuda/cuda_check.h"
#include "cuda/gpu_step.h"
#include "cuda/plan_sizes.h"
#include "engine/fp_bits.h"

namespace tandem::gpu {
namespace detail {

inline constexpr int kNormThreads = 256;
inline constexpr int kNormUnitElems = static_cast<int>(gpu::kNormUnitElems);
inline constexpr int kFinishThreads = 1024;

struct NormTensor {
  const void* ptr;
  uint64_t n;
  uint32_t dtype;
  uint32_t pad;
};

struct NormUnit {
  uint32_t tensor;
  uint32_t chunk;
};
// Note [Plan sizes] in cuda/plan_sizes.h.
static_assert(sizeof(NormTensor) == kNormTensorBytes, "cuda/plan_sizes.h: NormTensor");
static_assert(sizeof(NormUnit) == kNormUnitBytes, "cuda/plan_sizes.h: NormUnit");

// Fixed-order tree sum of one value per thread; the result is valid in thread 0.
template <int kThreads>
__device__ double BlockSum(double x, double* shared) {
  shared[threadIdx.x] = x;
  __syncthreads();
#pragma unroll
  for (int stride = kThreads / 2; stride > 0; stride /= 2) {
    if (threadIdx.x < stride) shared[threadIdx.x] += shared[threadIdx.x + stride];
    __syncthreads();
  }
  return shared[0];
}

__global__ void __launch_bounds__(kNormThreads)
    NormPartialKernel(const NormTensor* tensors, const NormUnit* units, double* partials) {
  __shared__ double shared[kNormThreads];
  const NormUnit unit = units[blockIdx.x];
  const NormTensor t = tensors[unit.tensor];
  const uint64_t begin = uint64_t{unit.chunk} * kNormUnitElems;
  // A tensor left out of this step (GradNormPlan::SetActive) has n = 0 in the table.
  const uint64_t end = begin >= t.n                    ? begin
                       : t.n - begin < kNormUnitElems ? t.n
                                                      : begin + kNormUnitElems;
  double sum = 0.0;
  if (t.dtype == static_cast<uint32_t>(DType::kF32)) {
    const float* p = static_cast<const float*>(t.ptr);
    for (uint64_t i = begin + threadIdx.x; i < end; i += kNormThreads) {
      const double x = p[i];
      sum += x * x;
    }
  } else {
    const uint16_t* p = static_cast<const uint16_t*>(t.ptr);
    const bool bf16 = t.dtype == static_cast<uint32_t>(DType::kBF16);
    for (uint64_t i = begin + threadIdx.x; i < end; i += kNormThreads) {
      const double x = bf16 ? num::Bf16ToF32(p[i]) : num::F16ToF32(p[i]);
      sum += x * x;
    }
  }
  sum = BlockSum<kNormThreads>(sum, shared);
  if (threadIdx.x == 0) partials[blockIdx.x] = sum;
}

__global__ void __launch_bounds__(kFinishThreads)
    NormFinishKernel(const double* partials, uint64_t count, double* total) {
  __shared__ double shared[kFinishThreads];
  double sum = 0.0;
  for (uint64_t i = threadIdx.x; i < count; i += kFinishThreads) sum += partials[i];
  sum = BlockSum<kFinishThreads>(sum, shared);
  if (threadIdx.x == 0) *total = sum;
}

}  // namespace detail

namespace {

using detail::CheckCuda;

std::string Where() { return "gpu::GradNormPlan: "; }

template <typename T>
T* DeviceAlloc(size_t count, const char* what) {
  void* p = nullptr;
  CheckCuda(cudaMalloc(&p, count * sizeof(T)), Where() + "cudaMalloc of the " + what + " (" +
                                                   std::to_string(count * sizeof(T)) + " bytes)");
  return static_cast<T*>(p);
}

}  // namespace

GradNormPlan::GradNormPlan(const std::vector<GradRef>& grads)
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
    tensors[i] = detail::NormTensor{g.ptr, g.n, static_cast<uint32_t>(g.dtype), 0};
    const uint64_t chunks = (g.n + detail::kNormUnitElems - 1) / detail::kNormUnitElems;
    for (uint64_t c = 0; c < chunks; ++c)
      units.push_back({static_cast<uint32_t>(i), static_cast<uint32_t>(c)});
  }
  if (units.size() > 0x7FFFFFFFu)
    throw Error(ErrorKind::kInvalidArgument, Where() + "too many elements for one launch");
  num_units_ = units.size();
  try {
    if (!tensors.empty()) {
      auto* dt = DeviceAlloc<detail::NormTensor>(tensors.size(), "tensor table");
      device_tensors_ = dt;
      CheckCuda(cudaMemcpy(dt, tensors.data(), tensors.size() * sizeof(tensors[0]),
                           cudaMemcpyHostToDevice),
                Where() + "cudaMemcpy of the tensor table");
    }
    if (!units.empty()) {
      auto* du = DeviceAlloc<detail::NormUnit>(units.size(), "work-unit map");
      device_units_ = du;
      CheckCuda(
          cudaMemcpy(du, units.data(), units.size() * sizeof(units[0]), cudaMemcpyHostToDevice),
          Where() + "cudaMemcpy of the work-unit map");
      device_partials_ = DeviceAlloc<double>(units.size(), "partial sums");
    }
    device_total_ = DeviceAlloc<double>(1, "total");
    void* host = nullptr;
    CheckCuda(cudaMallocHost(&host, sizeof(double)), Where() + "cudaMallocHost of the result");
    host_total_ = static_cast<double*>(host);
    *host_total_ = 0.0;
  } catch (...) {
    Release();
    throw;
  }
}

GradNormPlan::~GradNormPlan() { Release(); }

void GradNormPlan::Release() noexcept {
  if (device_tensors_ != nullptr) cudaFree(device_tensors_);
  if (device_units_ != nullptr) cudaFree(device_units_);
  if (device_partials_ != nullptr) cudaFree(device_partials_);
  if (device_total_ != nullptr) cudaFree(device_total_);
  if (host_total_ != nullptr) cudaFreeHost(host_total_);
  device_tensors_ = device_units_ = nullptr;
  device_partials_ = device_total_ = host_total_ = nullptr;
}

void GradNormPlan::Launch(void* stream) {
  const cudaStream_t s = static_cast<cudaStream_t>(stream);
  if (num_units_ > 0) {
    detail::NormPartialKernel<<<static_cast<unsigned>(num_units_), detail::kNormThreads, 0, s>>>(
        static_cast<const detail::NormTensor*>(device_tensors_),
        static_cast<const detail::NormUnit*>(device_units_), device_partials_);
    CheckCuda(cudaGetLastError(), Where() + "partial-sum kernel (" + std::to_string(num_tensors_) +
                                      " tensors, grid " + std::to_string(num_units_) + ")");
  }
  detail::NormFinishKernel<<<1, detail::kFinishThreads, 0, s>>>(device_partials_, num_units_,
                                                                device_total_);
  CheckCuda(cudaGetLastError(), Where() + "finishing kernel");
  CheckCuda(cudaMemcpyAsync(host_total_, device_total_, sizeof(double), cudaMemcpyDeviceToHost, s),
            Where() + "cudaMemcpyAsync of the result");
}

void GradNormPlan::SetActive(const std::vector<uint8_t>& active, void* stream) {
  if (!active.empty() && active.size() != num_tensors_)
    throw Error(ErrorKind::kInvalidArgument, Where() + "SetActive: " +
                                                 std::to_string(active.size()) + " flags for " +
                                                 std::to_string(num_tensors_) + " tensors");
  std::vector<uint8_t> next(num_tensors_, 1);
  for (size_t i = 0; i < active.size(); ++i) next[i] = active[i] != 0 ? 1 : 0;
  if (next == active_) return;
  std::vector<detail::NormTensor> table(num_tensors_);
  for (size_t i = 0; i < num_tensors_; ++i) {
    const GradRef& g = grads_[i];
    table[i] = detail::NormTensor{g.ptr, next[i] != 0 ? g.n : 0, static_cast<uint32_t>(g.dtype), 0};
  }
  // From pageable memory: the copy is staged before cudaMemcpyAsync returns, so `table`
  // may go away; it runs in stream order, before the next Launch.
  CheckCuda(cudaMemcpyAsync(device_tensors_, table.data(), table.size() * sizeof(table[0]),
                            cudaMemcpyHostToDevice, static_cast<cudaStream_t>(stream)),
            Where() + "cudaMemcpyAsync of the tensor table (SetActive)");
  active_ = std::move(next);
}

GradNormPlan::Result GradNormPlan::Read() const {
  const double total = *host_total_;
  return Result{total, !std::isfinite(total)};
}

size_t GradNormPlan::device_bytes() const {
  return num_tensors_ * sizeof(detail::NormTensor) +
         num_units_ * (sizeof(detail::NormUnit) + sizeof(double)) + sizeof(double);
}

size_t GradNormPlan::PredictDeviceBytes(const std::vector<uint64_t>& tensor_numels) {
  return PredictGradNormPlanBytes(tensor_numels);
}

}  // namespace tandem::gpu
