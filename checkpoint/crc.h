// CRC32C (Castagnoli) through ISA-L's crc32_iscsi, and the section tag of format.h.
// Thread-safe (pure functions).
#pragma once

#include <cstddef>
#include <cstdint>

#include "checkpoint/format.h"

namespace tandem::ckpt {

// CRC32C of data[0, n) continuing from `crc` (0 to start). ISA-L's crc32_iscsi takes and
// returns the raw (non-inverted) register; Crc32c hides that so that
// Crc32c(b, m, Crc32c(a, n)) == Crc32c(a ++ b) and Crc32c("123456789") == 0xE3069283.
uint32_t Crc32c(const void* data, size_t n, uint32_t crc = 0);

// CRC32C of the 24-byte tag (format.h, kSectionTagSize) followed by payload[0, n).
uint32_t SectionCrc(SectionKind kind, uint32_t tensor, Codec codec, uint64_t raw_length,
                    const void* payload, size_t n);

}  // namespace tandem::ckpt
