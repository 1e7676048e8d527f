#include "tandem/logger.h"

#include <cstdio>
#include <mutex>

namespace tandem {
namespace {

class StderrLog final : public Logger {
 public:
  void Log(const std::string& line) override {
    std::lock_guard<std::mutex> lock(mu_);
    std::fprintf(stderr, "%s\n", line.c_str());
    std::fflush(stderr);
  }

 private:
  std::mutex mu_;
};

}  // namespace

std::shared_ptr<Logger> StderrLogger() {
  static const std::shared_ptr<Logger> log = std::make_shared<StderrLog>();
  return log;
}

}  // namespace tandem
