// SaveCheckpoint: stream header, sections, manifest and footer to path.tmp, then rename.
#include <algorithm>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "checkpoint/atomic_file.h"
#include "checkpoint/compress.h"
#include "checkpoint/crc.h"
#include "checkpoint/frame.h"
#include "checkpoint/manifest.h"
#include "checkpoint/sections.h"
#include "checkpoint/tensor_description.h"
#include "tandem/checkpoint.h"
#include "tandem/error.h"

namespace tandem {
namespace {

using ckpt::SectionKind;

// Data is CRC'd and written in pieces of this size so each piece is still in cache when
// written.
constexpr size_t kPiece = size_t{4} << 20;

class Writer {
 public:
  explicit Writer(WritableFile* file) : file_(file) {}
  uint64_t offset() const { return offset_; }
  void Append(const void* p, size_t n) {
    file_->Append(p, n);
    offset_ += n;
  }
  void PadTo(uint64_t target) {
    static const char kZeros[ckpt::kAlignment] = {};
    Append(kZeros, target - offset_);
  }

 private:
  WritableFile* file_;
  uint64_t offset_ = 0;
};

bool ShouldTry(CheckpointCompression c, SectionKind k) {
  return c == CheckpointCompression::kAll ||
         (c == CheckpointCompression::kAuto && ckpt::KindCompressesWell(k));
}

// Writes one section's payload at the writer's (aligned) offset and fills s's stored
// fields.
void WriteSection(Writer* w, const ckpt::ArrayView& a, SectionKind kind,
                  CheckpointCompression compression, CheckpointSection* s) {
  s->offset = w->offset();
  if (ShouldTry(compression, kind)) {
    std::vector<uint8_t> z;
    // Keep it only if it saves at least 1/8 (docs/checkpoint_format.md, "Compression").
    if (a.bytes >= 8 && ckpt::DeflateLevel1(a.data, a.bytes, a.bytes - a.bytes / 8 - 1, &z)) {
      s->compression = "deflate";
      s->length = z.size();
      s->crc32c = ckpt::SectionCrc(kind, s->tensor, ckpt::Codec::kDeflate, a.bytes, z.data(),
                                   z.size());
      w->Append(z.data(), z.size());
      return;
    }
  }
  s->compression = "none";
  s->length = a.bytes;
  uint32_t crc = ckpt::SectionCrc(kind, s->tensor, ckpt::Codec::kNone, a.bytes, nullptr, 0);
  auto* p = static_cast<const unsigned char*>(a.data);
  for (size_t done = 0; done < a.bytes;) {
    const size_t k = std::min(kPiece, a.bytes - done);
    crc = ckpt::Crc32c(p + done, k, crc);
    w->Append(p + done, k);
    done += k;
  }
  s->crc32c = crc;
}

void WriteFile(const OptimizerSnapshot& snap, CheckpointInfo* info,
               CheckpointCompression compression, WritableFile* file) {
  Writer w(file);
  const auto header = ckpt::EncodeHeader();
  w.Append(header.data(), header.size());
  for (CheckpointSection& s : info->sections) {
    w.PadTo(ckpt::AlignUp(w.offset()));
    const auto kind = static_cast<SectionKind>(s.kind);
    WriteSection(&w, ckpt::ViewOf(snap.tensors[s.tensor], kind), kind, compression, &s);
  }
  w.PadTo(ckpt::AlignUp(w.offset()));
  ckpt::Footer f;
  f.manifest_offset = w.offset();
  const std::string manifest = ckpt::EncodeManifest(*info);
  f.manifest_length = manifest.size();
  f.manifest_crc = ckpt::SectionCrc(SectionKind::kManifest, ckpt::kNoTensor, ckpt::Codec::kNone,
                                    manifest.size(), manifest.data(), manifest.size());
  w.Append(manifest.data(), manifest.size());
  f.file_length = w.offset() + ckpt::kFooterSize;
  const auto footer = ckpt::EncodeFooter(f);
  w.Append(footer.data(), footer.size());
}

}  // namespace

void SaveCheckpoint(const OptimizerSnapshot& snapshot, const std::string& path,
                    const CheckpointOptions& options, Env* env) {
  if (env == nullptr) env = Env::Default();
  ValidateSnapshot(snapshot);
  CheckpointInfo info;
  info.algo = snapshot.algo;
  info.formats = snapshot.formats;
  info.groups = snapshot.groups;
  info.step = snapshot.step;
  info.metadata = snapshot.metadata;
  info.tensors.reserve(snapshot.tensors.size());
  for (const TensorSnapshot& t : snapshot.tensors)
    info.tensors.push_back(ckpt::TensorDescription(t));
  // Fail before writing anything on text JSON cannot hold.
  try {
    (void)nlohmann::json(snapshot.metadata).dump();
  } catch (const nlohmann::json::exception& e) {
    throw Error(ErrorKind::kInvalidArgument,
                "checkpoint '" + path + "': the metadata is not valid UTF-8: " + e.what());
  }
  try {
    (void)ckpt::EncodeManifest(info);
  } catch (const nlohmann::json::exception& e) {
    throw Error(ErrorKind::kInvalidArgument,
                "checkpoint '" + path + "': a tensor name is not valid UTF-8: " + e.what());
  }
  info.sections = ckpt::ExpectedSections(info);

  ckpt::WriteFileAtomically(env, path, options.sync, [&](WritableFile* file) {
    WriteFile(snapshot, &info, options.compression, file);
  });
}

}  // namespace tandem
