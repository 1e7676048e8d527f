// Helpers for the checkpoint tests: random snapshots of the right sizes and an Env that
// injects failures and simulates a crash (losing unsynced data and un-synced renames).
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tandem/checkpoint.h"
#include "tandem/snapshot.h"

namespace tandem::testing {

// A snapshot of `algo`/`formats` with tensors of the given sizes and random contents
// (random bit patterns, each made valid with the fewest bit changes: no NaN or infinity,
// no negative variance or scale), alternating between two groups; for SGD group 1 has
// momentum 0 (no momentum buffer). Tensor i has step s.step - i (at least 0) and a shape
// for some sizes (0 -> [0, 7], a multiple of 8 -> [n/8, 2, 4], odd i -> [1, n]); the
// metadata is JSON with non-ASCII text. Passes ValidateRestorable (q8 variance scales
// below 2^64, so that every code decodes to a finite variance; first moments, q8 scales
// and f32 values, below 2^64, so that Adam's m / (sqrt(v) + eps) stays finite).
// Tensor i takes overrides[i] as its own formats where given (TensorSnapshot::formats;
// its arrays follow them), `formats` otherwise.
OptimizerSnapshot MakeSnapshot(Algorithm algo, StateFormats formats, uint32_t seed,
                               const std::vector<uint64_t>& sizes = {0, 1, 31, 32, 33, 200},
                               const std::map<size_t, StateFormats>& overrides = {});

// A snapshot whose arrays hold low-entropy data, so deflate pays.
OptimizerSnapshot MakeCompressibleSnapshot(uint32_t seed);

// Bit-for-bit equality of every field (operator== says -0 == +0, and ignores nothing,
// but tests want to see bit patterns).
bool SameBits(const OptimizerSnapshot& a, const OptimizerSnapshot& b);

// Every algorithm x master x momentum x variance combination.
std::vector<std::pair<Algorithm, StateFormats>> AllCombinations();

// `file` (the bytes of a good checkpoint) with its manifest rewritten by edit(json) and the
// manifest CRC and footer fixed, so that only the checks behind the CRCs can object.
std::string WithManifest(const std::string& file,
                         const std::function<void(nlohmann::json&)>& edit);

// `file` with byte `byte` of data section `section` replaced by `value` and the section's
// CRC in the manifest fixed (the section must be stored uncompressed).
std::string WithSectionByte(const std::string& file, size_t section, uint64_t byte,
                            uint8_t value);

// Good CRCs, bad contents: files that only the snapshot checks refuse. Each is a saved
// MakeSnapshot(kAdamW, f32 formats, 7, {1, 33, 40}) changed so that: tensor 1 repeats
// tensor 0's name / the manifest step is 2^63 - 1 / element 5 of tensor 1's master is NaN.
std::string DuplicateNameFile();
std::string StepOverflowFile();
std::string NaNMasterFile();

// Bytes of a file in an Env.
std::string ReadAll(Env* env, const std::string& path);
void WriteAll(Env* env, const std::string& path, const std::string& bytes);

// An in-memory Env whose every call (NewWritableFile, Append, Flush, Sync, Close,
// RenameFile, SyncDir) counts as one step; the step numbered fail_at throws Error(kIO)
// (a failing Append first writes half of its bytes: a short write). Crash() then models
// power loss: file contents fall back to what was last synced and the directory to what
// the last SyncDir saw. Thread-compatible (tests use it from one thread).
class FaultEnv : public Env {
 public:
  int64_t fail_at = -1;  // step to fail; -1 never
  int64_t steps = 0;     // steps taken so far
  std::string failed_step;  // name of the step that failed, "" if none

  std::unique_ptr<WritableFile> NewWritableFile(const std::string& path) override;
  std::unique_ptr<RandomAccessFile> NewRandomAccessFile(const std::string& path) override;
  void RenameFile(const std::string& from, const std::string& to) override;
  void RemoveFile(const std::string& path) override;
  void SyncDir(const std::string& dir) override;
  bool FileExists(const std::string& path) override;

  void Crash();
  void Step(const std::string& what);  // throws at fail_at

  struct File {
    std::string data;
    size_t synced = 0;
  };

 private:
  std::map<std::string, std::shared_ptr<File>> live_, durable_;
};

}  // namespace tandem::testing
