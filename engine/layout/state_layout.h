// StateLayout: where each tensor part's optimizer state lives inside one slab.
//
// A part is a contiguous element range [offset, offset + count) of one tensor (the hot
// prefix or the cold suffix). Its arrays follow docs/numerics.md ("Layout"); each array is
// carved at kSlabAlign so the memory report is the closed-form sum of aligned array sizes.
//
// Note [Master aliases the parameter]: an fp32 master with fp32 parameters, or a bf16-based
// master with bf16 parameters, holds exactly the parameter's bits, so a part whose state
// sits next to the parameters uses the parameter buffer as (the bf16 part of) its master
// instead of a copy. Offloaded parts never alias: their parameter lives on the device.
#pragma once

#include <cstdint>
#include <vector>

#include "engine/state_arrays.h"
#include "engine/step_span.h"
#include "tandem/config.h"

namespace tandem::layout {

bool MasterAliases(MasterFormat master, DType param_dtype);

// Bytes per element of every state array `f` keeps under `algo` and `h` (engine/
// state_arrays.h; a per-group scale counts 1/kQuantGroup: q8 is 1 + 2/32), without the
// slab's alignment; with `alias_master`, without the master array the parameter is.
double StateBytesPerElement(Algorithm algo, const HyperParams& h, const StateFormats& f,
                            bool alias_master);

// The arrays of `span` that lie in [lo, hi) move to the same offsets from `to`; the others
// (an aliased master on the parameter) stay.
void RelocateArrays(StepSpan* span, const uint8_t* lo, const uint8_t* hi, uint8_t* to);

// The bytes `count` elements of one tensor's state take as one part of a StateLayout,
// alignment included.
uint64_t PartBytes(uint64_t count, Algorithm algo, const HyperParams& h, const StateFormats& f,
                   bool alias_param);

struct Part {
  uint64_t offset = 0, count = 0;
  bool alias_param = false;
  StepSpan state;  // formats and state pointers (valid after Bind); grad/param unset
};

// Note [Sizes without parts]: a layout reset with keep_parts false only adds up: bytes()
// and Report() hold what the same Adds would lay out, from the same per-array arithmetic,
// but no part is kept (part, begin, end, Bind, AliasMaster and Move are not available).
// Sizing a placement (the planner evaluates hundreds) then costs no per-tensor memory.
class StateLayout {
 public:
  void Reset(size_t tensors, bool keep_parts = true);
  void Add(size_t t, uint64_t offset, uint64_t count, Algorithm algo, const HyperParams& h,
           const StateFormats& f, bool alias_param);
  uint64_t bytes() const { return total_; }
  void Bind(uint8_t* base);  // sets every array pointer to base + its offset
  void AliasMaster(size_t t, void* param, MasterFormat master);
  // Part t's arrays that lie in [lo, hi) move to the same offsets from `to` (an aliased
  // master, outside the range, stays): the part's bytes now live there.
  void Move(size_t t, const uint8_t* lo, const uint8_t* hi, uint8_t* to);
  const Part& part(size_t t) const { return parts_[t]; }
  size_t size() const { return parts_.size(); }
  // Part t's arrays occupy bytes [begin(t), end(t)) of the slab, in Add order.
  uint64_t begin(size_t t) const { return entries_[t].begin; }
  uint64_t end(size_t t) const { return entries_[t].end; }
  void Report(MemoryReport::Bytes* b) const;

 private:
  struct Entry {  // per array (index: StateArray, engine/state_arrays.h)
    Part part;
    uint64_t off[kStateArrayCount];
    uint64_t size[kStateArrayCount];
    uint64_t begin = 0, end = 0;
  };
  std::vector<Part> parts_;
  std::vector<Entry> entries_;
  bool keep_parts_ = true;
  uint64_t total_ = 0;
  MemoryReport::Bytes sums_;  // Report's categories, added up by Add
};

}  // namespace tandem::layout
