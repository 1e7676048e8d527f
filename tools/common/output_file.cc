// Output checks and atomic writes for the tools (output_file.h).
#include "tools/common/output_file.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <system_error>

#include "checkpoint/atomic_file.h"
#include "tandem/checkpoint.h"
#include "tandem/error.h"

namespace tandem::tools {
namespace {

[[noreturn]] void Refuse(const std::string& what, const std::string& path, const std::string& why) {
  throw Error(ErrorKind::kInvalidArgument, what + " '" + path + "': " + why);
}

// The directory a new file at `path` goes into ("." for a bare name).
std::string DirOf(const std::string& path) {
  const std::string dir = std::filesystem::path(path).parent_path().string();
  return dir.empty() ? "." : dir;
}

// The path with every existing link resolved, or the path itself if that fails.
std::filesystem::path Resolved(const std::string& path) {
  std::error_code ec;
  std::filesystem::path p = std::filesystem::weakly_canonical(path, ec);
  return ec ? std::filesystem::path(path).lexically_normal() : p;
}

void CheckWritableDir(const std::string& what, const std::string& path, const std::string& dir,
                      const char* relation) {
  struct stat st;
  if (::stat(dir.c_str(), &st) != 0)
    Refuse(what, path,
           std::string(relation) + " '" + dir + "' " +
               (errno == ENOENT ? "does not exist" : std::strerror(errno)));
  if (!S_ISDIR(st.st_mode))
    Refuse(what, path, std::string(relation) + " '" + dir + "' is not a directory");
  if (::access(dir.c_str(), W_OK | X_OK) != 0)
    Refuse(what, path,
           std::string(relation) + " '" + dir + "' is not writable (" + std::strerror(errno) + ")");
}

}  // namespace

bool SameFile(const std::string& a, const std::string& b) {
  struct stat sa, sb;
  if (::stat(a.c_str(), &sa) != 0 || ::stat(b.c_str(), &sb) != 0) return false;
  return sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
}

void CheckOutputFile(const std::string& what, const std::string& path,
                     const std::vector<NamedPath>& inputs) {
  if (path.empty()) Refuse(what, path, "an empty path names no file");
  struct stat st;
  if (::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode))
    Refuse(what, path, "is a directory; name a file in it");
  CheckWritableDir(what, path, DirOf(path), "its directory");
  for (const NamedPath& in : inputs) {
    if (in.path.empty()) continue;
    const bool same_name = Resolved(in.path) == Resolved(path);
    if (same_name || SameFile(in.path, path))
      Refuse(what, path,
             "is the same file as " + in.what + " '" + in.path + "'" +
                 (same_name ? "" : " (a hard link to it)") + ": writing " + what +
                 " would replace " + in.what + "; name another file");
  }
}

void CheckOutputDir(const std::string& what, const std::string& dir) {
  if (dir.empty()) Refuse(what, dir, "an empty path names no directory");
  CheckWritableDir(what, dir, dir, "the directory");
}

void WriteFileAtomically(const std::string& path, const std::string& bytes) {
  ckpt::WriteFileAtomically(Env::Default(), path, /*sync=*/true,
                            [&](WritableFile* file) { file->Append(bytes.data(), bytes.size()); });
}

}  // namespace tandem::tools
