// ExecutorSet: the optimizer's executors in launch order (Note [Executors] in
// offload/executors/executor.h), and for each role (offload/executors/roles.h) those
// that take it, in the same order: what the facade asks for in each phase of a step.
//
// Thread safety: built at construction; then the accessors may be called from several
// threads at once.
#pragma once

#include <memory>
#include <vector>

#include "offload/executors/executor.h"
#include "offload/executors/roles.h"

namespace tandem::offload {

class ExecutorSet {
 public:
  ExecutorSet() = default;
  ExecutorSet(const ExecutorSet&) = delete;
  ExecutorSet& operator=(const ExecutorSet&) = delete;
  ~ExecutorSet() { Clear(); }

  // Adds `e` after those added before, with its roles.
  void Add(std::unique_ptr<Executor> e) {
    const Roles r = e->roles();
    if (r.speculative != nullptr) speculative_.push_back(r.speculative);
    if (r.queued != nullptr) queued_.push_back(r.queued);
    if (r.stream_ordered != nullptr) stream_ordered_.push_back(r.stream_ordered);
    if (r.device_timed != nullptr) device_timed_.push_back(r.device_timed);
    if (r.joined != nullptr) joined_.push_back(r.joined);
    all_.push_back(std::move(e));
  }
  // Destroys them, the last added first.
  void Clear() {
    speculative_.clear();
    queued_.clear();
    stream_ordered_.clear();
    device_timed_.clear();
    joined_.clear();
    while (!all_.empty()) all_.pop_back();
  }

  const std::vector<std::unique_ptr<Executor>>& all() const { return all_; }
  const std::vector<Speculative*>& speculative() const { return speculative_; }
  const std::vector<Queued*>& queued() const { return queued_; }
  const std::vector<StreamOrdered*>& stream_ordered() const { return stream_ordered_; }
  const std::vector<DeviceTimed*>& device_timed() const { return device_timed_; }
  const std::vector<Joined*>& joined() const { return joined_; }

 private:
  std::vector<std::unique_ptr<Executor>> all_;
  std::vector<Speculative*> speculative_;
  std::vector<Queued*> queued_;
  std::vector<StreamOrdered*> stream_ordered_;
  std::vector<DeviceTimed*> device_timed_;
  std::vector<Joined*> joined_;
};

}  // namespace tandem::offload
