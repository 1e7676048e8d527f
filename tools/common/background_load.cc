// BackgroundLoad (background_load.h).
#include "background_load.h"

#include <utility>

namespace tandem::tools {

BackgroundLoad::BackgroundLoad(std::function<void()> round) : round_(std::move(round)) {
  thread_ = std::thread([this] { Run(); });
}

BackgroundLoad::~BackgroundLoad() {
  try {
    Stop();
  } catch (...) {
  }
}

void BackgroundLoad::Run() {
  std::exception_ptr error;
  try {
    while (!stop_.load()) {
      round_();
      rounds_.fetch_add(1);
      cv_.notify_all();
    }
  } catch (...) {
    error = std::current_exception();
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    ended_ = true;
    error_ = error;
  }
  cv_.notify_all();
}

bool BackgroundLoad::WaitForRounds(uint64_t n) {
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait(lock, [&] { return rounds_.load() >= n || ended_; });
  return rounds_.load() >= n;
}

uint64_t BackgroundLoad::Stop() {
  stop_.store(true);
  if (thread_.joinable()) thread_.join();
  std::exception_ptr error;
  {
    std::lock_guard<std::mutex> lock(mu_);
    std::swap(error, error_);
  }
  if (error) std::rethrow_exception(error);
  return rounds_.load();
}

}  // namespace tandem::tools
