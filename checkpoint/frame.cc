#include "checkpoint/frame.h"

#include <cstdio>
#include <cstring>

#include "checkpoint/crc.h"
#include "tandem/error.h"

namespace tandem::ckpt {
namespace {

template <typename T>
void Put(unsigned char* p, T v) {
  memcpy(p, &v, sizeof v);
}
template <typename T>
T Get(const unsigned char* p) {
  T v;
  memcpy(&v, p, sizeof v);
  return v;
}

std::string Hex(uint32_t v) {
  char buf[16];
  snprintf(buf, sizeof buf, "0x%08x", v);
  return buf;
}

[[noreturn]] void Bad(const std::string& where, const std::string& what) {
  throw Error(ErrorKind::kCorruption, where + ": " + what);
}

}  // namespace

std::array<unsigned char, kHeaderSize> EncodeHeader() {
  std::array<unsigned char, kHeaderSize> h{};
  memcpy(h.data(), kHeaderMagic, 8);
  Put<uint32_t>(h.data() + 8, kVersion);
  Put<uint32_t>(h.data() + 12, kHeaderSize);
  Put<uint32_t>(h.data() + 28, Crc32c(h.data(), 28));
  return h;
}

std::array<unsigned char, kFooterSize> EncodeFooter(const Footer& f) {
  std::array<unsigned char, kFooterSize> b{};
  Put(b.data() + 0, f.manifest_offset);
  Put(b.data() + 8, f.manifest_length);
  Put(b.data() + 16, f.manifest_crc);
  Put(b.data() + 20, f.version);
  Put(b.data() + 24, f.file_length);
  memcpy(b.data() + 32, kFooterMagic, 8);
  Put<uint32_t>(b.data() + 44, Crc32c(b.data(), 44));
  return b;
}

uint32_t DecodeHeader(const unsigned char* p, const std::string& where) {
  if (memcmp(p, kHeaderMagic, 8) != 0)
    Bad(where, "header at offset 0: bad magic (not a Tandem checkpoint)");
  const uint32_t version = Get<uint32_t>(p + 8);
  if (version < kOldestReadableVersion || version > kVersion)
    Bad(where, "header at offset 0: unsupported format version " + std::to_string(version) +
                   " (this build reads versions " + std::to_string(kOldestReadableVersion) +
                   " to " + std::to_string(kVersion) + ")");
  const uint32_t want = Get<uint32_t>(p + 28), got = Crc32c(p, 28);
  if (want != got)
    Bad(where, "header at offset 0: CRC mismatch (stored " + Hex(want) + ", computed " +
                   Hex(got) + ")");
  if (Get<uint32_t>(p + 12) != kHeaderSize)
    Bad(where, "header at offset 0: header size " + std::to_string(Get<uint32_t>(p + 12)));
  for (int i = 16; i < 28; ++i)
    if (p[i] != 0) Bad(where, "header at offset 0: reserved byte " + std::to_string(i) + " != 0");
  return version;
}

Footer DecodeFooter(const unsigned char* p, uint32_t header_version, const std::string& where) {
  if (memcmp(p + 32, kFooterMagic, 8) != 0)
    Bad(where, "footer: bad magic (file truncated, extended or not a Tandem checkpoint)");
  const uint32_t want = Get<uint32_t>(p + 44), got = Crc32c(p, 44);
  if (want != got)
    Bad(where, "footer: CRC mismatch (stored " + Hex(want) + ", computed " + Hex(got) + ")");
  if (Get<uint32_t>(p + 40) != 0) Bad(where, "footer: reserved field != 0");
  Footer f;
  f.manifest_offset = Get<uint64_t>(p + 0);
  f.manifest_length = Get<uint64_t>(p + 8);
  f.manifest_crc = Get<uint32_t>(p + 16);
  f.version = Get<uint32_t>(p + 20);
  f.file_length = Get<uint64_t>(p + 24);
  if (f.version != header_version)
    Bad(where, "footer: format version " + std::to_string(f.version) + " != header version " +
                   std::to_string(header_version));
  return f;
}

}  // namespace tandem::ckpt
