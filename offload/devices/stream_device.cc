// What every StreamDevice shares (offload/devices/stream_device.h).
#include "offload/devices/stream_device.h"

#include <string>

namespace tandem::offload {

std::string StreamDevice::What::Text() const {
  std::string text = unit;
  text.insert(0, 1, '(');
  text.append(" ").append(std::to_string(chunk)).append(" of ").append(std::to_string(chunks));
  text.append(", ").append(std::to_string(bytes)).append(" bytes: ").append(what).append(")");
  return text;
}

void StreamDevice::Drain() noexcept {
  try {
    SynchronizeAll();
  } catch (...) {  // dropped: the clean-up after a failure that was reported
  }
}

}  // namespace tandem::offload
