// Checkpoints of an OptimizerSnapshot: atomic save, fully verified load, inspection,
// compatibility check, conversion between state formats, and fp32 master export/import
// as safetensors.
//
// The file format is defined in docs/checkpoint_format.md: a fixed header, one data
// section per array, a JSON manifest and a fixed footer, every part covered by CRC32C.
// All file I/O goes through Env, so tests can inject failures, bit flips and truncation.
//
// Errors: every function throws tandem::Error and nothing else of its own:
//   kInvalidArgument  the caller's snapshot or options break the contract
//   kCorruption       a file failed a check (magic, version, CRC, bounds, consistency)
//   kIO               a file-system call failed (open, read, write, sync, rename)
// Messages name the file and, where it applies, the section, tensor and byte offset.
//
// Thread safety: the free functions may run concurrently on different paths. Saving to
// the same path from two threads or processes at once is not supported (both use the
// temporary file path + ".tmp"). Env::Default() is thread-safe; a MemEnv is too.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "tandem/snapshot.h"
#include "tandem/types.h"

namespace tandem {

// ---- I/O interface ---------------------------------------------------------------------

// A file being written sequentially. Not thread-safe. Each method throws Error(kIO) on
// failure; after a failure the file's contents are unspecified and the only valid call
// is destruction. The destructor closes the file if Close was not called (ignoring errors).
class WritableFile {
 public:
  virtual ~WritableFile() = default;
  // Appends all n bytes (implementations retry short writes) or throws.
  virtual void Append(const void* data, size_t n) = 0;
  // Hands buffered data to the operating system.
  virtual void Flush() = 0;
  // Makes the data durable (fsync).
  virtual void Sync() = 0;
  virtual void Close() = 0;
};

// A file read at arbitrary offsets. Thread-safe for concurrent Read calls.
class RandomAccessFile {
 public:
  virtual ~RandomAccessFile() = default;
  // Reads up to n bytes at `offset` into `scratch` (n bytes, caller-owned); returns the
  // number read, less than n only at end of file. Throws Error(kIO) on failure.
  virtual size_t Read(uint64_t offset, size_t n, void* scratch) const = 0;
  // The file's size in bytes, fixed when it was opened.
  virtual uint64_t Size() const = 0;
};

// The file system. Implementations must be thread-safe. Every method throws Error(kIO)
// naming the path on failure.
class Env {
 public:
  virtual ~Env() = default;
  // Creates or truncates `path`.
  virtual std::unique_ptr<WritableFile> NewWritableFile(const std::string& path) = 0;
  virtual std::unique_ptr<RandomAccessFile> NewRandomAccessFile(const std::string& path) = 0;
  // Atomically replaces `to` with `from` (POSIX rename semantics).
  virtual void RenameFile(const std::string& from, const std::string& to) = 0;
  // Removes `path`; does nothing if it does not exist.
  virtual void RemoveFile(const std::string& path) = 0;
  // Makes the directory's entries (a rename into it) durable (fsync of the directory).
  virtual void SyncDir(const std::string& dir) = 0;
  virtual bool FileExists(const std::string& path) = 0;
  // Whether `path` names an existing directory; never throws. The default, for an Env
  // without directories (NewMemEnv), says no.
  virtual bool IsDirectory(const std::string& path) {
    (void)path;
    return false;
  }

  // The POSIX implementation; a process-wide object that is never destroyed.
  static Env* Default();
};

// A thread-safe in-memory Env (file name -> bytes), for tests, fuzzing and tools that
// want no disk. SyncDir does nothing; every path is valid.
std::unique_ptr<Env> NewMemEnv();

// ---- Save and load ---------------------------------------------------------------------

enum class CheckpointCompression : uint8_t {
  kNone = 0,  // store every section as is (fastest; the default)
  kAuto = 1,  // deflate (igzip level 1) only the kinds that compress on training-like
              // state (bf16 master weights about 1.28x, bf16 m/v scales about 1.46x), and
              // keep a section compressed only if it saves at least 1/8 of its bytes;
              // codes, ecc and fp32 arrays (1.00-1.08x) are stored as is
  kAll = 2,   // try every section, keep it compressed if it saves at least 1/8
};

struct CheckpointOptions {
  // Per-section compression; default kNone (docs/checkpoint_format.md, "Compression",
  // has the measurements behind the choice).
  CheckpointCompression compression = CheckpointCompression::kNone;
  // fsync the file before the rename and the directory after it. Default true; turning it
  // off keeps the rename atomic but not durable across a power loss (for benchmarks/tests).
  bool sync = true;
};

// Writes `snapshot` to `path` atomically: a temporary file path + ".tmp" in the same
// directory is written, flushed, fsynced, closed and renamed over `path`, then the
// directory is fsynced. If anything fails (or the process dies) before the rename, `path`
// keeps its previous contents; the temporary file is removed on a thrown failure.
// Writes format version ckpt::kVersion (shapes, per-tensor steps and the metadata string
// verbatim). Throws Error(kInvalidArgument) if ValidateSnapshot rejects the snapshot, a
// tensor name or the metadata is not valid UTF-8, or `path` is a directory ("'<path>': is a
// directory; name a file in it"): nothing is written then; Error(kIO)
// for file-system failures. env == nullptr means Env::Default(); it must outlive the call.
void SaveCheckpoint(const OptimizerSnapshot& snapshot, const std::string& path,
                    const CheckpointOptions& options = {}, Env* env = nullptr);

// Reads and fully verifies `path` (magic, version, header/footer/manifest CRC, every
// section's bounds, CRC and decompressed size, zero padding, and ValidateSnapshot: steps,
// shapes, duplicate names, array sizes and values, every value decoding to a finite fp32
// as a step decodes it; HybridOptimizer::Restore also bounds the step, ValidateRestorable)
// before returning; never returns partial data. Reads every format version from ckpt::kOldestReadableVersion on: a
// version 1 file has no per-tensor steps, shapes or metadata, so each tensor's step is
// the file's step and shape and metadata are empty. Throws Error(kCorruption) (a
// failure of those state checks reads "inconsistent state: ...") or Error(kIO).
OptimizerSnapshot LoadCheckpoint(const std::string& path, Env* env = nullptr);

// One data section as listed by the manifest.
struct CheckpointSection {
  uint32_t tensor = 0;       // index into CheckpointInfo::tensors
  uint32_t kind = 0;         // ckpt::SectionKind value
  std::string kind_name;     // "master_f32", "m_codes", ...
  uint64_t offset = 0;       // of the stored payload in the file
  uint64_t length = 0;       // stored bytes
  uint64_t raw_length = 0;   // bytes after decompression
  uint32_t crc32c = 0;
  std::string compression;   // "none" or "deflate"
};

// What the manifest says, without the arrays.
struct CheckpointInfo {
  std::string path;
  uint64_t file_size = 0;
  uint32_t version = 0;
  Algorithm algo = Algorithm::kAdamW;
  StateFormats formats;
  std::vector<HyperParams> groups;
  int64_t step = 0;
  std::string metadata;  // OptimizerSnapshot::metadata; empty in version 1 files
  // name, numel, shape, dtypes, group, step; arrays empty
  std::vector<TensorSnapshot> tensors;
  std::vector<CheckpointSection> sections;
};

// Reads the header, footer and manifest only (checking their magic, version and CRCs and
// the manifest's structure, including that sections lie inside the file); reads no data.
// Throws Error(kCorruption) or Error(kIO).
CheckpointInfo InspectCheckpoint(const std::string& path, Env* env = nullptr);

struct VerifyReport {
  bool ok = false;                    // true iff `problems` is empty
  std::vector<std::string> problems;  // one line per failed check, naming what failed
  uint64_t sections_checked = 0;
  uint64_t bytes_checked = 0;
  CheckpointInfo info;  // valid when the header, footer and manifest passed
};

// Runs every check LoadCheckpoint runs, through the same code, continuing past a failure
// to list every damaged section and every inconsistent value (one line each; the values
// of a tensor with a damaged section are not judged). Holds one tensor's arrays at a
// time. Corruption is reported in the result, not thrown; throws Error(kIO) only if the
// file cannot be opened or read. ok is true exactly when LoadCheckpoint would succeed.
VerifyReport VerifyCheckpoint(const std::string& path, Env* env = nullptr);

// Throws Error(kInvalidArgument) naming the first difference between the structure of a
// loaded snapshot and the optimizer's own layout: algorithm, default formats, group
// count, tensor count, then per tensor name, numel, shape (only when both sides have
// one), param dtype, grad dtype, group and the tensor's own formats. Array contents,
// hyper-parameter values, steps and metadata are not compared. Call before touching
// optimizer state.
void CheckCompatible(const OptimizerSnapshot& loaded, const OptimizerSnapshot& layout);

// ---- Conversion between state formats ---------------------------------------------------

// Which tensors ConvertSnapshot re-encodes.
enum class ConvertTensors : uint8_t {
  // Those whose formats are the snapshot's default (TensorSnapshot::formats ==
  // s.formats); a tensor that overrides them (TensorSpec::formats, e.g. f32 moments for a
  // tensor whose q8 groups a shard boundary could split) keeps its formats and its arrays
  // bit for bit, whatever `to` is. `to` becomes the new default. This is what moving a
  // state to an optimizer configured with other formats but the same overrides needs.
  kDefaultFormats = 0,
  // Every tensor, overrides included (e.g. everything to fp32 for export).
  kAll = 1,
};

// Re-encodes the tensors `which` selects in `to`: masters and moments are decoded to fp32
// and encoded again in the new formats (q8 -> f32 decodes exactly; f32 -> q8 uses the
// format's encoder; an fp32 master -> bf16+ecc uses the ecc encoder). Hyper-parameters,
// steps, names, shapes and metadata are copied. Throws Error(kInvalidArgument) if `s`
// fails ValidateSnapshot or `to` does not suit s.algo (e.g. a q8 variance for Lion).
// The q8 encoding of each group of 32 is bit for bit what the step kernels write for the
// same fp32 values (engine/q8_codec.h); a q8 variance stores sqrt(v) rounded once.
// Converting to the formats `s` already has returns an exact copy. The result's
// OptimizerSnapshot::formats is `to`. (An override needs no compatibility check: the
// algorithm does not change, and ValidateSnapshot has checked each tensor's arrays.)
OptimizerSnapshot ConvertSnapshot(const OptimizerSnapshot& s, const StateFormats& to,
                                  ConvertTensors which = ConvertTensors::kDefaultFormats);

// The same with each tensor's target given: tensor i is re-encoded in targets[i] (one
// entry per tensor; a tensor already in it is copied exactly) and `to` becomes the
// default. For a state moved to an optimizer whose overrides differ (e.g. a tensor that
// is sharded on one side only). Throws Error(kInvalidArgument) as ConvertSnapshot, and
// for a targets size other than the tensor count or a target that does not suit s.algo.
OptimizerSnapshot ConvertSnapshotPerTensor(const OptimizerSnapshot& s, const StateFormats& to,
                                           const std::vector<StateFormats>& targets);

// ---- fp32 master weights as safetensors -------------------------------------------------

// The fp32 master weight of tensor `t` whose master is in format f.master (pass
// t.formats): f32 as is, bf16
// widened, bf16+ecc8/ecc16 reconstructed (docs/numerics.md). Throws Error(kInvalidArgument)
// if the arrays do not match numel and formats.
std::vector<float> DecodeMasterF32(const TensorSnapshot& t, const StateFormats& f);

// Writes every tensor's fp32 master as a safetensors file (dtype "F32", the tensor's shape
// or [numel] where it has none, tensors in snapshot order, __metadata__ with format "pt",
// algorithm, formats and step), atomically like SaveCheckpoint. Throws
// Error(kInvalidArgument) for duplicate names or an invalid snapshot, Error(kIO) for I/O
// failures.
void ExportSafetensorsMasters(const OptimizerSnapshot& snapshot, const std::string& path,
                              Env* env = nullptr);

// Reads a safetensors file of 1-D or N-D tensors of dtype F32, BF16 or F16 (widened to
// fp32 exactly), checking the header length, JSON, dtypes, shapes, that data_offsets lie
// inside the data area, match the shape and neither overlap nor leave holes.
// Returns name -> values (row-major). Throws Error(kCorruption) naming the file and the
// entry at fault, or Error(kIO).
std::map<std::string, std::vector<float>> ImportSafetensorsMasters(const std::string& path,
                                                                   Env* env = nullptr);

}  // namespace tandem
