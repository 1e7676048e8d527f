#include "checkpoint/crc.h"

#include <isa-l/crc.h>

#include <climits>
#include <cstring>

namespace tandem::ckpt {

uint32_t Crc32c(const void* data, size_t n, uint32_t crc) {
  // crc32_iscsi works on the inverted register and takes an int length: feed it in
  // pieces below 2^31 bytes.
  uint32_t reg = ~crc;
  auto* p = static_cast<const unsigned char*>(data);
  while (n > 0) {
    const size_t piece = n < (size_t{1} << 30) ? n : (size_t{1} << 30);
    reg = crc32_iscsi(const_cast<unsigned char*>(p), static_cast<int>(piece), reg);
    p += piece;
    n -= piece;
  }
  return ~reg;
}

uint32_t SectionCrc(SectionKind kind, uint32_t tensor, Codec codec, uint64_t raw_length,
                    const void* payload, size_t n) {
  unsigned char tag[kSectionTagSize] = {};
  const uint32_t k = static_cast<uint32_t>(kind), c = static_cast<uint32_t>(codec);
  memcpy(tag + 0, &k, 4);
  memcpy(tag + 4, &tensor, 4);
  memcpy(tag + 8, &c, 4);
  memcpy(tag + 16, &raw_length, 8);
  return Crc32c(payload, n, Crc32c(tag, sizeof tag));
}

}  // namespace tandem::ckpt
