// What the checkpoint round-trip tests (host and GPU) share: a temporary path per process
// and loading a file into a running optimizer the way a training script does.
#pragma once

#include <unistd.h>

#include <filesystem>
#include <string>

#include "tandem/checkpoint.h"
#include "tandem/optimizer.h"

namespace tandem::testing {

inline std::string TempPath(const char* name) {
  return (std::filesystem::temp_directory_path() /
          (std::string("tandem_") + std::to_string(getpid()) + "_" + name))
      .string();
}

// Loads `path` into `opt`: verify, check the layout against the optimizer's, restore.
inline void Resume(HybridOptimizer& opt, const std::string& path) {
  const OptimizerSnapshot loaded = LoadCheckpoint(path);
  CheckCompatible(loaded, opt.Snapshot());
  opt.Restore(loaded);
}

}  // namespace tandem::testing
