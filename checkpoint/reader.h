// CheckpointReader: opens a checkpoint, verifies header, footer and manifest, and reads
// and verifies sections on request. Used by Load, Verify and Inspect. Not thread-safe.
#pragma once

#include <memory>
#include <string>

#include "tandem/checkpoint.h"

namespace tandem::ckpt {

class CheckpointReader {
 public:
  // Opens `path` through `env` (not owned; must outlive the reader) and checks everything
  // but the data sections. Throws Error(kIO) or Error(kCorruption).
  CheckpointReader(const std::string& path, Env* env);

  const CheckpointInfo& info() const { return info_; }

  // Reads section i (index into info().sections), checking the zero padding before it,
  // its CRC and, if compressed, that it inflates to exactly raw_length bytes. Writes the
  // raw bytes to dest[0, raw_length) or, if dest is null, only verifies. Throws
  // Error(kCorruption) naming file, section, tensor, kind and offset, or Error(kIO).
  // On failure dest holds unspecified bytes.
  void ReadSection(size_t i, void* dest) const;

  // "checkpoint 'path'".
  const std::string& where() const { return where_; }

 private:
  // Reads exactly n bytes at offset or throws kCorruption ("truncated") / kIO.
  void ReadExact(uint64_t offset, size_t n, void* dest, const std::string& what) const;
  std::string SectionWhere(size_t i) const;

  std::string where_;
  std::unique_ptr<RandomAccessFile> file_;
  CheckpointInfo info_;
};

}  // namespace tandem::ckpt
