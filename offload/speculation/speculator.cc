#include "offload/speculation/speculator.h"

#include <tbb/parallel_for.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <string>
#include <utility>

#include "engine/elapsed.h"
#include "engine/grain.h"
#include "engine/layout/state_layout.h"
#include "engine/state_arrays.h"
#include "tandem/error.h"

namespace tandem::offload {
namespace {

// Pieces of one chunk stepped (and backed up) by one task (Note [Grain] in
// engine/grain.h): pieces never split a quantization group and the bytes do not depend
// on the piece size (cpu_simd/host_kernels.h). 64 Ki elements of AdamW bf16+ecc8/q8/q8
// state are about 330 KB: backup and step of a piece stay in the core's L2.
constexpr uint64_t kPiece = kGrainElements;
static_assert(kPiece % kQuantGroup == 0, "pieces must not split a quantization group");

uint64_t PieceCount(uint64_t n) { return (n + kPiece - 1) / kPiece; }

}  // namespace

Speculator::Speculator(const std::vector<OffloadChunk>* chunks, std::vector<StepSpan> backup,
                       std::vector<void*> hold, std::vector<const void*> early_grad,
                       StreamDevice* device, int threads, std::vector<int> cpus)
    : chunks_(chunks),
      backup_(std::move(backup)),
      hold_(std::move(hold)),
      early_grad_(std::move(early_grad)),
      device_(device),
      arena_(threads, std::move(cpus)) {
  const size_t n = chunks_->size();
  if (backup_.size() != n || hold_.size() != n || early_grad_.size() != n)
    throw Error(ErrorKind::kInternal, "Speculator: per-chunk tables do not match the chunks");
  queue_.assign(n, 0);
  ticket_.assign(n, StreamDevice::kNoEvent);
  status_.assign(n, kIdle);
  uint64_t max_pieces = 0;
  for (const OffloadChunk& c : *chunks_) max_pieces = std::max(max_pieces, PieceCount(c.span.n));
  piece_saved_.assign(max_pieces, 0);
  worker_ = std::thread([this] { Work(); });
}

Speculator::~Speculator() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  work_cv_.notify_all();
  worker_.join();  // the chunk in progress (if any) finishes; queued ones are dropped
}

void Speculator::Begin(const std::vector<StepScalars>& scalars, Event previous_upload) {
  std::lock_guard<std::mutex> lock(mu_);
  if (head_ != tail_ || running_)
    throw Error(ErrorKind::kInternal, "Speculator::Begin while chunks are still queued");
  scalars_ = scalars;
  previous_upload_ = previous_upload;
  error_ = nullptr;
  cancel_ = false;
  head_ = tail_ = 0;
}

void Speculator::Enqueue(size_t c, Event ticket) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (c >= status_.size() || status_[c] != kIdle || tail_ >= queue_.size())
      throw Error(ErrorKind::kInternal,
                  "Speculator: chunk " + std::to_string(c) + " queued twice in one step");
    queue_[tail_++] = c;
    ticket_[c] = ticket;
    status_[c] = kQueued;
  }
  work_cv_.notify_one();
}

void Speculator::Cancel() {
  std::lock_guard<std::mutex> lock(mu_);
  cancel_ = true;
}

std::exception_ptr Speculator::WaitIdle() {
  std::unique_lock<std::mutex> lock(mu_);
  idle_cv_.wait(lock, [&] { return head_ == tail_ && !running_; });
  return error_;
}

void Speculator::Work() {
  try {
    cpu::PinThisThread(arena_.cpus());  // validated by the arena: not expected to throw
  } catch (...) {
  }
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    work_cv_.wait(lock, [&] { return stop_ || head_ < tail_; });
    if (stop_) return;
    const size_t c = queue_[head_++];
    if (error_ || cancel_) {  // an earlier chunk failed, or the step is being undone
      status_[c] = kIdle;
      idle_cv_.notify_all();
      continue;
    }
    running_ = true;
    const Event ticket = ticket_[c];
    const Event previous = std::exchange(previous_upload_, StreamDevice::kNoEvent);
    lock.unlock();
    std::exception_ptr err;
    try {
      Run(c, ticket, previous);
    } catch (...) {
      err = std::current_exception();
    }
    lock.lock();
    running_ = false;
    status_[c] = err ? kIdle : kStepped;
    if (err && !error_) error_ = err;
    idle_cv_.notify_all();
  }
}

void Speculator::Run(size_t c, Event ticket, Event previous_upload) {
  const OffloadChunk& chunk = (*chunks_)[c];
  const std::string who = "speculative update of tensor " + std::to_string(chunk.tensor) +
                          " chunk " + std::to_string(c);
  try {
    device_->Synchronize(previous_upload);  // kNoEvent: nothing to wait for
    device_->Synchronize(ticket);
  } catch (const Error& e) {
    throw Error(e.kind(), who + ": " + e.message());
  }
  const auto t0 = std::chrono::steady_clock::now();
  StepSpan span = chunk.span;
  span.grad = early_grad_[c];
  span.param = chunk.param_source != nullptr ? nullptr : hold_[c];
  const StepScalars& s = scalars_[chunk.scalar_index];
  ValidateStepSpan(s, span, who.c_str());  // before anything is written
  const uint64_t pieces = PieceCount(span.n);
  std::fill(piece_saved_.begin(), piece_saved_.begin() + pieces, uint8_t{0});
  auto piece = [&](uint64_t p, const StepSpan& of) {
    const uint64_t off = p * kPiece;
    return SubSpan(of, off, std::min(kPiece, span.n - off));
  };
  try {
    arena_.Execute([&] {
      tbb::parallel_for(uint64_t{0}, pieces, [&](uint64_t p) {
        cpu::RunWorkProbe();
        const StepSpan live = piece(p, span);
        CopyStateArraysStreaming(piece(p, backup_[c]), live);
        piece_saved_[p] = 1;  // one task per piece: no two tasks write the same byte
        cpu::StepSpanHost(s, live);
      });
    });
  } catch (...) {
    // Undo the pieces that may have been written; the others were never touched.
    for (uint64_t p = 0; p < pieces; ++p)
      if (piece_saved_[p] != 0) CopyStateArrays(piece(p, span), piece(p, backup_[c]));
    throw;
  }
  busy_ms_ += MsSince(t0);
}

void Speculator::Restore(size_t c) {
  const StepSpan& live = (*chunks_)[c].span;
  const uint64_t n = live.n;
  arena_.Execute([&] {
    tbb::parallel_for(uint64_t{0}, PieceCount(n), [&](uint64_t p) {
      const uint64_t off = p * kPiece, cnt = std::min(kPiece, n - off);
      CopyStateArrays(SubSpan(live, off, cnt), SubSpan(backup_[c], off, cnt));
    });
  });
  status_[c] = kIdle;
}

size_t Speculator::Rollback() {
  std::lock_guard<std::mutex> lock(mu_);
  if (head_ != tail_ || running_)
    throw Error(ErrorKind::kInternal, "Speculator::Rollback while chunks are still queued");
  size_t restored = 0;
  for (size_t c = 0; c < status_.size(); ++c) {
    if (status_[c] != kStepped) continue;
    Restore(c);
    ++restored;
  }
  return restored;
}

void Speculator::Forget(size_t c) {
  std::lock_guard<std::mutex> lock(mu_);
  if (head_ != tail_ || running_)
    throw Error(ErrorKind::kInternal, "Speculator::Forget while chunks are still queued");
  if (c >= status_.size())
    throw Error(ErrorKind::kInternal, "Speculator::Forget: chunk " + std::to_string(c));
  if (status_[c] == kStepped) Restore(c);
  status_[c] = kIdle;
  head_ = tail_ = 0;  // idle: the queue starts over (each chunk at most once until then)
}

void Speculator::End() {
  std::lock_guard<std::mutex> lock(mu_);
  std::fill(status_.begin(), status_.end(), uint8_t{kIdle});
  head_ = tail_ = 0;
  error_ = nullptr;
  cancel_ = false;
  busy_ms_ = 0;
}

size_t Speculator::stepped_count() const {
  size_t k = 0;
  for (uint8_t s : status_) k += s == kStepped ? 1 : 0;
  return k;
}

}  // namespace tandem::offload
