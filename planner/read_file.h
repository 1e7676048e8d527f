// Internal: reading a whole input file (config.json, tensor list, calibration profile).
#pragma once

#include <cstdint>
#include <string>

namespace tandem::planner {

// The most bytes an input file may hold: far above any config.json or profile (a few
// KiB), and for a tensor list (about 100 bytes a tensor) ample room for the planner's
// most tensors (kMaxModelTensors); far below what would strain the machine.
inline constexpr uint64_t kMaxInputFileBytes = uint64_t{16} << 20;
inline constexpr uint64_t kMaxTensorListBytes = uint64_t{64} << 20;

// The bytes of `path`, at most `limit` of them. Throws Error(kIO) "<path>: cannot open
// <what>" or "<path>: read failed", and Error(kInvalidArgument) "<path>: the <what> is
// larger than <limit> bytes, ..." for a longer file (or an endless one: /dev/zero),
// having read no more than limit + 1 bytes. Thread-safe.
std::string ReadWholeFile(const std::string& path, const std::string& what,
                          uint64_t limit = kMaxInputFileBytes);

}  // namespace tandem::planner
