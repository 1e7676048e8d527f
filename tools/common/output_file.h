// Where the tools write: every output is checked before any work starts, and written whole
// or not at all.
//
//   tools::CheckOutputFile("OUT", out, {{"FILE", in}});   // first, before reading `in`
//   ...                                                    // the work
//   tools::WriteFileAtomically(out, text);                 // temporary + fsync + rename
//
// An output that is one of the inputs (the same path, a hard link to it or a symlink to
// it: compared by st_dev and st_ino after following links) is refused, because writing it
// would replace the input that is being read. Writing goes through the checkpoint
// library's atomic writer (checkpoint/atomic_file.h), the one every checkpoint file uses:
// `path.tmp` is written, fsynced and renamed over `path`, so a crash leaves the old file or
// the new one, never part of one.
//
// Thread-compatible free functions; each throws tandem::Error and nothing else of its own.
#pragma once

#include <string>
#include <vector>

namespace tandem::tools {

// A path the command line named, with the name of its argument ("FILE", "--config").
struct NamedPath {
  std::string what;
  std::string path;
};

// True when `a` and `b` name the same existing file (links followed).
bool SameFile(const std::string& a, const std::string& b);

// Checks that `path`, given as argument `what`, can be written as a new file: not empty,
// not an existing directory, its directory exists and is writable, and it is none of
// `inputs` (nor another output: pass the outputs checked before it too). Throws
// Error(kInvalidArgument) naming `what`, the path and the reason; changes nothing.
void CheckOutputFile(const std::string& what, const std::string& path,
                     const std::vector<NamedPath>& inputs = {});

// Checks that `dir`, given as argument `what`, is an existing, writable directory. Throws
// Error(kInvalidArgument) naming `what`, the path and the reason.
void CheckOutputDir(const std::string& what, const std::string& dir);

// Writes `bytes` to `path` atomically and durably (ckpt::WriteFileAtomically with sync on
// Env::Default()). Throws Error(kIO) naming the file; `path` is then untouched.
void WriteFileAtomically(const std::string& path, const std::string& bytes);

}  // namespace tandem::tools
