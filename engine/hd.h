// TANDEM_HD marks the scalar numerics that both the host reference and CUDA kernels use.
// Under nvcc it expands to __host__ __device__ so that the GPU runs the very same source;
// elsewhere it is plain `inline`.
#pragma once

#if defined(__CUDACC__)
#define TANDEM_HD __host__ __device__ __forceinline__
#else
#define TANDEM_HD inline
#endif
