#include "tandem/error.h"

namespace tandem {

const char* ErrorKindName(ErrorKind kind) noexcept {
  switch (kind) {
    case ErrorKind::kInvalidArgument: return "invalid argument";
    case ErrorKind::kCorruption: return "corruption";
    case ErrorKind::kIO: return "I/O error";
    case ErrorKind::kCuda: return "CUDA error";
    case ErrorKind::kOutOfMemory: return "out of memory";
    case ErrorKind::kUnsupported: return "unsupported";
    case ErrorKind::kInternal: return "internal error";
  }
  return "unknown error";
}

Error::Error(ErrorKind kind, const std::string& message)
    : std::runtime_error(std::string("tandem: ") + ErrorKindName(kind) + ": " + message),
      kind_(kind),
      message_(message) {}

}  // namespace tandem
