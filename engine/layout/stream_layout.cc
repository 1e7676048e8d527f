#include "engine/layout/stream_layout.h"

#include <algorithm>
#include <string>
#include <type_traits>

#include "engine/state_arrays.h"
#include "engine/layout/slab_layout.h"
#include "engine/layout/tensor_rules.h"
#include "tandem/error.h"

namespace tandem::layout {
void StreamLayout::Build(const std::vector<TensorSpec>& specs,
                         const std::vector<StateFormats>& formats, Algorithm algorithm,
                         const std::vector<HyperParams>& groups, uint64_t chunk_bytes,
                         const Placement& placement, bool keep_parts) {
  pieces_.clear();
  chunks_.clear();
  slot_bytes_ = 0;
  const uint64_t limit = chunk_bytes;
  const uint64_t g = kQuantGroup;
  // Pieces and chunk boundaries first (sizes only), then the layout in that order.
  std::vector<uint64_t> piece_bytes;
  uint64_t used = 0;  // bytes of the open chunk
  size_t open_first = 0;
  auto close = [&] {
    if (pieces_.size() > open_first) {
      chunks_.push_back({static_cast<uint32_t>(open_first), static_cast<uint32_t>(pieces_.size()), 0, 0});
      open_first = pieces_.size();
    }
    used = 0;
  };
  for (size_t t = 0; t < specs.size(); ++t) {
    const uint64_t sc = placement.tensors[t].stream_count;
    if (sc == 0) continue;
    const HyperParams& h = groups[specs[t].group];
    const bool alias = MasterAliases(formats[t].master, specs[t].param_dtype);
    auto bytes_of = [&](uint64_t n) { return PartBytes(n, algorithm, h, formats[t], alias); };
    if (bytes_of(std::min(sc, g)) > limit)
      throw Error(ErrorKind::kInvalidArgument,
                  "stream_chunk_bytes = " + std::to_string(limit) +
                      " cannot hold one quantization group of tensor '" + specs[t].name + "'");
    uint64_t off = placement.tensors[t].device_count, left = sc;
    while (left > 0) {
      const uint64_t room = limit - used;
      uint64_t n = left;
      if (bytes_of(n) > room) {
        // The most whole groups that fit: estimate from the per-element size, then shrink.
        const double per = static_cast<double>(bytes_of(left)) / static_cast<double>(left);
        n = std::min<uint64_t>(left - 1, static_cast<uint64_t>(room / per)) / g * g;
        while (n > 0 && bytes_of(n) > room) n -= g;
        if (n == 0) {  // not even one group fits: next chunk
          close();
          continue;
        }
      }
      pieces_.push_back({t, off, n});
      piece_bytes.push_back(bytes_of(n));
      used += piece_bytes.back();
      off += n;
      left -= n;
      if (left > 0) close();
    }
  }
  close();
  state_.Reset(pieces_.size(), keep_parts);
  for (const StreamPiece& p : pieces_) {
    const TensorSpec& s = specs[p.tensor];
    state_.Add(&p - pieces_.data(), p.offset, p.count, algorithm, groups[s.group],
               formats[p.tensor], MasterAliases(formats[p.tensor].master, s.param_dtype));
  }
  grad_off_.assign(pieces_.size(), 0);
  grad_slot_bytes_ = 0;
  // Piece i's arrays take piece_bytes[i] (its PartBytes, what state_.Add carved), one
  // piece after the other.
  std::vector<uint64_t> piece_begin(pieces_.size() + 1, 0);
  for (size_t i = 0; i < pieces_.size(); ++i) piece_begin[i + 1] = piece_begin[i] + piece_bytes[i];
  for (StreamChunk& c : chunks_) {
    c.begin = piece_begin[c.first];
    c.bytes = piece_begin[c.end] - c.begin;
    slot_bytes_ = std::max(slot_bytes_, c.bytes);
    SlabLayout grads;
    for (uint32_t i = c.first; i < c.end; ++i)
      grad_off_[i] = grads.Add(pieces_[i].count * DTypeSize(specs[pieces_[i].tensor].grad_dtype));
    c.grad_bytes = grads.total();
    grad_slot_bytes_ = std::max(grad_slot_bytes_, c.grad_bytes);
  }
}

void StreamLayout::Bind(uint8_t* base, const std::vector<TensorSpec>& specs,
                        const std::vector<StateFormats>& formats) {
  chunk_at_.clear();
  for (const StreamChunk& c : chunks_) chunk_at_.push_back(base + c.begin);
  state_.Bind(base);
  for (size_t i = 0; i < pieces_.size(); ++i) {
    const StreamPiece& p = pieces_[i];
    if (!state_.part(i).alias_param) continue;
    const TensorSpec& s = specs[p.tensor];
    state_.AliasMaster(i, static_cast<uint8_t*>(s.param) + p.offset * DTypeSize(s.param_dtype),
                       formats[p.tensor].master);
  }
}

void StreamLayout::MoveChunk(size_t c, uint8_t* to) {
  const StreamChunk& ch = chunks_[c];
  const uint8_t* lo = chunk_at_[c];
  for (uint32_t i = ch.first; i < ch.end; ++i) state_.Move(i, lo, lo + ch.bytes, to);
  chunk_at_[c] = to;
}

std::vector<StepSpan> StreamLayout::SlotSpans(size_t c, uint8_t* slot,
                                              const std::vector<TensorSpec>& specs,
                                              std::vector<uint32_t>* span_tensor) const {
  const StreamChunk& ch = chunks_[c];
  const uint8_t* lo = chunk_at_[c];
  const uint8_t* hi = lo + ch.bytes;
  std::vector<StepSpan> spans;
  span_tensor->clear();
  for (uint32_t i = ch.first; i < ch.end; ++i) {
    const StreamPiece& p = pieces_[i];
    const Part& part = state_.part(i);
    const TensorSpec& s = specs[p.tensor];
    StepSpan sp = part.state;
    // Arrays inside the chunk move to the slot; an aliased master stays on the parameter.
    RelocateArrays(&sp, lo, hi, slot);
    sp.grad = static_cast<const uint8_t*>(s.grad) + p.offset * DTypeSize(s.grad_dtype);
    sp.grad_dtype = s.grad_dtype;
    sp.param_dtype = s.param_dtype;
    sp.param = part.alias_param
                   ? nullptr
                   : static_cast<uint8_t*>(s.param) + p.offset * DTypeSize(s.param_dtype);
    spans.push_back(sp);
    span_tensor->push_back(static_cast<uint32_t>(p.tensor));
  }
  return spans;
}

uint64_t StreamLayout::hold_bytes(size_t c, const std::vector<TensorSpec>& specs) const {
  uint64_t bytes = 0;
  for (uint32_t i = chunks_[c].first; i < chunks_[c].end; ++i)
    bytes += Aligned(pieces_[i].count * DTypeSize(specs[pieces_[i].tensor].param_dtype));
  return bytes;
}

std::vector<StepSpan> StreamLayout::HoldSpans(size_t c, std::vector<StepSpan> spans,
                                              const std::vector<TensorSpec>& specs, uint8_t* hold,
                                              std::vector<HoldCopy>* copies) const {
  const StreamChunk& ch = chunks_[c];
  copies->clear();
  uint8_t* at = hold;
  for (uint32_t i = ch.first; i < ch.end; ++i) {
    const StreamPiece& p = pieces_[i];
    const TensorSpec& s = specs[p.tensor];
    const uint64_t bytes = p.count * DTypeSize(s.param_dtype);
    uint8_t* param = static_cast<uint8_t*>(s.param) + p.offset * DTypeSize(s.param_dtype);
    StepSpan& sp = spans[i - ch.first];
    if (sp.param != nullptr) sp.param = at;
    ForEachStateArray(sp, [&](StateArray, auto*& ptr) {
      if (ptr != nullptr && reinterpret_cast<const uint8_t*>(ptr) == param)
        ptr = reinterpret_cast<std::remove_reference_t<decltype(ptr)>>(at);
    });
    copies->push_back({param, at, bytes});
    at += Aligned(bytes);
  }
  return spans;
}

double StreamBytesPerElement(Algorithm algo, const HyperParams& h, const StateFormats& f,
                             DType param_dtype) {
  return StateBytesPerElement(algo, h, f, MasterAliases(f.master, param_dtype));
}

ComputeSplitInput SplitInput(const std::vector<TensorSpec>& specs,
                             const std::vector<StateFormats>& formats, const LayoutParams& params,
                             const Placement& placement, double* kernel_bytes) {
  ComputeSplitInput in;
  in.chunk_elements = std::max<uint64_t>(params.chunk_elements, 1);
  in.offloaded = placement.offloaded;
  in.hot = placement.total - placement.offloaded;
  double stream = 0, grad = 0, param = 0, kernel = 0;
  for (size_t t = 0; t < specs.size(); ++t) {
    const uint64_t n = placement.tensors[t].host_count();
    if (n == 0) continue;
    const TensorSpec& s = specs[t];
    const HyperParams& h = params.groups[s.group];
    const bool alias = MasterAliases(formats[t].master, s.param_dtype);
    const double dn = static_cast<double>(n);
    stream += dn * StreamBytesPerElement(params.algorithm, h, formats[t], s.param_dtype);
    grad += dn * static_cast<double>(DTypeSize(s.grad_dtype));
    param += dn * static_cast<double>(DTypeSize(s.param_dtype));
    if (kernel_bytes == nullptr) continue;
    // HBM: the gradient, the whole state read and written, the parameter if separate.
    kernel += dn * static_cast<double>(DTypeSize(s.grad_dtype) + (alias ? 0 : DTypeSize(s.param_dtype))) +
              2.0 * static_cast<double>(PartBytes(n, params.algorithm, h, formats[t], false));
  }
  if (in.offloaded > 0) {
    const double total = static_cast<double>(in.offloaded);
    in.stream_bytes = stream / total;
    in.grad_bytes = grad / total;
    in.param_bytes = param / total;
    if (params.release_grads) in.stream_grad_bytes = in.grad_bytes;
    kernel /= total;
  }
  if (kernel_bytes != nullptr) *kernel_bytes = kernel;
  return in;
}

}  // namespace tandem::layout
