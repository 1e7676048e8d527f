#include "checkpoint/reader.h"

#include <algorithm>
#include <cstdio>
#include <vector>

#include "checkpoint/compress.h"
#include "checkpoint/crc.h"
#include "checkpoint/frame.h"
#include "checkpoint/manifest.h"
#include "checkpoint/sections.h"
#include "tandem/error.h"

namespace tandem::ckpt {
namespace {

constexpr size_t kPiece = size_t{4} << 20;  // read + CRC granularity (stays in cache)

std::string Hex(uint32_t v) {
  char buf[16];
  snprintf(buf, sizeof buf, "0x%08x", v);
  return buf;
}

}  // namespace

CheckpointReader::CheckpointReader(const std::string& path, Env* env)
    : where_("checkpoint '" + path + "'") {
  file_ = env->NewRandomAccessFile(path);
  info_.path = path;
  const uint64_t size = file_->Size();
  info_.file_size = size;
  if (size < kHeaderSize + kFooterSize) {
    // Still tell a foreign file from a truncated one where possible.
    unsigned char magic[8] = {};
    if (file_->Read(0, 8, magic) == 8 &&
        !std::equal(magic, magic + 8, reinterpret_cast<const unsigned char*>(kHeaderMagic)))
      throw Error(ErrorKind::kCorruption,
                  where_ + ": header at offset 0: bad magic (not a Tandem checkpoint)");
    throw Error(ErrorKind::kCorruption, where_ + ": file is " + std::to_string(size) +
                                            " bytes, shorter than header + footer (" +
                                            std::to_string(kHeaderSize + kFooterSize) +
                                            "): truncated");
  }
  unsigned char h[kHeaderSize];
  ReadExact(0, kHeaderSize, h, "header");
  info_.version = DecodeHeader(h, where_);
  unsigned char fb[kFooterSize];
  ReadExact(size - kFooterSize, kFooterSize, fb, "footer");
  const Footer f = DecodeFooter(fb, info_.version, where_);
  if (f.file_length != size)
    throw Error(ErrorKind::kCorruption,
                where_ + ": file is " + std::to_string(size) + " bytes, the footer says " +
                    std::to_string(f.file_length) + " (truncated or extended)");
  const uint64_t manifest_end = size - kFooterSize;
  if (f.manifest_length > kMaxManifestBytes || f.manifest_offset < kHeaderSize ||
      f.manifest_offset > manifest_end || f.manifest_length != manifest_end - f.manifest_offset)
    throw Error(ErrorKind::kCorruption,
                where_ + ": footer places the manifest at [" + std::to_string(f.manifest_offset) +
                    ", +" + std::to_string(f.manifest_length) + "), which does not end at the footer (" +
                    std::to_string(manifest_end) + ")");
  std::string text(f.manifest_length, '\0');
  ReadExact(f.manifest_offset, text.size(), text.data(), "manifest");
  const uint32_t crc = SectionCrc(SectionKind::kManifest, kNoTensor, Codec::kNone, text.size(),
                                  text.data(), text.size());
  if (crc != f.manifest_crc)
    throw Error(ErrorKind::kCorruption,
                where_ + ": manifest at offset " + std::to_string(f.manifest_offset) +
                    ": CRC mismatch (stored " + Hex(f.manifest_crc) + ", computed " + Hex(crc) +
                    ")");
  DecodeManifest(text, info_.version, f.manifest_offset, where_, &info_);
  // The padding before the manifest must be zero.
  const uint64_t last_end =
      info_.sections.empty() ? kHeaderSize
                             : info_.sections.back().offset + info_.sections.back().length;
  unsigned char pad[kAlignment];
  ReadExact(last_end, f.manifest_offset - last_end, pad, "padding before the manifest");
  for (uint64_t k = 0; k < f.manifest_offset - last_end; ++k)
    if (pad[k] != 0)
      throw Error(ErrorKind::kCorruption, where_ + ": padding byte at offset " +
                                              std::to_string(last_end + k) + " is not zero");
}

void CheckpointReader::ReadExact(uint64_t offset, size_t n, void* dest,
                                 const std::string& what) const {
  const size_t got = file_->Read(offset, n, dest);
  if (got != n)
    throw Error(ErrorKind::kCorruption, where_ + ": " + what + ": read " + std::to_string(got) +
                                            " of " + std::to_string(n) + " bytes at offset " +
                                            std::to_string(offset) + " (file truncated)");
}

std::string CheckpointReader::SectionWhere(size_t i) const {
  const CheckpointSection& s = info_.sections[i];
  return where_ + ": section " + std::to_string(i) + " (tensor '" +
         info_.tensors[s.tensor].name + "' #" + std::to_string(s.tensor) + ", " + s.kind_name +
         ", offset " + std::to_string(s.offset) + ", length " + std::to_string(s.length) + ")";
}

void CheckpointReader::ReadSection(size_t i, void* dest) const {
  const CheckpointSection& s = info_.sections[i];
  const std::string w = SectionWhere(i);
  const uint64_t prev_end =
      i == 0 ? kHeaderSize : info_.sections[i - 1].offset + info_.sections[i - 1].length;
  unsigned char pad[kAlignment];
  ReadExact(prev_end, s.offset - prev_end, pad, "padding");
  for (uint64_t k = 0; k < s.offset - prev_end; ++k)
    if (pad[k] != 0)
      throw Error(ErrorKind::kCorruption,
                  w + ": padding byte before it at offset " + std::to_string(prev_end + k) +
                      " is not zero");
  const auto kind = static_cast<SectionKind>(s.kind);
  const bool deflated = s.compression == "deflate";
  const Codec codec = deflated ? Codec::kDeflate : Codec::kNone;
  uint32_t crc = SectionCrc(kind, s.tensor, codec, s.raw_length, nullptr, 0);
  std::vector<unsigned char> stored;
  std::vector<unsigned char> scratch;
  unsigned char* out;
  if (deflated) {
    stored.resize(s.length);
    out = stored.data();
  } else if (dest != nullptr) {
    out = static_cast<unsigned char*>(dest);
  } else {
    scratch.resize(std::min<uint64_t>(kPiece, s.length));
    out = nullptr;
  }
  for (uint64_t done = 0; done < s.length;) {
    const size_t k = std::min<uint64_t>(kPiece, s.length - done);
    unsigned char* p = out != nullptr ? out + done : scratch.data();
    ReadExact(s.offset + done, k, p, "section " + std::to_string(i));
    crc = Crc32c(p, k, crc);
    done += k;
  }
  if (crc != s.crc32c)
    throw Error(ErrorKind::kCorruption, w + ": CRC mismatch (stored " + Hex(s.crc32c) +
                                            ", computed " + Hex(crc) + ")");
  if (deflated) {
    std::vector<unsigned char> sink;
    if (dest == nullptr) sink.resize(s.raw_length);
    Inflate(stored.data(), stored.size(), dest != nullptr ? dest : sink.data(), s.raw_length, w);
  }
}

}  // namespace tandem::ckpt
