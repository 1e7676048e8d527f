#include "offload/state_layout.h"

#include "offload/memory.h"

namespace tandem::offload {

bool MasterAliases(MasterFormat master, DType param_dtype) {
  return (master == MasterFormat::kF32 && param_dtype == DType::kF32) ||
         (master != MasterFormat::kF32 && param_dtype == DType::kBF16);
}

void StateLayout::Reset(size_t tensors) {
  parts_.assign(tensors, Part{});
  entries_.assign(tensors, Entry{});
  total_ = 0;
}

void StateLayout::Add(size_t t, uint64_t offset, uint64_t count, Algorithm algo,
                      const HyperParams& h, const StateFormats& f, bool alias_param) {
  Entry& e = entries_[t];
  e.part.offset = offset;
  e.part.count = count;
  e.part.alias_param = alias_param && count > 0;
  e.part.state.n = count;
  e.part.state.formats = f;
  for (int a = 0; a < kArrays; ++a) e.size[a] = 0;
  const uint64_t groups = GroupCount(count);
  const bool bf = f.master != MasterFormat::kF32;
  if (!e.part.alias_param) {
    e.size[kMasterF32] = bf ? 0 : 4 * count;
    e.size[kBf16] = bf ? 2 * count : 0;
  }
  e.size[kEcc8] = f.master == MasterFormat::kBF16Ecc8 ? count : 0;
  e.size[kEcc16] = f.master == MasterFormat::kBF16Ecc16 ? 2 * count : 0;
  if (HasMomentum(algo, h)) {
    const bool q = f.momentum == MomentFormat::kQ8;
    e.size[kMF32] = q ? 0 : 4 * count;
    e.size[kMCodes] = q ? count : 0;
    e.size[kMScales] = q ? 2 * groups : 0;
  }
  if (HasVariance(algo)) {
    const bool q = f.variance == MomentFormat::kQ8;
    e.size[kVF32] = q ? 0 : 4 * count;
    e.size[kVCodes] = q ? count : 0;
    e.size[kVScales] = q ? 2 * groups : 0;
  }
  SlabLayout l;
  for (int a = 0; a < kArrays; ++a) {
    e.off[a] = total_ + (e.size[a] > 0 ? l.Add(e.size[a]) : l.total());
  }
  total_ += l.total();
  parts_[t] = e.part;
}

void StateLayout::Bind(uint8_t* base) {
  for (size_t t = 0; t < entries_.size(); ++t) {
    Entry& e = entries_[t];
    auto at = [&](int a) -> void* { return e.size[a] > 0 ? base + e.off[a] : nullptr; };
    StepSpan& s = e.part.state;
    s.master.f32 = static_cast<float*>(at(kMasterF32));
    s.master.bf16 = static_cast<uint16_t*>(at(kBf16));
    s.master.ecc8 = static_cast<int8_t*>(at(kEcc8));
    s.master.ecc16 = static_cast<int16_t*>(at(kEcc16));
    s.m.f32 = static_cast<float*>(at(kMF32));
    s.m.codes = static_cast<uint8_t*>(at(kMCodes));
    s.m.scales = static_cast<uint16_t*>(at(kMScales));
    s.v.f32 = static_cast<float*>(at(kVF32));
    s.v.codes = static_cast<uint8_t*>(at(kVCodes));
    s.v.scales = static_cast<uint16_t*>(at(kVScales));
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

void StateLayout::Report(MemoryReport::Bytes* b) const {
  for (const Entry& e : entries_) {
    auto sz = [&](int a) { return e.size[a] > 0 ? Aligned(e.size[a]) : 0; };
    b->master += sz(kMasterF32) + sz(kBf16);
    b->correction += sz(kEcc8) + sz(kEcc16);
    b->momentum += sz(kMF32) + sz(kMCodes);
    b->variance += sz(kVF32) + sz(kVCodes);
    b->scales += sz(kMScales) + sz(kVScales);
  }
}

StepSpan SubSpan(const StepSpan& s, uint64_t off, uint64_t count) {
  StepSpan r = s;
  r.n = count;
  const uint64_t g = off / kQuantGroup;
  auto adv = [](auto* p, uint64_t k) { return p == nullptr ? p : p + k; };
  r.master.f32 = adv(s.master.f32, off);
  r.master.bf16 = adv(s.master.bf16, off);
  r.master.ecc8 = adv(s.master.ecc8, off);
  r.master.ecc16 = adv(s.master.ecc16, off);
  r.m.f32 = adv(s.m.f32, off);
  r.m.codes = adv(s.m.codes, off);
  r.m.scales = adv(s.m.scales, g);
  r.v.f32 = adv(s.v.f32, off);
  r.v.codes = adv(s.v.codes, off);
  r.v.scales = adv(s.v.scales, g);
  return r;
}

}  // namespace tandem::offload
