// HybridOptimizer: initialising the state from the parameters, Snapshot and Restore.
#include <tbb/parallel_for.h>
#include <tbb/task_arena.h>

#include <cstring>
#include <string>

#include "engine/dtype_io.h"
#include "engine/fp_bits.h"
#include "engine/master_codec.h"
#include "engine/q8_codec.h"
#include "engine/state_arrays.h"
#include "offload/optimizer_impl.h"
#include "offload/state_init.h"
#include "tandem/error.h"

namespace tandem {

using offload::MemKind;

void HybridOptimizer::Impl::CopyToDeviceSide(void* dst, const void* src, size_t bytes) const {
  if (bytes == 0) return;
  if (gpu())
    gpu_->Copy(dst, src, bytes, "(state upload)");
  else
    std::memcpy(dst, src, bytes);
}

void HybridOptimizer::Impl::CopyFromDeviceSide(void* dst, const void* src, size_t bytes) const {
  if (bytes == 0) return;
  if (gpu())
    gpu_->Copy(dst, src, bytes, "(state download)");
  else
    std::memcpy(dst, src, bytes);
}

void HybridOptimizer::Impl::Quiesce(const char* why) const {
  if (transport_) transport_->Drain();
  if (gpu()) gpu_->SyncStream(why);
}

namespace {
// Fills a freshly created TensorSnapshot's arrays (whole tensor) from fp32 weights.
TensorSnapshot EncodeInitial(const TensorSpec& s, const std::vector<float>& w, Algorithm algo,
                             const HyperParams& h, const StateFormats& f) {
  TensorSnapshot ts;
  ts.name = s.name;
  ts.numel = s.numel;
  ts.param_dtype = s.param_dtype;
  ts.grad_dtype = s.grad_dtype;
  ts.group = s.group;
  ts.shape = s.shape;
  ts.formats = f;
  const size_t n = s.numel, groups = GroupCount(n);
  // Encoding is per element: parallel over blocks (an 8B model has 0.5G-element tensors).
  auto each = [n](auto fn) {
    tbb::parallel_for(tbb::blocked_range<size_t>(0, n, size_t{1} << 16),
                      [&](const tbb::blocked_range<size_t>& r) {
                        for (size_t i = r.begin(); i < r.end(); ++i) fn(i);
                      });
  };
  switch (f.master) {
    case MasterFormat::kF32:
      ts.master_f32 = w;
      break;
    case MasterFormat::kBF16:
      ts.master_bf16.resize(n);
      each([&](size_t i) { ts.master_bf16[i] = num::F32ToBf16(w[i]); });
      break;
    case MasterFormat::kBF16Ecc8:
      ts.master_bf16.resize(n);
      ts.ecc8.resize(n);
      each([&](size_t i) { num::EncodeEcc8(w[i], &ts.master_bf16[i], &ts.ecc8[i]); });
      break;
    case MasterFormat::kBF16Ecc16:
      ts.master_bf16.resize(n);
      ts.ecc16.resize(n);
      each([&](size_t i) { num::EncodeEcc16(w[i], &ts.master_bf16[i], &ts.ecc16[i]); });
      break;
  }
  const uint16_t zero_scale = num::GroupScaleBits(0.0f);
  if (HasMomentum(algo, h)) {
    if (f.momentum == MomentFormat::kF32) {
      ts.m_f32.assign(n, 0.0f);
    } else {
      ts.m_codes.assign(n, 0);
      ts.m_scales.assign(groups, zero_scale);
    }
  }
  if (HasVariance(algo)) {
    if (f.variance == MomentFormat::kF32) {
      ts.v_f32.assign(n, 0.0f);
    } else {
      ts.v_codes.assign(n, 0);
      ts.v_scales.assign(groups, zero_scale);
    }
  }
  return ts;
}

// Copies between a whole-tensor snapshot and one part's arrays, in either direction:
// copy(part pointer, whole-tensor pointer, bytes) for each array both sides have (with
// masters_only, the master's arrays alone).
template <typename CopyFn>
void ForEachArray(const layout::Part& p, TensorSnapshot& ts, CopyFn copy,
                  bool masters_only = false) {
  void* part[kStateArrayCount];
  ForEachStateArray(p.state, [&](StateArray a, auto* ptr) { part[static_cast<int>(a)] = ptr; });
  ForEachStateVector(ts, [&](StateArray a, auto& vec) {
    void* at = part[static_cast<int>(a)];
    if (masters_only && !IsMasterArray(a)) return;
    if (at != nullptr && !vec.empty())
      copy(at, static_cast<void*>(vec.data() + ArrayIndex(a, p.offset)),
           ArrayEntries(a, p.count) * sizeof(vec[0]));
  });
}
}  // namespace

// Note [Block-wise initialisation] (offload/state_init.h): every part (hot, host-computed,
// each streamed piece) in blocks, in parallel on the driver's arena; no whole-tensor copy.
void HybridOptimizer::Impl::InitState() {
  std::vector<offload::InitRegion> regions;
  auto add = [&](size_t t, const layout::Part& p, bool staged) {
    if (p.count == 0) return;
    offload::InitRegion r;
    r.param = specs_[t].param;
    r.param_dtype = specs_[t].param_dtype;
    r.offset = p.offset;
    r.count = p.count;
    r.state = p.state;
    r.alias_param = p.alias_param;
    r.staged = staged;
    regions.push_back(r);
  };
  for (size_t t = 0; t < specs_.size(); ++t) {
    if (specs_[t].numel == 0) continue;
    add(t, hot_.part(t), /*staged=*/gpu());
    add(t, cold_.part(t), false);
    for (size_t i : stream_pieces_[t]) add(t, stream_.state().part(i), false);  // host slab
  }
  offload::InitIo io;
  if (gpu()) {
    io.copy = [this](void* dst, const void* src, size_t bytes) {
      gpu_->CopyConcurrent(dst, src, bytes, "(optimizer state initialisation)");
    };
    io.zero = [this](void* dst, size_t bytes) {
      gpu_->ZeroConcurrent(dst, bytes, "(optimizer state initialisation)");
    };
    io.params_on_device = true;
    io.staging_kind = MemKind::kPinned;
    gpu_->SyncStream("(optimizer state initialisation: waiting for the parameters)");
  }
  io.block_elements = kInitBlockElements;
  io.staging_slots = tbb::this_task_arena::max_concurrency();
  offload::ProgressLog progress("initialising optimizer state", offload::RegionElements(regions),
                                kInitQuietSeconds, kInitProgressSeconds, stderr,
                                construct_start_);
  offload::InitRegions(regions, io, &progress);
  progress.Finish();
}

// ---------------------------------------------------------------------------------------
// Snapshots

TensorSnapshot HybridOptimizer::Impl::ReadTensorState(size_t t, bool masters_only) const {
  const TensorSpec& s = specs_[t];
  // Sized like a fresh state, then overwritten part by part.
  TensorSnapshot ts = EncodeInitial(s, std::vector<float>(s.numel, 0.0f), cfg_.algorithm,
                                    cfg_.groups[s.group], formats_[t]);
  ts.step = tensor_step_[t];
  layout::Part hot = hot_.part(t);
  if (hot.alias_param) {  // the master (or its bf16 part) is the parameter
    if (formats_[t].master == MasterFormat::kF32)
      hot.state.master.f32 = static_cast<float*>(s.param);
    else
      hot.state.master.bf16 = static_cast<uint16_t*>(s.param);
  }
  ForEachArray(
      hot, ts,
      [&](void* part, void* whole, size_t bytes) { CopyFromDeviceSide(whole, part, bytes); },
      masters_only);
  ForEachArray(
      cold_.part(t), ts,
      [&](void* part, void* whole, size_t bytes) { std::memcpy(whole, part, bytes); },
      masters_only);
  // Streamed pieces: pinned arrays and, where aliased, the master on the parameter.
  for (size_t i : stream_pieces_[t])
    ForEachArray(
        stream_.state().part(i), ts,
        [&](void* part, void* whole, size_t bytes) { CopyFromDeviceSide(whole, part, bytes); },
        masters_only);
  return ts;
}

// Writes the state arrays of `ts` (whole tensor) into tensor t's parts; the parameter is
// not written (an aliased master's bf16 array is the parameter: it gets the same bits).
void HybridOptimizer::Impl::WriteTensorState(size_t t, TensorSnapshot& ts, bool masters_only) {
  ForEachArray(
      hot_.part(t), ts,
      [&](void* part, void* whole, size_t bytes) { CopyToDeviceSide(part, whole, bytes); },
      masters_only);
  ForEachArray(
      cold_.part(t), ts,
      [&](void* part, void* whole, size_t bytes) { std::memcpy(part, whole, bytes); },
      masters_only);
  for (size_t i : stream_pieces_[t])
    ForEachArray(
        stream_.state().part(i), ts,
        [&](void* part, void* whole, size_t bytes) { CopyToDeviceSide(part, whole, bytes); },
        masters_only);
}

OptimizerSnapshot HybridOptimizer::Impl::Snapshot() const {
  RequireNoBegunStep("Snapshot");
  Quiesce("(snapshot: waiting for the step)");
  OptimizerSnapshot snap;
  snap.algo = cfg_.algorithm;
  snap.formats = cfg_.formats;
  snap.groups = cfg_.groups;
  snap.step = step_;
  for (size_t t = 0; t < specs_.size(); ++t) snap.tensors.push_back(ReadTensorState(t));
  return snap;
}

void HybridOptimizer::Impl::WriteParamsFromMasters(size_t t, const TensorSnapshot& ts) {
  const TensorSpec& s = specs_[t];
  const size_t n = s.numel;
  std::vector<uint8_t> raw(n * DTypeSize(s.param_dtype));
  const MasterFormat master = formats_[t].master;
  for (size_t i = 0; i < n; ++i) {
    const bool bf = master != MasterFormat::kF32;
    if (bf && s.param_dtype == DType::kBF16) {
      reinterpret_cast<uint16_t*>(raw.data())[i] = ts.master_bf16[i];
      continue;
    }
    const float w = num::DecodeMaster(master, ts.master_f32.data(),
                                      ts.master_bf16.data(), ts.ecc8.data(), ts.ecc16.data(), i);
    num::StoreFromF32(raw.data(), s.param_dtype, i, w);
  }
  CopyToDeviceSide(s.param, raw.data(), raw.size());
}

void HybridOptimizer::Impl::Restore(const OptimizerSnapshot& snap) {
  RequireNoBegunStep("Restore");
  ValidateSnapshot(snap);
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
    TensorSnapshot ts = snap.tensors[t];
    WriteTensorState(t, ts);
    if (ts.numel > 0) WriteParamsFromMasters(t, ts);
    tensor_step_[t] = ts.step;
  }
  step_ = snap.step;
  EndEarlyStart();  // gradients copied down early belong to the old state
}

}  // namespace tandem
