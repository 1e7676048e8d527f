// ReadyPartials: the pre-pass's bookkeeping of early start's partials in one step: which
// tensors were readied (Prepass::TensorReady), each one's statistics once they reached
// the host, and the sum of those (Prepass::Known), kept exact as tensors are readied
// again (gradient accumulation hands a tensor a second time; its first partial is
// dropped from the sum).
//
// Thread safety: the optimizer's thread only.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "offload/prepass/grad_stats.h"

namespace tandem::offload {

class ReadyPartials {
 public:
  explicit ReadyPartials(size_t tensors)
      : ready_(tensors, 0), landed_(tensors, 0), partial_(tensors) {}

  // Tensor t was readied (again): its partial is not known until Landed.
  void Readied(size_t t) {
    ready_[t] = 1;
    if (landed_[t] == 0) return;
    landed_[t] = 0;
    known_ = NormResult{};
    for (size_t i = 0; i < landed_.size(); ++i)
      if (landed_[i] != 0) AddNorm(known_, partial_[i]);
  }
  // Tensor t's partial reached the host.
  void Landed(size_t t, const NormResult& r) {
    partial_[t] = r;
    landed_[t] = 1;
    AddNorm(known_, r);
  }
  const std::vector<uint8_t>& ready() const { return ready_; }
  bool landed(size_t t) const { return landed_[t] != 0; }
  const NormResult& partial(size_t t) const { return partial_[t]; }
  const NormResult& known() const { return known_; }
  void Clear() {
    std::fill(ready_.begin(), ready_.end(), uint8_t{0});
    std::fill(landed_.begin(), landed_.end(), uint8_t{0});
    known_ = NormResult{};
  }

 private:
  std::vector<uint8_t> ready_, landed_;
  std::vector<NormResult> partial_;
  NormResult known_;
};

}  // namespace tandem::offload
