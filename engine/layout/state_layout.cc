#include "engine/layout/state_layout.h"

#include <type_traits>

#include "engine/state_arrays.h"
#include "engine/layout/slab_layout.h"

namespace tandem::layout {

bool MasterAliases(MasterFormat master, DType param_dtype) {
  return (master == MasterFormat::kF32 && param_dtype == DType::kF32) ||
         (master != MasterFormat::kF32 && param_dtype == DType::kBF16);
}

double StateBytesPerElement(Algorithm algo, const HyperParams& h, const StateFormats& f,
                            bool alias_master) {
  // One quantization group's entries: a per-group array's entry counts 1/kQuantGroup.
  uint64_t bytes = 0;
  for (const StateArrayInfo& info : kStateArrays) {
    const bool aliased = alias_master && (info.array == StateArray::kMasterF32 ||
                                          info.array == StateArray::kMasterBf16);
    if (!aliased) bytes += ArrayEntries(info.array, algo, h, f, kQuantGroup) * info.entry_bytes;
  }
  return static_cast<double>(bytes) / kQuantGroup;
}

uint64_t PartBytes(uint64_t count, Algorithm algo, const HyperParams& h, const StateFormats& f,
                   bool alias_param) {
  StateLayout one;
  one.Reset(1, /*keep_parts=*/false);
  one.Add(0, 0, count, algo, h, f, alias_param);
  return one.bytes();
}

void StateLayout::Reset(size_t tensors, bool keep_parts) {
  keep_parts_ = keep_parts;
  parts_.assign(keep_parts ? tensors : 0, Part{});
  entries_.assign(keep_parts ? tensors : 0, Entry{});
  total_ = 0;
  sums_ = {};
}

void StateLayout::Add(size_t t, uint64_t offset, uint64_t count, Algorithm algo,
                      const HyperParams& h, const StateFormats& f, bool alias_param) {
  Entry scratch;
  Entry& e = keep_parts_ ? entries_[t] : scratch;
  e.part.offset = offset;
  e.part.count = count;
  e.part.alias_param = alias_param && count > 0;
  e.part.state.n = count;
  e.part.state.formats = f;
  // Each array the formats keep (engine/state_arrays.h), but an aliased master: the
  // parameter is that array.
  for (int i = 0; i < kStateArrayCount; ++i) {
    const StateArray a = static_cast<StateArray>(i);
    const bool aliased = e.part.alias_param &&
                         (a == StateArray::kMasterF32 || a == StateArray::kMasterBf16);
    e.size[i] = aliased ? 0 : ArrayEntries(a, algo, h, f, count) * Info(a).entry_bytes;
  }
  SlabLayout l;
  for (int a = 0; a < kStateArrayCount; ++a) {
    e.off[a] = total_ + (e.size[a] > 0 ? l.Add(e.size[a]) : l.total());
  }
  e.begin = total_;
  total_ += l.total();
  e.end = total_;
  // Report's categories: every kept array at its aligned size.
  auto sz = [&](StateArray a) {
    const uint64_t n = e.size[static_cast<int>(a)];
    return n > 0 ? Aligned(n) : 0;
  };
  using A = StateArray;
  sums_.master += sz(A::kMasterF32) + sz(A::kMasterBf16);
  sums_.correction += sz(A::kEcc8) + sz(A::kEcc16);
  sums_.momentum += sz(A::kMF32) + sz(A::kMCodes);
  sums_.variance += sz(A::kVF32) + sz(A::kVCodes);
  sums_.scales += sz(A::kMScales) + sz(A::kVScales);
  if (keep_parts_) parts_[t] = e.part;
}

void StateLayout::Bind(uint8_t* base) {
  for (size_t t = 0; t < entries_.size(); ++t) {
    Entry& e = entries_[t];
    ForEachStateArray(e.part.state, [&](StateArray a, auto*& p) {
      const int i = static_cast<int>(a);
      p = e.size[i] > 0 ? reinterpret_cast<std::remove_reference_t<decltype(p)>>(base + e.off[i])
                        : nullptr;
    });
    parts_[t] = e.part;
  }
}

void StateLayout::AliasMaster(size_t t, void* param, MasterFormat master) {
  StepSpan& s = parts_[t].state;
  if (master == MasterFormat::kF32)
    s.master.f32 = static_cast<float*>(param);
  else
    s.master.bf16 = static_cast<uint16_t*>(param);
  entries_[t].part.state = s;
}

void RelocateArrays(StepSpan* span, const uint8_t* lo, const uint8_t* hi, uint8_t* to) {
  ForEachStateArray(*span, [&](StateArray, auto*& p) {
    const auto* at = reinterpret_cast<const uint8_t*>(p);
    if (p != nullptr && at >= lo && at < hi)
      p = reinterpret_cast<std::remove_reference_t<decltype(p)>>(to + (at - lo));
  });
}

void StateLayout::Move(size_t t, const uint8_t* lo, const uint8_t* hi, uint8_t* to) {
  RelocateArrays(&parts_[t].state, lo, hi, to);
  entries_[t].part.state = parts_[t].state;
}

void StateLayout::Report(MemoryReport::Bytes* b) const {
  b->master += sums_.master;
  b->correction += sums_.correction;
  b->momentum += sums_.momentum;
  b->variance += sums_.variance;
  b->scales += sums_.scales;
}


}  // namespace tandem::layout
