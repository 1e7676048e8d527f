// The scalar reference step: the definition every other kernel must match byte for byte.
#pragma once

#include "engine/step_scalars.h"
#include "engine/step_span.h"

namespace tandem {

// Applies one optimizer step to `span`: decodes the state of each group, updates each
// element with engine/update_math.h, re-encodes the state and writes the parameter.
// Runs with IEEE round-to-nearest and no flush-to-zero whatever the caller's FP mode
// (restored on return). Validates `span` first (ValidateStepSpan); on a throw nothing
// has been written.
void ReferenceStep(const StepScalars& s, const StepSpan& span);

}  // namespace tandem
