// Internal: writing a whole file so that readers see the old one or the new one, never a
// part: SaveCheckpoint, ExportSafetensorsMasters, planner::WriteProfile and every file the
// command-line tools write (tools/common/output_file.h).
#pragma once

#include <functional>
#include <string>

#include "tandem/checkpoint.h"

namespace tandem::ckpt {

// The temporary file a write of `path` goes through: path + ".tmp", in the same directory
// (a rename is atomic only within one file system). A process killed while writing leaves
// it behind; the next WriteFileAtomically of `path` removes it, and `tandem-ckpt inspect`
// and `verify` list it.
std::string TemporaryPath(const std::string& path);

// Refuses a `path` that is a directory (Env::IsDirectory: Error(kInvalidArgument) "'<path>':
// is a directory; name a file in it", nothing written). Removes a stale
// TemporaryPath(path) left by an interrupted write (whatever it is: a
// partial file, or a link, which is removed rather than followed), creates it anew, lets
// `fill` write the contents, flushes, syncs if `sync`, closes, renames it over `path` and,
// if `sync`, syncs the directory. On any failure (of `fill` or of `env`: Error(kIO))
// removes the temporary, ignoring a failure to do so, and rethrows the original failure;
// `path` is then untouched. Thread-compatible.
void WriteFileAtomically(Env* env, const std::string& path, bool sync,
                         const std::function<void(WritableFile* file)>& fill);

}  // namespace tandem::ckpt
