// Internal: writing a whole file so that readers see the old one or the new one, never a
// part: SaveCheckpoint, ExportSafetensorsMasters and tandem-ckpt's torch layout.
#pragma once

#include <functional>
#include <string>

#include "tandem/checkpoint.h"

namespace tandem::ckpt {

// Creates path + ".tmp", lets `fill` write the contents, flushes, syncs if `sync`,
// closes, renames it over `path` and, if `sync`, syncs the directory. On any failure
// (of `fill` or of `env`: Error(kIO)) removes the .tmp, ignoring a failure to do so, and
// rethrows the original failure; `path` is then untouched. Thread-compatible.
void WriteFileAtomically(Env* env, const std::string& path, bool sync,
                         const std::function<void(WritableFile* file)>& fill);

}  // namespace tandem::ckpt
