// LoadCheckpoint, VerifyCheckpoint and InspectCheckpoint on top of CheckpointReader.
//
// Load and Verify run the same checks through ReadState: the reader's checks of header,
// footer and manifest, then ValidateSnapshotLayout on the manifest's tensors, then for
// each tensor its sections (padding, CRC, inflation), ValidateTensorState and
// ValidateRestorableTensor on its arrays: every value decodes to a finite fp32, as a
// step (and tandem-ckpt to-torch) decodes it. The step bound of ValidateRestorable is
// HybridOptimizer::Restore's alone, so tools still read a file at a step in (2^52, 2^53]. Load stops at the first failure; Verify lists them all, holding one tensor's
// arrays at a time.
#include <string>
#include <vector>

#include "checkpoint/reader.h"
#include "checkpoint/sections.h"
#include "engine/snapshot_check.h"
#include "tandem/checkpoint.h"
#include "tandem/error.h"

namespace tandem {
namespace {

// Where failures go: thrown (problems == nullptr) or listed.
class Problems {
 public:
  explicit Problems(std::vector<std::string>* list) : list_(list) {}
  // Runs f(); a kCorruption error it throws, or a kInvalidArgument one from the snapshot
  // checks (reported as "inconsistent state"), is thrown again as kCorruption or listed.
  // Returns whether f() succeeded.
  template <typename F>
  bool Run(const std::string& where, F&& f) {
    try {
      f();
      return true;
    } catch (const Error& e) {
      if (e.kind() == ErrorKind::kIO) throw;
      if (e.kind() == ErrorKind::kCorruption && list_ == nullptr) throw;
      const std::string msg = e.kind() == ErrorKind::kInvalidArgument
                                  ? where + ": inconsistent state: " + e.message()
                                  : e.message();
      if (list_ == nullptr) throw Error(ErrorKind::kCorruption, msg);
      list_->push_back(Error(ErrorKind::kCorruption, msg).what());
      return false;
    }
  }

 private:
  std::vector<std::string>* list_;
};

struct ReadStats {
  uint64_t sections = 0;
  uint64_t bytes = 0;
};

// Reads and checks the whole state of reader's file. With out != nullptr the snapshot is
// assembled there; otherwise each tensor's arrays are dropped after their checks.
void ReadState(const ckpt::CheckpointReader& reader, OptimizerSnapshot* out,
               std::vector<std::string>* problem_list, ReadStats* stats) {
  const CheckpointInfo& info = reader.info();
  Problems problems(problem_list);
  OptimizerSnapshot s;
  s.algo = info.algo;
  s.formats = info.formats;
  s.groups = info.groups;
  s.step = info.step;
  s.metadata = info.metadata;
  s.tensors = info.tensors;
  problems.Run(reader.where(), [&] { ValidateSnapshotLayout(s); });
  // The manifest lists sections by tensor, in tensor order (ExpectedSections).
  size_t i = 0;
  for (size_t ti = 0; ti < s.tensors.size(); ++ti) {
    TensorSnapshot& t = s.tensors[ti];
    bool intact = true;
    for (; i < info.sections.size() && info.sections[i].tensor == ti; ++i) {
      const CheckpointSection& sec = info.sections[i];
      void* dest = ckpt::ResizeArray(&t, static_cast<ckpt::SectionKind>(sec.kind), sec.raw_length);
      intact &= problems.Run(reader.where(), [&] { reader.ReadSection(i, dest); });
      ++stats->sections;
      stats->bytes += sec.length;
    }
    // Values of a damaged section are noise: its CRC failure is the one to report.
    if (intact)
      problems.Run(reader.where(), [&] {
        ValidateTensorState(s, t);
        ValidateRestorableTensor(s, t);
      });
    if (out == nullptr) t = info.tensors[ti];  // frees the arrays
  }
  if (out != nullptr) *out = std::move(s);
}

}  // namespace

OptimizerSnapshot LoadCheckpoint(const std::string& path, Env* env) {
  if (env == nullptr) env = Env::Default();
  const ckpt::CheckpointReader reader(path, env);
  OptimizerSnapshot s;
  ReadStats stats;
  ReadState(reader, &s, nullptr, &stats);
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
  ReadStats stats;
  ReadState(*reader, nullptr, &r.problems, &stats);
  r.sections_checked = stats.sections;
  r.bytes_checked = stats.bytes;
  r.ok = r.problems.empty();
  return r;
}

}  // namespace tandem
