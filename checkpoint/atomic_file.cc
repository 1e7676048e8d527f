// WriteFileAtomically: write path.tmp, then rename.
#include "checkpoint/atomic_file.h"

#include <filesystem>
#include <memory>

#include "tandem/error.h"

namespace tandem::ckpt {

std::string TemporaryPath(const std::string& path) { return path + ".tmp"; }

void WriteFileAtomically(Env* env, const std::string& path, bool sync,
                         const std::function<void(WritableFile* file)>& fill) {
  // A directory cannot be replaced by a file (and "." would write "..tmp" beside it).
  if (env->IsDirectory(path))
    throw Error(ErrorKind::kInvalidArgument, "'" + path + "': is a directory; name a file in it");
  const std::string tmp = TemporaryPath(path);
  try {
    // A temporary left by a killed write is stale: remove it rather than write through it
    // (it may be a link to another file).
    env->RemoveFile(tmp);
    {
      std::unique_ptr<WritableFile> file = env->NewWritableFile(tmp);
      fill(file.get());
      file->Flush();
      if (sync) file->Sync();
      file->Close();
    }
    env->RenameFile(tmp, path);
  } catch (...) {
    try {
      env->RemoveFile(tmp);
    } catch (...) {
      // The original failure is the one worth reporting; a stale .tmp is harmless.
    }
    throw;
  }
  if (sync) {
    const std::string dir = std::filesystem::path(path).parent_path().string();
    env->SyncDir(dir.empty() ? "." : dir);
  }
}

}  // namespace tandem::ckpt
