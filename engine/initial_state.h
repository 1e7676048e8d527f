// Note [Initial state]: the optimizer state an element starts from is a function of its
// weight alone: the master encodes the weight (fp32; bf16; bf16 and its 8- or 16-bit
// correction: engine/master_codec.h), every moment is zero, every q8 scale is the scale
// of zero (num::GroupScaleBits(0)). The one encoder of it, used by the optimizer's
// block-wise initialisation (offload/memory/state_init.h) and by TensorState.
#pragma once

#include "engine/step_span.h"
#include "tandem/types.h"

namespace tandem {

// Writes the initial state of dst.n elements, whose weights are dst.n elements of `src`
// in `dtype`, into every state array dst points to (pointers at the first element; null:
// not kept). Where the master's bf16 (or fp32) array is null but its format keeps one, the
// array is the parameter itself (Note [Master aliases the parameter] in
// engine/layout/state_layout.h): it is not written, and an ecc format's correction is the
// weight's against its own bf16 value.
void EncodeInitialState(const void* src, DType dtype, const StepSpan& dst);

}  // namespace tandem
