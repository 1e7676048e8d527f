// HybridOptimizer::Impl: Snapshot and Restore, visiting every executor's parts of each
// tensor (Note [Executors]).
#include <cstring>
#include <string>

#include <tbb/blocked_range.h>
#include <tbb/parallel_for.h>

#include "engine/dtype_io.h"
#include "engine/fp_bits.h"
#include "engine/grain.h"
#include "engine/master_codec.h"
#include "engine/state_arrays.h"
#include "offload/facade/impl.h"
#include "tandem/error.h"

namespace tandem {

void HybridOptimizer::Impl::CopyOut(void* dst, const void* src, size_t bytes,
                                    bool on_device) const {
  if (bytes == 0) return;
  if (on_device)
    gpu_->Copy(dst, src, bytes, "(state download)");
  else
    std::memcpy(dst, src, bytes);
}

void HybridOptimizer::Impl::CopyIn(void* dst, const void* src, size_t bytes, bool on_device) const {
  if (bytes == 0) return;
  if (on_device)
    gpu_->Copy(dst, src, bytes, "(state upload)");
  else
    std::memcpy(dst, src, bytes);
}

void HybridOptimizer::Impl::Quiesce(const char* why) const {
  for (offload::Queued* e : executors_.queued()) e->Quiesce();
  if (gpu()) gpu_->SyncStream(why);
}

namespace {
// Copies between a whole-tensor snapshot and one part's arrays, in either direction:
// copy(part pointer, whole-tensor pointer, bytes) for each array both sides have (with
// masters_only, the master's arrays alone).
// A const snapshot is only read: copy writes the part from it.
template <typename Snapshot, typename CopyFn>
void ForEachArray(const layout::Part& p, Snapshot& ts, CopyFn copy,
                  bool masters_only = false) {
  void* part[kStateArrayCount];
  ForEachStateArray(p.state, [&](StateArray a, auto* ptr) { part[static_cast<int>(a)] = ptr; });
  ForEachStateVector(ts, [&](StateArray a, auto& vec) {
    void* at = part[static_cast<int>(a)];
    if (masters_only && !IsMasterArray(a)) return;
    if (at != nullptr && !vec.empty())
      copy(at, const_cast<void*>(static_cast<const void*>(vec.data() + ArrayIndex(a, p.offset))),
           ArrayEntries(a, p.count) * sizeof(vec[0]));
  });
}
}  // namespace

TensorSnapshot HybridOptimizer::Impl::ReadTensorState(size_t t, bool masters_only) const {
  const TensorSpec& s = specs_[t];
  TensorSnapshot ts;
  ts.name = s.name;
  ts.numel = s.numel;
  ts.param_dtype = s.param_dtype;
  ts.grad_dtype = s.grad_dtype;
  ts.group = s.group;
  ts.shape = s.shape;
  ts.formats = formats_[t];
  ts.step = steps_.tensor[t];
  // Sized for the formats, then filled part by part (the parts cover the tensor).
  SizeStateVectors(ts, cfg_.algorithm, cfg_.groups[s.group], formats_[t], s.numel);
  for (const auto& e : executors_.all())
    e->VisitParts(t, [&](const layout::Part& part, bool on_device) {
      ForEachArray(
          part, ts,
          [&](void* at, void* whole, size_t bytes) { CopyOut(whole, at, bytes, on_device); },
          masters_only);
    });
  return ts;
}

// Writes the state arrays of `ts` (whole tensor) into tensor t's parts; the parameter is
// not written (an aliased master's bf16 array is the parameter: it gets the same bits).
void HybridOptimizer::Impl::WriteTensorState(size_t t, const TensorSnapshot& ts,
                                             bool masters_only) {
  for (const auto& e : executors_.all())
    e->VisitParts(t, [&](const layout::Part& part, bool on_device) {
      ForEachArray(
          part, ts,
          [&](void* at, void* whole, size_t bytes) { CopyIn(at, whole, bytes, on_device); },
          masters_only);
    });
}

OptimizerSnapshot HybridOptimizer::Impl::Snapshot() const {
  RequireNoBegunStep("Snapshot");
  Quiesce("(snapshot: waiting for the step)");
  OptimizerSnapshot snap;
  snap.algo = cfg_.algorithm;
  snap.formats = cfg_.formats;
  snap.groups = cfg_.groups;
  snap.step = steps_.applied;
  for (size_t t = 0; t < specs_.size(); ++t) snap.tensors.push_back(ReadTensorState(t));
  return snap;
}

void HybridOptimizer::Impl::WriteParamsFromMasters(size_t t, const TensorSnapshot& ts) {
  const TensorSpec& s = specs_[t];
  const size_t n = s.numel;
  const MasterFormat master = formats_[t].master;
  if (master != MasterFormat::kF32 && s.param_dtype == DType::kBF16) {
    CopyIn(s.param, ts.master_bf16.data(), n * sizeof(uint16_t), gpu());  // its bf16 half
    return;
  }
  std::vector<uint8_t> raw(n * DTypeSize(s.param_dtype));
  driver_.Execute([&] {  // on the optimizer's own (pinned) threads, as ReloadParams
    tbb::parallel_for(tbb::blocked_range<size_t>(0, n, kGrainElements),
                      [&](const tbb::blocked_range<size_t>& r) {
                        for (size_t i = r.begin(); i < r.end(); ++i)
                          num::StoreFromF32(raw.data(), s.param_dtype, i,
                                            num::DecodeMaster(master, ts.master_f32.data(),
                                                              ts.master_bf16.data(),
                                                              ts.ecc8.data(), ts.ecc16.data(),
                                                              i));
                      });
  });
  CopyIn(s.param, raw.data(), raw.size(), gpu());
}

void HybridOptimizer::Impl::Restore(const OptimizerSnapshot& snap) {
  RequireNoBegunStep("Restore");
  ValidateRestorable(snap);
  auto fail = [](const std::string& m) {
    throw Error(ErrorKind::kInvalidArgument, "restore: " + m);
  };
  if (snap.algo != cfg_.algorithm)
    fail(std::string("snapshot algorithm ") + Name(snap.algo) + " but optimizer uses " +
         Name(cfg_.algorithm));
  if (snap.groups.size() != cfg_.groups.size())
    fail("snapshot has " + std::to_string(snap.groups.size()) + " groups, optimizer " +
         std::to_string(cfg_.groups.size()));
  if (snap.tensors.size() != specs_.size())
    fail("snapshot has " + std::to_string(snap.tensors.size()) + " tensors, optimizer " +
         std::to_string(specs_.size()));
  for (size_t t = 0; t < specs_.size(); ++t) {
    const TensorSnapshot& ts = snap.tensors[t];
    const TensorSpec& s = specs_[t];
    const std::string who = "tensor " + std::to_string(t) + " '" + s.name + "'";
    if (ts.name != s.name) fail(who + ": snapshot has '" + ts.name + "' in its place");
    if (ts.numel != s.numel)
      fail(who + ": snapshot has " + std::to_string(ts.numel) + " elements, optimizer " +
           std::to_string(s.numel));
    if (ts.group != s.group)
      fail(who + ": snapshot group " + std::to_string(ts.group) + ", optimizer " +
           std::to_string(s.group));
    if (ts.param_dtype != s.param_dtype)
      fail(who + ": snapshot param dtype " + Name(ts.param_dtype) + ", optimizer " +
           Name(s.param_dtype));
    // Formats tensor by tensor: the snapshot's default (snap.formats) need not match.
    if (!(ts.formats == formats_[t]))
      fail(who + ": snapshot formats " + Name(ts.formats) + ", optimizer " + Name(formats_[t]));
    if (ts.grad_dtype != s.grad_dtype)
      fail(who + ": snapshot grad dtype " + Name(ts.grad_dtype) + ", optimizer " +
           Name(s.grad_dtype));
    if (!ts.shape.empty() && !s.shape.empty() && ts.shape != s.shape)
      fail(who + ": snapshot and optimizer disagree on the tensor's shape");
    // SGD groups may differ in whether they keep momentum: the arrays must match ours.
    if (HasMomentum(snap.algo, snap.groups[ts.group]) !=
        HasMomentum(cfg_.algorithm, cfg_.groups[s.group]))
      fail(who + ": snapshot and optimizer disagree on keeping a momentum buffer");
  }
  // Everything checked: nothing above changed any state.
  Quiesce("(restore: waiting for the step)");
  cfg_.groups = snap.groups;
  for (size_t t = 0; t < specs_.size(); ++t) {
    const TensorSnapshot& ts = snap.tensors[t];
    WriteTensorState(t, ts);
    if (ts.numel > 0) WriteParamsFromMasters(t, ts);
    steps_.tensor[t] = ts.step;
  }
  steps_.applied = snap.step;
  // With release_grads the gradients handed over since the last Step are what is left of
  // the next step's (the caller freed them): they stay handed, and that Step steps the
  // restored state with them. Without, the caller still holds them and hands them again
  // (or Step reads them): the early work is forgotten. (No speculation runs here: a begun
  // step refuses the Restore.)
  if (!cfg_.release_grads) EndEarlyStart();
}

}  // namespace tandem
