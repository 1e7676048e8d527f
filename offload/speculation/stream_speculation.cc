#include "offload/speculation/stream_speculation.h"

#include <algorithm>
#include <utility>

namespace tandem::offload {

StreamSpeculation::StreamSpeculation(Chunks* exec,
                                     std::vector<std::vector<uint32_t>> chunk_tensors,
                                     std::vector<uint8_t> speculative, size_t tensors)
    : exec_(exec),
      chunk_tensors_(std::move(chunk_tensors)),
      tensor_chunks_(tensors),
      speculative_(std::move(speculative)),
      done_(chunk_tensors_.size(), 0) {
  for (size_t c = 0; c < chunk_tensors_.size(); ++c)
    if (speculative_[c] != 0)
      for (uint32_t t : chunk_tensors_[c])
        if (tensor_chunks_[t].empty() || tensor_chunks_[t].back() != c)
          tensor_chunks_[t].push_back(static_cast<uint32_t>(c));
}

void StreamSpeculation::Begin(const std::vector<StepScalars>* scalars,
                              const std::vector<uint32_t>* scalar_index, const std::vector<uint8_t>& ready) {
  scalars_ = scalars;
  scalar_index_ = scalar_index;
  ready_ = &ready;
  error_ = nullptr;
  stopped_ = false;
  for (size_t c = 0; c < chunk_tensors_.size(); ++c)
    if (speculative_[c] != 0) Try(c, nullptr);
}

void StreamSpeculation::TensorReady(size_t t, bool again, const std::vector<uint8_t>& ready,
                                    InPlace* in_place) {
  if (scalars_ == nullptr) return;  // not begun
  ready_ = &ready;
  if (again)  // done again on the new gradient, into the same spare
    for (uint32_t c : tensor_chunks_[t]) done_[c] = 0;
  for (uint32_t c : tensor_chunks_[t]) Try(c, in_place);
}

void StreamSpeculation::Try(size_t c, InPlace* in_place) {
  if (done_[c] != 0 || error_ || stopped_) return;
  for (uint32_t t : chunk_tensors_[c])
    if ((*ready_)[t] == 0) return;
  try {
    exec_->Speculate(c, *scalars_, *scalar_index_, in_place);
    done_[c] = 1;
  } catch (...) {
    // The host chunk is never written by a speculation: nothing to restore.
    error_ = std::current_exception();
  }
}

bool StreamSpeculation::AllActive(const std::vector<uint8_t>& active) const {
  if (active.empty()) return true;
  for (size_t c = 0; c < done_.size(); ++c)
    if (done_[c] != 0)
      for (uint32_t t : chunk_tensors_[c])
        if (active[t] == 0) return false;
  return true;
}

size_t StreamSpeculation::speculated_count() const {
  size_t n = 0;
  for (uint8_t d : done_) n += d;
  return n;
}

size_t StreamSpeculation::Rollback() {
  const size_t n = speculated_count();
  std::fill(done_.begin(), done_.end(), uint8_t{0});
  return n;
}

void StreamSpeculation::End() {
  std::fill(done_.begin(), done_.end(), uint8_t{0});
  scalars_ = nullptr;
  scalar_index_ = nullptr;
  ready_ = nullptr;
  error_ = nullptr;
  stopped_ = false;
}

}  // namespace tandem::offload
