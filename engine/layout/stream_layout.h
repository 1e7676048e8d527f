// StreamLayout: the host-resident state that the GPU kernel computes (Placement's
// stream_count of each tensor), laid out chunk-major in one host slab.
//
// Note [Chunk-major streaming]: the streamed elements are cut into pieces (a tensor's
// streamed range, or a group-aligned part of it) and the pieces are packed, in
// registration order, into chunks of at most OptimizerConfig::stream_chunk_bytes. A
// piece's arrays are carved one after the other (StateLayout, one part per piece), so a
// chunk is one contiguous byte range: it moves up in one copy into a device slot, the
// fused kernel steps the chunk's spans there, and it moves down in one copy. Each streamed
// part keeps the state a GPU-resident part keeps: where the master aliases the parameter
// (Note [Master aliases the parameter]) the parameter on the GPU *is* the master's bf16
// (or fp32) array, so that array never crosses PCIe and the host holds only the rest
// (for bf16+ecc8/q8/q8: 3.125 bytes per element).
//
// A piece larger than a chunk is cut at a multiple of kQuantGroup, so no group splits.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "engine/layout/layout_params.h"
#include "engine/layout/state_layout.h"
#include "tandem/compute_split.h"
#include "tandem/config.h"

namespace tandem::layout {

struct StreamPiece {
  size_t tensor = 0;
  uint64_t offset = 0;  // first element, within the tensor
  uint64_t count = 0;
};

struct StreamChunk {
  uint32_t first = 0, end = 0;  // pieces [first, end)
  uint64_t begin = 0, bytes = 0;  // bytes [begin, begin + bytes) of the slab
  // Gradient release: the chunk's gradients laid out like its state, piece after piece
  // (each piece's count x grad bytes, aligned): grad_bytes in all.
  uint64_t grad_bytes = 0;
};

class StreamLayout {
 public:
  // formats[t]: tensor t's effective formats; groups: the state each group keeps
  // (TensorSpec::group indexes it); chunk_bytes: the most bytes one chunk holds
  // (OptimizerConfig::stream_chunk_bytes). keep_parts false: the pieces, chunks and sizes
  // only (Note [Sizes without parts] in engine/layout/state_layout.h; state() adds up but
  // keeps no part, so Bind and the spans are not available). Throws
  // Error(kInvalidArgument) when chunk_bytes is too small for one group of some tensor.
  void Build(const std::vector<TensorSpec>& specs, const std::vector<StateFormats>& formats,
             Algorithm algorithm, const std::vector<HyperParams>& groups, uint64_t chunk_bytes,
             const Placement& placement, bool keep_parts = true);

  uint64_t bytes() const { return state_.bytes(); }
  uint64_t slot_bytes() const { return slot_bytes_; }  // the largest chunk
  uint64_t grad_slot_bytes() const { return grad_slot_bytes_; }  // the largest grad_bytes
  // Piece i's gradients within its chunk's gradients (StreamChunk::grad_bytes).
  uint64_t grad_offset(size_t i) const { return grad_off_[i]; }
  const std::vector<StreamPiece>& pieces() const { return pieces_; }
  const std::vector<StreamChunk>& chunks() const { return chunks_; }
  // Part i is piece i; its offset is the piece's first element within its tensor.
  const StateLayout& state() const { return state_; }
  void Report(MemoryReport::Bytes* b) const { state_.Report(b); }

  // Points every array at `base` (the host slab) and every aliased master at the tensor's
  // parameter (device memory in GPU mode).
  void Bind(uint8_t* base, const std::vector<TensorSpec>& specs,
            const std::vector<StateFormats>& formats);

  // The spans of chunk c as the kernel sees them when the chunk's bytes sit at `slot`:
  // state arrays moved from the host slab into the slot, aliased masters on the
  // parameter, gradient and parameter pointers set. spans_tensor receives each span's
  // tensor. Requires Bind.
  std::vector<StepSpan> SlotSpans(size_t c, uint8_t* slot, const std::vector<TensorSpec>& specs,
                                  std::vector<uint32_t>* span_tensor) const;
  // Where chunk c's host bytes are: in the slab (Bind) or where MoveChunk put them.
  uint8_t* host_chunk(size_t c) const { return chunk_at_[c]; }
  // Chunk c's bytes now live at `to` (chunks_[c].bytes, a copy of the same layout): its
  // parts' arrays point there (Note [Speculating streamed chunks]: a committed chunk's
  // state is the copy its speculative update wrote). Requires Bind.
  void MoveChunk(size_t c, uint8_t* to);

  // Bytes of chunk c's parameters (every piece's elements in its parameter's dtype, each
  // piece's range aligned): the place its speculative update writes them to.
  uint64_t hold_bytes(size_t c, const std::vector<TensorSpec>& specs) const;
  // Chunk c's slot spans (SlotSpans) with every parameter write, and every aliased master,
  // moved from the parameter into `hold` (hold_bytes(c) bytes); copies receives, per
  // piece, the parameter range and its place in `hold`. The spans read an aliased
  // master from `hold`, so `hold` must hold the parameters' current values first
  // (Note [Speculating streamed chunks], offload/speculation/stream_speculation.h).
  struct HoldCopy {
    uint8_t* param = nullptr;
    uint8_t* hold = nullptr;
    uint64_t bytes = 0;
  };
  std::vector<StepSpan> HoldSpans(size_t c, std::vector<StepSpan> slot_spans,
                                  const std::vector<TensorSpec>& specs, uint8_t* hold,
                                  std::vector<HoldCopy>* copies) const;

 private:
  std::vector<StreamPiece> pieces_;
  std::vector<StreamChunk> chunks_;
  StateLayout state_;
  std::vector<uint64_t> grad_off_;  // per piece
  uint64_t slot_bytes_ = 0, grad_slot_bytes_ = 0;
  std::vector<uint8_t*> chunk_at_;  // per chunk: where its bytes are
};

// Host-resident state bytes of one streamed element of a tensor in formats `f`, each way,
// without the slab's alignment: the master less the part that aliases a parameter of
// `param_dtype` (the fused kernel writes the parameter in place), plus the moments `h`
// keeps with their q8 scales (2 bytes per kQuantGroup elements). AdamW bf16+ecc8/q8/q8
// with bf16 parameters: 1 + 2 x (1 + 2/32) = 3.125; all-fp32 AdamW with fp32 parameters: 8.
double StreamBytesPerElement(Algorithm algo, const HyperParams& h, const StateFormats& f,
                             DType param_dtype);

// Note [The compute share's input]: the compute-split model's input (tandem/
// compute_split.h) for `placement`, the share-0 placement of an offload fraction: the
// GPU-resident and host-resident elements; per host-resident element, averaged over those
// of every tensor (formats[t], params.groups), the state a streamed element moves each
// way (StreamBytesPerElement, no alignment), its gradient down and its parameter up; with
// params.release_grads, its gradient up again beside its state (it waits in pinned host
// memory); and the offload pipeline's chunk (params.chunk_elements, at least 1). The
// planner's sweep and the optimizer's offload_compute auto both choose the share from it.
// kernel_bytes (optional) receives the fused kernel's HBM bytes per element (the whole
// state, slab alignment included, read and written; the gradient; the parameter where the
// master does not alias it), averaged the same way.
ComputeSplitInput SplitInput(const std::vector<TensorSpec>& specs,
                             const std::vector<StateFormats>& formats, const LayoutParams& params,
                             const Placement& placement, double* kernel_bytes = nullptr);

}  // namespace tandem::layout
