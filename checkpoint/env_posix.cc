// Env::Default(): POSIX files with write/pread/fsync/rename.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>

#include "tandem/checkpoint.h"
#include "tandem/error.h"

namespace tandem {
namespace {

[[noreturn]] void ThrowErrno(const std::string& what, const std::string& path, int err) {
  throw Error(ErrorKind::kIO, what + " '" + path + "': " + strerror(err));
}

class PosixWritableFile final : public WritableFile {
 public:
  PosixWritableFile(std::string path, int fd) : path_(std::move(path)), fd_(fd) {}
  ~PosixWritableFile() override {
    if (fd_ >= 0) ::close(fd_);
  }

  void Append(const void* data, size_t n) override {
    auto* p = static_cast<const char*>(data);
    while (n > 0) {
      // Linux writes at most 0x7ffff000 bytes per call; ask for 1 GiB at a time.
      const size_t piece = n < (size_t{1} << 30) ? n : (size_t{1} << 30);
      const ssize_t w = ::write(fd_, p, piece);
      if (w < 0) {
        if (errno == EINTR) continue;
        ThrowErrno("write", path_, errno);
      }
      p += w;  // a short write continues with the rest
      n -= static_cast<size_t>(w);
    }
  }
  void Flush() override {}  // unbuffered: every Append is already a write(2)
  void Sync() override {
    if (::fdatasync(fd_) != 0) ThrowErrno("fdatasync", path_, errno);
  }
  void Close() override {
    const int fd = fd_;
    fd_ = -1;
    if (fd >= 0 && ::close(fd) != 0) ThrowErrno("close", path_, errno);
  }

 private:
  std::string path_;
  int fd_;
};

class PosixRandomAccessFile final : public RandomAccessFile {
 public:
  PosixRandomAccessFile(std::string path, int fd, uint64_t size)
      : path_(std::move(path)), fd_(fd), size_(size) {}
  ~PosixRandomAccessFile() override { ::close(fd_); }

  size_t Read(uint64_t offset, size_t n, void* scratch) const override {
    auto* p = static_cast<char*>(scratch);
    size_t done = 0;
    while (done < n) {
      const size_t piece = n - done < (size_t{1} << 30) ? n - done : (size_t{1} << 30);
      const ssize_t r = ::pread(fd_, p + done, piece, static_cast<off_t>(offset + done));
      if (r < 0) {
        if (errno == EINTR) continue;
        ThrowErrno("read at offset " + std::to_string(offset + done) + " of", path_, errno);
      }
      if (r == 0) break;  // end of file
      done += static_cast<size_t>(r);
    }
    return done;
  }
  uint64_t Size() const override { return size_; }

 private:
  std::string path_;
  int fd_;
  uint64_t size_;
};

class PosixEnv final : public Env {
 public:
  std::unique_ptr<WritableFile> NewWritableFile(const std::string& path) override {
    const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) ThrowErrno("cannot create", path, errno);
    return std::make_unique<PosixWritableFile>(path, fd);
  }
  std::unique_ptr<RandomAccessFile> NewRandomAccessFile(const std::string& path) override {
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) ThrowErrno("cannot open", path, errno);
    struct stat st;
    if (::fstat(fd, &st) != 0) {
      const int err = errno;
      ::close(fd);
      ThrowErrno("cannot stat", path, err);
    }
    return std::make_unique<PosixRandomAccessFile>(path, fd, static_cast<uint64_t>(st.st_size));
  }
  void RenameFile(const std::string& from, const std::string& to) override {
    if (::rename(from.c_str(), to.c_str()) != 0)
      ThrowErrno("cannot rename '" + from + "' to", to, errno);
  }
  void RemoveFile(const std::string& path) override {
    if (::unlink(path.c_str()) != 0 && errno != ENOENT) ThrowErrno("cannot remove", path, errno);
  }
  void SyncDir(const std::string& dir) override {
    const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) ThrowErrno("cannot open directory", dir, errno);
    const int rc = ::fsync(fd);
    const int err = errno;
    ::close(fd);
    if (rc != 0) ThrowErrno("fsync of directory", dir, err);
  }
  bool FileExists(const std::string& path) override { return ::access(path.c_str(), F_OK) == 0; }
  bool IsDirectory(const std::string& path) override {
    struct stat st;
    return ::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
  }
};

}  // namespace

Env* Env::Default() {
  static Env* env = new PosixEnv;  // never destroyed: usable during static destruction
  return env;
}

}  // namespace tandem
