// Logger: where the library's progress lines go (LevelDB's info_log).
//
// The optimizer writes a few lines of progress while a long construction runs
// (docs/user_guide.md: "tandem: initialising optimizer state: 41% ..."), and nothing
// while it steps. By default they go to stderr; a caller that wants them elsewhere (its
// own logging, a file, nowhere) hands a Logger in OptimizerConfig::info_log.
//
//   struct MyLog : tandem::Logger {
//     void Log(const std::string& line) override { spdlog::info("{}", line); }
//   };
//   cfg.info_log = std::make_shared<MyLog>();
//
// Thread safety: Log may be called from any of the optimizer's threads, one call at a
// time per optimizer (the library serialises its own calls); an implementation shared by
// several optimizers must be safe to call from several threads at once (StderrLogger is).
#pragma once

#include <memory>
#include <string>

namespace tandem {

class Logger {
 public:
  virtual ~Logger() = default;
  // One line, without its newline. Must not throw (an exception is swallowed).
  virtual void Log(const std::string& line) = 0;
};

// Writes each line to stderr with a newline, whole (lines of several threads never mix).
std::shared_ptr<Logger> StderrLogger();

}  // namespace tandem
