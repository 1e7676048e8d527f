// The message of an Error without the "tandem: <kind>: " prefix its constructor added, for
// the few places that report one error inside another of a different kind.
#pragma once

#include <string>

#include "tandem/error.h"

namespace tandem::ckpt {

inline std::string BareMessage(const Error& e) {
  const std::string msg = e.what();
  const std::string prefix = std::string("tandem: ") + ErrorKindName(e.kind()) + ": ";
  return msg.compare(0, prefix.size(), prefix) == 0 ? msg.substr(prefix.size()) : msg;
}

}  // namespace tandem::ckpt
