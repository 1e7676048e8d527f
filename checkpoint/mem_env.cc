// NewMemEnv(): files as shared byte strings in a map, guarded by one mutex.
#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "tandem/checkpoint.h"
#include "tandem/error.h"

namespace tandem {
namespace {

using Bytes = std::shared_ptr<std::string>;

class MemWritableFile final : public WritableFile {
 public:
  MemWritableFile(Bytes data, std::mutex* mu) : data_(std::move(data)), mu_(mu) {}
  void Append(const void* data, size_t n) override {
    if (n == 0) return;  // data may be null
    std::lock_guard<std::mutex> lock(*mu_);
    data_->append(static_cast<const char*>(data), n);
  }
  void Flush() override {}
  void Sync() override {}
  void Close() override {}

 private:
  Bytes data_;
  std::mutex* mu_;
};

class MemRandomAccessFile final : public RandomAccessFile {
 public:
  explicit MemRandomAccessFile(std::string data) : data_(std::move(data)) {}
  size_t Read(uint64_t offset, size_t n, void* scratch) const override {
    if (offset >= data_.size()) return 0;
    const size_t avail = data_.size() - offset;
    const size_t k = n < avail ? n : avail;
    data_.copy(static_cast<char*>(scratch), k, offset);
    return k;
  }
  uint64_t Size() const override { return data_.size(); }

 private:
  const std::string data_;  // a snapshot taken at open
};

class MemEnv final : public Env {
 public:
  std::unique_ptr<WritableFile> NewWritableFile(const std::string& path) override {
    std::lock_guard<std::mutex> lock(mu_);
    auto bytes = std::make_shared<std::string>();
    files_[path] = bytes;
    return std::make_unique<MemWritableFile>(bytes, &mu_);
  }
  std::unique_ptr<RandomAccessFile> NewRandomAccessFile(const std::string& path) override {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = files_.find(path);
    if (it == files_.end())
      throw Error(ErrorKind::kIO, "cannot open '" + path + "': No such file or directory");
    return std::make_unique<MemRandomAccessFile>(*it->second);
  }
  void RenameFile(const std::string& from, const std::string& to) override {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = files_.find(from);
    if (it == files_.end())
      throw Error(ErrorKind::kIO, "cannot rename '" + from + "': No such file or directory");
    Bytes b = it->second;
    files_.erase(it);
    files_[to] = b;
  }
  void RemoveFile(const std::string& path) override {
    std::lock_guard<std::mutex> lock(mu_);
    files_.erase(path);
  }
  void SyncDir(const std::string&) override {}
  bool FileExists(const std::string& path) override {
    std::lock_guard<std::mutex> lock(mu_);
    return files_.count(path) != 0;
  }

 private:
  std::mutex mu_;
  std::map<std::string, Bytes> files_;
};

}  // namespace

std::unique_ptr<Env> NewMemEnv() { return std::make_unique<MemEnv>(); }

}  // namespace tandem
