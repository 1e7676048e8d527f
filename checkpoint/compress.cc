#include "checkpoint/compress.h"

#include <isa-l/igzip_lib.h>

#include <algorithm>
#include <memory>

#include "tandem/error.h"

namespace tandem::ckpt {
namespace {
// igzip counts in uint32_t; feed it at most this much at a time.
constexpr size_t kPiece = size_t{1} << 30;
}  // namespace

bool DeflateLevel1(const void* data, size_t n, size_t max_out, std::vector<uint8_t>* out) {
  out->resize(max_out);
  std::vector<uint8_t> level_buf(ISAL_DEF_LVL1_DEFAULT);
  auto zs = std::make_unique<isal_zstream>();
  isal_deflate_init(zs.get());
  zs->level = 1;
  zs->level_buf = level_buf.data();
  zs->level_buf_size = static_cast<uint32_t>(level_buf.size());
  zs->gzip_flag = IGZIP_DEFLATE;  // raw deflate
  auto* in = static_cast<uint8_t*>(const_cast<void*>(data));
  size_t in_left = n, out_used = 0;
  while (true) {
    if (zs->avail_in == 0 && in_left > 0) {
      const size_t k = std::min(in_left, kPiece);
      zs->next_in = in;
      zs->avail_in = static_cast<uint32_t>(k);
      in += k;
      in_left -= k;
    }
    zs->end_of_stream = in_left == 0 ? 1 : 0;
    if (out_used >= max_out) return false;
    const size_t room = std::min(max_out - out_used, kPiece);
    zs->next_out = out->data() + out_used;
    zs->avail_out = static_cast<uint32_t>(room);
    const int rc = isal_deflate(zs.get());
    if (rc != COMP_OK)
      throw Error(ErrorKind::kInternal, "igzip deflate failed with code " + std::to_string(rc));
    out_used += room - zs->avail_out;
    if (zs->internal_state.state == ZSTATE_END) break;
    if (zs->avail_out != 0 && zs->avail_in != 0)
      throw Error(ErrorKind::kInternal, "igzip deflate made no progress");
  }
  out->resize(out_used);
  return true;
}

void Inflate(const void* src, size_t n, void* out, size_t raw_length, const std::string& where) {
  auto st = std::make_unique<inflate_state>();
  isal_inflate_init(st.get());
  st->crc_flag = ISAL_DEFLATE;
  auto* in = static_cast<uint8_t*>(const_cast<void*>(src));
  auto* dst = static_cast<uint8_t*>(out);
  size_t in_left = n, out_done = 0;
  while (st->block_state != ISAL_BLOCK_FINISH) {
    if (st->avail_in == 0 && in_left > 0) {
      const size_t k = std::min(in_left, kPiece);
      st->next_in = in;
      st->avail_in = static_cast<uint32_t>(k);
      in += k;
      in_left -= k;
    }
    // One spare byte beyond raw_length would be an overflow; we detect it via total_out.
    const size_t room = std::min(raw_length - out_done, kPiece);
    st->next_out = dst + out_done;
    st->avail_out = static_cast<uint32_t>(room);
    const uint32_t avail_in_before = st->avail_in;
    const int rc = isal_inflate(st.get());
    if (rc != ISAL_DECOMP_OK && rc != ISAL_END_INPUT)
      throw Error(ErrorKind::kCorruption, where + ": invalid deflate stream (igzip code " +
                                              std::to_string(rc) + ")");
    const size_t produced = room - st->avail_out;
    out_done += produced;
    if (st->block_state == ISAL_BLOCK_FINISH) break;
    if (produced == 0 && st->avail_in == avail_in_before) {
      if (out_done == raw_length && (st->avail_in > 0 || in_left > 0))
        throw Error(ErrorKind::kCorruption,
                    where + ": deflate stream inflates to more than " +
                        std::to_string(raw_length) + " bytes");
      throw Error(ErrorKind::kCorruption,
                  where + ": deflate stream ends early after " + std::to_string(out_done) +
                      " of " + std::to_string(raw_length) + " bytes");
    }
  }
  if (out_done != raw_length)
    throw Error(ErrorKind::kCorruption, where + ": deflate stream gives " +
                                            std::to_string(out_done) + " bytes, expected " +
                                            std::to_string(raw_length));
  // Bytes igzip pulled into its bit buffer but did not use count as left over too.
  const uint64_t unused = st->avail_in + in_left + static_cast<uint64_t>(st->read_in_length) / 8;
  if (unused != 0)
    throw Error(ErrorKind::kCorruption, where + ": " + std::to_string(unused) +
                                            " bytes after the end of the deflate stream");
}

}  // namespace tandem::ckpt
