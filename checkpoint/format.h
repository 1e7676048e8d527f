// Constants of the Tandem checkpoint file format (docs/checkpoint_format.md has the grammar).
//
// Everything here is written to disk: values are never renumbered or reused, only added.
// All integers in the file are little-endian; arrays are stored in their in-memory
// little-endian layout (the writer and reader static_assert a little-endian host).
#pragma once

#include <bit>
#include <cstddef>
#include <cstdint>

namespace tandem::ckpt {

static_assert(std::endian::native == std::endian::little,
              "the checkpoint code stores arrays in host order and needs a little-endian host");

// File = Header | (Padding Section)* | Padding Manifest | Footer.
inline constexpr char kHeaderMagic[8] = {'T', 'N', 'D', 'M', 'C', 'K', 'P', 'T'};
inline constexpr char kFooterMagic[8] = {'T', 'N', 'D', 'M', 'E', 'N', 'D', '1'};
// Format versions (docs/checkpoint_format.md, "Version history"). The writer writes
// kVersion; the reader reads every version in [kOldestReadableVersion, kVersion].
inline constexpr uint32_t kVersion1 = 1;  // the first format
inline constexpr uint32_t kVersion2 = 2;  // + tensors[].shape, tensors[].step, metadata
inline constexpr uint32_t kVersion3 = 3;  // + tensors[].formats (per-tensor state formats)
inline constexpr uint32_t kVersion = kVersion3;
inline constexpr uint32_t kOldestReadableVersion = kVersion1;

inline constexpr size_t kHeaderSize = 32;  // magic[8] version u32 header_size u32 reserved[12] crc u32
inline constexpr size_t kFooterSize = 48;  // see docs/checkpoint_format.md, "Footer"

// Every section and the manifest start at a multiple of kAlignment; the gap before them
// holds zero bytes, which the reader checks.
inline constexpr uint64_t kAlignment = 64;

// Compression of one section's payload.
enum class Codec : uint32_t {
  kNone = 0,
  kDeflate = 1,  // raw DEFLATE (RFC 1951, no zlib/gzip wrapper), ISA-L igzip level 1
};

// Section kinds, one per array of TensorSnapshot. Written to disk: never renumber.
enum class SectionKind : uint32_t {
  kManifest = 0,  // the JSON manifest (only used as the CRC type tag)
  kMasterF32 = 1,
  kMasterBf16 = 2,
  kEcc8 = 3,
  kEcc16 = 4,
  kMF32 = 5,
  kMCodes = 6,
  kMScales = 7,
  kVF32 = 8,
  kVCodes = 9,
  kVScales = 10,
};
inline constexpr uint32_t kFirstDataKind = 1;
inline constexpr uint32_t kLastDataKind = 10;

// A section's CRC32C (Castagnoli, ISA-L crc32_iscsi, initial value 0) is computed over a
// 24-byte tag followed by the stored payload:
//   kind u32 | tensor u32 | codec u32 | reserved u32 (0) | raw_length u64
// so that a payload moved to another section, tensor or codec fails its check.
// The manifest's tag is kind 0, tensor 0xFFFFFFFF, codec 0, raw_length = its length.
inline constexpr size_t kSectionTagSize = 24;
inline constexpr uint32_t kNoTensor = 0xFFFFFFFFu;

// Upper bound on the manifest, so that a damaged footer cannot make the reader allocate
// without limit (a manifest is about 300 bytes per tensor).
inline constexpr uint64_t kMaxManifestBytes = uint64_t{1} << 30;

// Deflate cannot expand more than 1032:1; a larger claimed raw length is corrupt.
inline constexpr uint64_t kMaxDeflateRatio = 1032;

}  // namespace tandem::ckpt
