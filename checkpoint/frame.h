// The fixed-size header and footer (docs/checkpoint_format.md, "Header", "Footer").
// Thread-safe (pure functions).
#pragma once

#include <array>
#include <cstdint>
#include <string>

#include "checkpoint/format.h"

namespace tandem::ckpt {

struct Footer {
  uint64_t manifest_offset = 0;
  uint64_t manifest_length = 0;
  uint32_t manifest_crc = 0;
  uint32_t version = kVersion;
  uint64_t file_length = 0;
};

std::array<unsigned char, kHeaderSize> EncodeHeader();
std::array<unsigned char, kFooterSize> EncodeFooter(const Footer& f);

// Check magic, then version, then CRC; throw Error(kCorruption) prefixed with `where`.
// DecodeHeader returns the version, one in [kOldestReadableVersion, kVersion];
// DecodeFooter requires the footer's version to equal `header_version`.
uint32_t DecodeHeader(const unsigned char* p, const std::string& where);
Footer DecodeFooter(const unsigned char* p, uint32_t header_version, const std::string& where);

}  // namespace tandem::ckpt
