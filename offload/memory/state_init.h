// Initialising the optimizer state from the parameters, block by block and in parallel.
//
// Note [Block-wise initialisation]: the initial state of an element is a function of its
// parameter alone (the master encodes the parameter, moments are zero, q8 scales are
// num::GroupScaleBits(0)), so every part of every tensor (the hot part, the host-computed
// part, each streamed piece) is cut into blocks of whole quantization groups and the
// blocks are encoded independently, on the caller's TBB arena: a block's parameters are
// read (straight from the parameter, or through a staging buffer where they are on the
// device), and its arrays are encoded straight into their destination where it is host
// memory, or into a staging buffer copied up array by array where it is device memory
// (all-zero arrays there are zeroed in place on the device instead).
// No whole-tensor copy is ever made, and host destinations are first touched by the
// threads that encode them. The bits are those of TensorState's constructor (and of the
// whole-tensor snapshot this replaces): tests/offload/state_init_test.cc checks them.
//
// An aliased master (Note [Master aliases the parameter], engine/layout/state_layout.h) is the
// parameter: its array is never written, so it keeps exactly the parameter's bits.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <vector>

#include "engine/layout/state_layout.h"
#include "engine/step_span.h"
#include "offload/memory/slab.h"
#include "offload/memory/progress_log.h"
#include "tandem/config.h"
#include "tandem/types.h"

namespace tandem::offload {

// One destination: elements [offset, offset + count) of a tensor and their state arrays
// (`state`: a part's StepSpan, pointers at the region's first element; null where the
// formats or the algorithm keep no such array). offset is a multiple of kQuantGroup.
struct InitRegion {
  const void* param = nullptr;  // the tensor's parameter, element 0
  DType param_dtype = DType::kF32;
  uint64_t offset = 0, count = 0;
  StepSpan state;
  bool alias_param = false;  // the master's fp32 or bf16 array is the parameter: not written
  bool staged = false;       // the arrays are device memory: encoded in staging, then copied
};

// The region of elements [p.offset, p.offset + p.count) of tensor `s`, whose state is
// the part `p` (engine/layout/state_layout.h); staged: its arrays are device memory.
InitRegion RegionOf(const TensorSpec& s, const layout::Part& p, bool staged);

struct InitIo {
  // Synchronous copy between device memory and staging memory; called from several
  // threads at once. Unused (may be empty) when nothing is staged or on the device.
  std::function<void(void* dst, const void* src, size_t bytes)> copy;
  // Optional: sets `bytes` of device memory to zero; called from several threads at once.
  // Where given, a staged region's all-zero arrays (fp32 moments, q8 codes) are zeroed
  // in place instead of going through staging and `copy`.
  std::function<void(void* dst, size_t bytes)> zero;
  bool params_on_device = false;    // read parameters through `copy` into staging
  MemKind staging_kind = MemKind::kHost;  // kPinned in GPU mode
  uint64_t block_elements = uint64_t{1} << 20;  // a positive multiple of kQuantGroup
  int staging_slots = 1;  // staging buffers: at least the threads that may run at once
};

// Encodes the initial state of every region, in parallel on the current TBB arena
// (blocks of io.block_elements). progress (optional) receives the elements done.
// Staging memory is allocated on the calling thread (io.staging_slots buffers), and freed
// before returning. Throws what `copy` or the staging allocation throws
// (Error(kOutOfMemory) for the latter); the regions are then partly written.
void InitRegions(const std::vector<InitRegion>& regions, const InitIo& io,
                 ProgressLog* progress = nullptr);

// Elements in all regions (the progress total).
uint64_t RegionElements(const std::vector<InitRegion>& regions);

}  // namespace tandem::offload
