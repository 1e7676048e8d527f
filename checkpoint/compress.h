// Raw DEFLATE with ISA-L igzip (level 1) for section payloads. Thread-safe (no shared state).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace tandem::ckpt {

// Compresses data[0, n). Returns false (leaving *out unspecified) if the result would
// exceed max_out bytes, i.e. compression does not pay; true with *out holding the stream.
// Throws Error(kInternal) if igzip reports an error.
bool DeflateLevel1(const void* data, size_t n, size_t max_out, std::vector<uint8_t>* out);

// Decompresses exactly raw_length bytes into out[0, raw_length) from src[0, n). Throws
// Error(kCorruption) with `where` as prefix if the stream is invalid, yields a different
// size or leaves input unused.
void Inflate(const void* src, size_t n, void* out, size_t raw_length, const std::string& where);

}  // namespace tandem::ckpt
