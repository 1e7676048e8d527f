// Internal: reading a whole input file (config.json, tensor list, calibration profile).
#pragma once

#include <string>

namespace tandem::planner {

// The bytes of `path`. Throws Error(kIO) "<path>: cannot open <what>" or
// "<path>: read failed". Thread-safe.
std::string ReadWholeFile(const std::string& path, const std::string& what);

}  // namespace tandem::planner
