// LoadCheckpoint, VerifyCheckpoint and InspectCheckpoint on top of CheckpointReader.
#include "checkpoint/reader.h"
#include "checkpoint/sections.h"
#include "tandem/checkpoint.h"
#include "tandem/error.h"

namespace tandem {

OptimizerSnapshot LoadCheckpoint(const std::string& path, Env* env) {
  if (env == nullptr) env = Env::Default();
  const ckpt::CheckpointReader reader(path, env);
  const CheckpointInfo& info = reader.info();
  OptimizerSnapshot s;
  s.algo = info.algo;
  s.formats = info.formats;
  s.groups = info.groups;
  s.step = info.step;
  s.tensors = info.tensors;
  for (size_t i = 0; i < info.sections.size(); ++i) {
    const CheckpointSection& sec = info.sections[i];
    void* dest = ckpt::ResizeArray(&s.tensors[sec.tensor],
                                   static_cast<ckpt::SectionKind>(sec.kind), sec.raw_length);
    reader.ReadSection(i, dest);
  }
  try {
    ValidateSnapshot(s);  // the manifest checks imply this; kept as a second line
  } catch (const Error& e) {
    throw Error(ErrorKind::kCorruption, reader.where() + ": inconsistent state: " + e.what());
  }
  return s;
}

CheckpointInfo InspectCheckpoint(const std::string& path, Env* env) {
  if (env == nullptr) env = Env::Default();
  return ckpt::CheckpointReader(path, env).info();
}

VerifyReport VerifyCheckpoint(const std::string& path, Env* env) {
  if (env == nullptr) env = Env::Default();
  VerifyReport r;
  std::unique_ptr<ckpt::CheckpointReader> reader;
  try {
    reader = std::make_unique<ckpt::CheckpointReader>(path, env);
  } catch (const Error& e) {
    if (e.kind() != ErrorKind::kCorruption) throw;
    r.problems.push_back(e.what());
    return r;
  }
  r.info = reader->info();
  for (size_t i = 0; i < r.info.sections.size(); ++i) {
    try {
      reader->ReadSection(i, nullptr);
    } catch (const Error& e) {
      if (e.kind() != ErrorKind::kCorruption) throw;
      r.problems.push_back(e.what());
    }
    ++r.sections_checked;
    r.bytes_checked += r.info.sections[i].length;
  }
  r.ok = r.problems.empty();
  return r;
}

}  // namespace tandem
