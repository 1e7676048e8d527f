// The gradient statistics of a step's pre-pass: GradStats (include/tandem/config.h) to
// and from the pre-pass result (offload/prepass/prepass.h). The host pre-pass itself is
// cpu::HostGradNorm (cpu_simd/host_norm.h), the GPU's gpu::GradNormPlan.
#pragma once

#include <cstdint>

#include "cpu_simd/host_norm.h"
#include "tandem/config.h"

namespace tandem::offload {

using cpu::HostGrad;
using cpu::HostGradNorm;
using cpu::NormResult;

// GradStats <-> NormResult (GradStats::exact holds the normalized digits).
GradStats ToGradStats(const NormResult& r);
NormResult FromGradStats(const GradStats& s);
// whole += part: the exact sums as integers, the non-finite flags or-ed, sum_squares the
// new sum rounded. Throws Error(kInternal) if the sum overflowed (impossible for fewer
// than 2^64 finite float32 values).
void AddNorm(NormResult& whole, const NormResult& part);

}  // namespace tandem::offload
