// Tandem's one error type.
//
// Every failure of the library is reported by throwing tandem::Error. Its kind says which
// class of failure it is; its message names what was at fault (the tensor, chunk, file,
// offset, and the sizes involved). Library code never calls exit() or abort().
//
// Thread safety: Error is an immutable value type; copies may be used from any thread.
#pragma once

#include <stdexcept>
#include <string>

namespace tandem {

enum class ErrorKind : int {
  kInvalidArgument = 1,  // the caller passed something the contract forbids
  kCorruption = 2,       // persisted data failed a check (CRC, magic, bounds)
  kIO = 3,               // a file-system or device I/O call failed
  kCuda = 4,             // a CUDA runtime call or kernel launch failed
  kOutOfMemory = 5,      // a device, pinned or host allocation failed
  kUnsupported = 6,      // valid request that this build or machine cannot serve
  kInternal = 7,         // a broken invariant inside Tandem (a bug: please report it)
};

// Returns a stable lower-case name for `kind` ("invalid argument", "corruption", ...).
const char* ErrorKindName(ErrorKind kind) noexcept;

class Error : public std::runtime_error {
 public:
  Error(ErrorKind kind, const std::string& message);

  ErrorKind kind() const noexcept { return kind_; }
  // The message as given, without the "tandem: <kind>: " that what() puts before it:
  // code that adds context to an error it rethrows builds on this, so that the prefix
  // appears once.
  const std::string& message() const noexcept { return message_; }

 private:
  ErrorKind kind_;
  std::string message_;
};

}  // namespace tandem
