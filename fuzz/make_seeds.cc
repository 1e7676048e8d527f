// Writes the seed corpus of checkpoint_load_fuzzer (fuzz/corpus/checkpoint_load/):
// small valid checkpoints of several algorithms and formats, plain and compressed, with
// shapes, per-tensor steps and metadata, named after the format version that wrote them
// (NAME_v2; the seeds without a suffix are version 1 files, kept for the old reader path).
//   make_seeds OUT_DIR
#include <cstdio>
#include <string>

#include "checkpoint/format.h"
#include "tandem/checkpoint.h"

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: make_seeds OUT_DIR\n");
    return 2;
  }
  using namespace tandem;
  struct Seed {
    const char* name;
    Algorithm algo;
    StateFormats f;
    CheckpointCompression c;
  };
  const Seed seeds[] = {
      {"adamw_f32", Algorithm::kAdamW, {}, CheckpointCompression::kNone},
      {"adamw_ecc8_q8", Algorithm::kAdamW, {MasterFormat::kBF16Ecc8, MomentFormat::kQ8, MomentFormat::kQ8}, CheckpointCompression::kNone},
      {"adamw_ecc8_q8_deflate", Algorithm::kAdamW, {MasterFormat::kBF16Ecc8, MomentFormat::kQ8, MomentFormat::kQ8}, CheckpointCompression::kAll},
      {"lion_bf16_q8", Algorithm::kLion, {MasterFormat::kBF16, MomentFormat::kQ8, MomentFormat::kF32}, CheckpointCompression::kNone},
      {"sgd_ecc16", Algorithm::kSGD, {MasterFormat::kBF16Ecc16, MomentFormat::kF32, MomentFormat::kF32}, CheckpointCompression::kAuto},
  };
  for (const Seed& sd : seeds) {
    OptimizerSnapshot s;
    s.algo = sd.algo;
    s.formats = sd.f;
    HyperParams g0, g1;
    g0.momentum = 0.9;
    s.groups = {g0, g1};
    s.step = 42;
    s.metadata = R"({"param_groups": [{"lr": 0.001, "params": [0, 1, 2]}]})";
    const uint64_t sizes[] = {3, 33, 0};
    for (int i = 0; i < 3; ++i) {
      TensorSnapshot t;
      t.name = "w" + std::to_string(i);
      t.formats = sd.f;
      t.numel = sizes[i];
      t.group = i % 2;
      t.step = 40 + i;
      if (i == 1) t.shape = {3, 11};
      const size_t n = t.numel, groups = (n + 31) / 32;
      const bool bf = sd.f.master != MasterFormat::kF32;
      const bool hm = HasMomentum(s.algo, s.groups[t.group]), hv = HasVariance(s.algo);
      const bool mq = sd.f.momentum == MomentFormat::kQ8, vq = sd.f.variance == MomentFormat::kQ8;
      t.master_f32.assign(bf ? 0 : n, 0.5f);
      t.master_bf16.assign(bf ? n : 0, 0x3F00);
      t.ecc8.assign(sd.f.master == MasterFormat::kBF16Ecc8 ? n : 0, 1);
      t.ecc16.assign(sd.f.master == MasterFormat::kBF16Ecc16 ? n : 0, -3);
      t.m_f32.assign(hm && !mq ? n : 0, 0.25f);
      t.m_codes.assign(hm && mq ? n : 0, 7);
      t.m_scales.assign(hm && mq ? groups : 0, 0x3F80);
      t.v_f32.assign(hv && !vq ? n : 0, 0.125f);
      t.v_codes.assign(hv && vq ? n : 0, 9);
      t.v_scales.assign(hv && vq ? groups : 0, 0x3F80);
      s.tensors.push_back(t);
    }
    CheckpointOptions o;
    o.compression = sd.c;
    o.sync = false;
    SaveCheckpoint(s, std::string(argv[1]) + "/" + sd.name + "_v" + std::to_string(ckpt::kVersion), o);
  }
  return 0;
}
