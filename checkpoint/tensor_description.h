// Internal: a tensor's description without its state, as CheckpointInfo::tensors hold it.
#pragma once

#include "tandem/snapshot.h"

namespace tandem::ckpt {

// t's name, numel, shape, dtypes, group, step and formats; every state array empty. Used for
// the manifest's tensor list (SaveCheckpoint) and as the start of a re-encoded tensor
// (ConvertSnapshot).
inline TensorSnapshot TensorDescription(const TensorSnapshot& t) {
  TensorSnapshot d;
  d.name = t.name;
  d.numel = t.numel;
  d.shape = t.shape;
  d.param_dtype = t.param_dtype;
  d.grad_dtype = t.grad_dtype;
  d.group = t.group;
  d.step = t.step;
  d.formats = t.formats;
  return d;
}

}  // namespace tandem::ckpt
