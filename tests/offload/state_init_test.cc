// The optimizer's initial state (Note [Block-wise initialisation],
// offload/memory/state_init.h): a fresh optimizer's snapshot holds, byte for byte,
// TensorState's encoding of the parameters for every master and moment format, parameter
// dtype, fraction and streamed share; the block encoder gives the same bits at any block
// size, staged or not, leaves an aliased master alone; progress lines appear only for
// long work.
#include <gtest/gtest.h>
#include <tbb/task_arena.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "engine/dtype_io.h"
#include "engine/state_arrays.h"
#include "engine/tensor_state.h"
#include "offload/memory/progress_log.h"
#include "offload/memory/state_init.h"
#include "tandem/error.h"
#include "tandem/optimizer.h"
#include "tests/offload/hybrid_fixture.h"
#include "tests/offload/state_init_expect.h"

namespace tandem {
namespace {

using testing::ExpectSameArrays;
using testing::Expected;
using testing::Model;

const MasterFormat kMasters[] = {MasterFormat::kF32, MasterFormat::kBF16,
                                 MasterFormat::kBF16Ecc8, MasterFormat::kBF16Ecc16};
const MomentFormat kMoments[] = {MomentFormat::kF32, MomentFormat::kQ8};

TEST(StateInit, FreshSnapshotIsTheEncodedParameters) {
  for (DType dtype : {DType::kBF16, DType::kF32})
    for (MasterFormat master : kMasters)
      for (MomentFormat mf : kMoments)
        for (double fraction : {0.0, 0.5, 1.0})
          for (double share : {0.0, 0.5, 1.0}) {
            Model m;
            m.param_dtype = dtype;
            m.Init(11);
            OptimizerConfig c = testing::QuantizedConfig(
                ExecutionMode::kHost, fraction, PlacementPolicy::kBackwardOrder, 96, 2);
            c.formats = {master, mf, mf == MomentFormat::kF32 ? MomentFormat::kQ8
                                                                : MomentFormat::kF32};
            c.offload_compute = share;
            c.stream_chunk_bytes = 4096;
            HybridOptimizer opt(m.Specs(2), c);
            const OptimizerSnapshot snap = opt.Snapshot();
            for (size_t t = 0; t < m.sizes.size(); ++t) {
              const std::string who = std::string(Name(dtype)) + " " + Name(c.formats) +
                                      " fraction " + std::to_string(fraction) + " share " +
                                      std::to_string(share) + " tensor " + std::to_string(t);
              ExpectSameArrays(snap.tensors[t],
                               Expected(c.algorithm, c.groups[t % 2], c.formats,
                                        m.params[t].data(), dtype, m.sizes[t]),
                               who);
            }
          }
}

TEST(StateInit, SgdWithAndWithoutMomentum) {
  for (double momentum : {0.0, 0.9}) {
    Model m;
    m.Init(5);
    OptimizerConfig c;
    c.algorithm = Algorithm::kSGD;
    c.mode = ExecutionMode::kHost;
    c.offload_fraction = 0.5;
    c.offload_compute = 0.5;
    c.stream_chunk_bytes = 4096;
    c.groups.resize(1);
    c.groups[0].momentum = momentum;
    c.formats = {MasterFormat::kBF16Ecc16, MomentFormat::kF32, MomentFormat::kF32};
    HybridOptimizer opt(m.Specs(1), c);
    const OptimizerSnapshot snap = opt.Snapshot();
    for (size_t t = 0; t < m.sizes.size(); ++t)
      ExpectSameArrays(snap.tensors[t],
                       Expected(c.algorithm, c.groups[0], c.formats, m.params[t].data(),
                                m.param_dtype, m.sizes[t]),
                       "sgd momentum " + std::to_string(momentum));
  }
}

// A TensorState-shaped destination for InitRegions: its arrays, as one region's span,
// filled with 0xAB bytes so that an entry left unwritten shows.
struct Dest {
  TensorState st;
  Dest(Algorithm algo, const HyperParams& h, const StateFormats& f, size_t n)
      : st(algo, h, f, std::vector<float>(n, 7.0f).data(), n) {
    ForEachStateVector(st, [](StateArray, auto& v) {
      if (!v.empty()) std::memset(v.data(), 0xAB, v.size() * sizeof(v[0]));
    });
  }
};

TEST(StateInit, BlocksStagedOrNotGiveTheSameBits) {
  const size_t n = 1000 + 17;
  for (MasterFormat master : kMasters)
    for (MomentFormat mf : kMoments)
      for (uint64_t block : {32ull, 64ull, 96ull, 1024ull, 1ull << 20})
        for (int mode : {0, 1, 2}) {  // not staged; staged; staged with zeroing in place
          const bool staged = mode > 0;
          const StateFormats f{master, mf, MomentFormat::kQ8};
          HyperParams h;
          std::vector<uint16_t> param(n);
          std::mt19937 rng(3);
          std::normal_distribution<float> nd;
          for (size_t i = 0; i < n; ++i) param[i] = num::F32ToBf16(nd(rng));
          // Two regions of one tensor: [0, 320) and [320, n).
          Dest a(Algorithm::kAdamW, h, f, 320), b(Algorithm::kAdamW, h, f, n - 320);
          std::vector<offload::InitRegion> regions;
          for (auto [d, off] : {std::pair{&a, size_t{0}}, std::pair{&b, size_t{320}}}) {
            offload::InitRegion r;
            r.param = param.data();
            r.param_dtype = DType::kBF16;
            r.offset = off;
            r.count = d->st.size();
            r.state = d->st.Span(0, d->st.size(), nullptr, DType::kF32);
            r.state.grad = nullptr;
            r.staged = staged;
            regions.push_back(r);
          }
          offload::InitIo io;
          io.copy = [](void* dst, const void* src, size_t bytes) { std::memcpy(dst, src, bytes); };
          std::atomic<int> zeroed{0};
          if (mode == 2)
            io.zero = [&zeroed](void* dst, size_t bytes) {
              std::memset(dst, 0, bytes);
              ++zeroed;
            };
          io.params_on_device = staged;
          io.block_elements = block;
          io.staging_slots = 2;
          tbb::task_arena(2).execute([&] { offload::InitRegions(regions, io); });
          const std::string who = Name(f) + " block " + std::to_string(block) +
                                  (staged ? " staged" : "") + (mode == 2 ? " zeroing" : "");
          if (mode == 2) {
            EXPECT_GT(zeroed.load(), 0) << who;
          }
          ExpectSameArrays(a.st, Expected(Algorithm::kAdamW, h, f, param.data(), DType::kBF16, 320),
                           who + " region 0");
          ExpectSameArrays(b.st,
                           Expected(Algorithm::kAdamW, h, f, param.data() + 320, DType::kBF16,
                                    n - 320),
                           who + " region 1");
        }
}

TEST(StateInit, AliasedMasterKeepsTheParameterBits) {
  const size_t n = 200;
  for (MasterFormat master : {MasterFormat::kBF16, MasterFormat::kBF16Ecc8,
                              MasterFormat::kBF16Ecc16})
    for (bool staged : {false, true}) {
      std::vector<uint16_t> param(n);
      for (size_t i = 0; i < n; ++i) param[i] = static_cast<uint16_t>(0x3F80 + i);
      param[5] = 0x7F81;  // a signalling NaN: re-encoding it through fp32 may change it
      param[6] = 0xFF80;  // -inf
      const std::vector<uint16_t> before = param;
      const StateFormats f{master, MomentFormat::kQ8, MomentFormat::kQ8};
      Dest d(Algorithm::kAdamW, HyperParams{}, f, n);
      offload::InitRegion r;
      r.param = param.data();
      r.param_dtype = DType::kBF16;
      r.count = n;
      r.state = d.st.Span(0, n, nullptr, DType::kF32);
      r.state.master.bf16 = param.data();  // the parameter is the master's bf16 array
      r.alias_param = true;
      r.staged = staged;
      offload::InitIo io;
      io.copy = [](void* dst, const void* src, size_t bytes) { std::memcpy(dst, src, bytes); };
      io.block_elements = 64;
      tbb::task_arena(2).execute([&] { offload::InitRegions({r}, io); });
      EXPECT_EQ(param, before) << Name(f);
      const TensorState want =
          Expected(Algorithm::kAdamW, HyperParams{}, f, before.data(), DType::kBF16, n);
      EXPECT_EQ(d.st.ecc8, want.ecc8) << Name(f);
      EXPECT_EQ(d.st.ecc16, want.ecc16) << Name(f);
      EXPECT_EQ(d.st.v_scales, want.v_scales) << Name(f);
    }
}

TEST(StateInit, RefusesBadBlocksAndOffsets) {
  std::vector<uint16_t> param(64);
  Dest d(Algorithm::kAdamW, HyperParams{}, {MasterFormat::kBF16, MomentFormat::kQ8, MomentFormat::kQ8}, 64);
  offload::InitRegion r;
  r.param = param.data();
  r.param_dtype = DType::kBF16;
  r.count = 64;
  r.state = d.st.Span(0, 64, nullptr, DType::kF32);
  offload::InitIo io;
  io.block_elements = 48;
  try {
    offload::InitRegions({r}, io);
    ADD_FAILURE() << "block of 48 accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kInvalidArgument);
    EXPECT_NE(std::string(e.what()).find("block_elements"), std::string::npos) << e.what();
  }
  io.block_elements = 64;
  r.offset = 16;
  try {
    offload::InitRegions({r}, io);
    ADD_FAILURE() << "offset 16 accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("element 16"), std::string::npos) << e.what();
  }
}

std::string ReadAll(std::FILE* f) {
  std::rewind(f);
  std::string s;
  char buf[512];
  while (std::fgets(buf, sizeof buf, f)) s += buf;
  return s;
}

TEST(StateInit, ProgressLinesOnlyForLongWork) {
  {  // fast work: nothing
    std::FILE* f = std::tmpfile();
    offload::ProgressLog log("initialising optimizer state", 1000, 3.0, 3.0, f);
    log.Add(500);
    log.Add(500);
    log.Finish();
    EXPECT_EQ(ReadAll(f), "");
    std::fclose(f);
  }
  {  // "long" work (no quiet time, no period): a line per Add and a final line
    std::FILE* f = std::tmpfile();
    offload::ProgressLog log("initialising optimizer state", 3'200'000'000ull, 0.0, 0.0, f);
    log.Add(1'000'000'000ull);
    log.Add(2'200'000'000ull);
    log.Finish();
    const std::string out = ReadAll(f);
    EXPECT_NE(out.find("tandem: initialising optimizer state: 31% (1.0 G of 3.2 G elements), "),
              std::string::npos)
        << out;
    EXPECT_NE(out.find("100% (3.2 G of 3.2 G elements)"), std::string::npos) << out;
    EXPECT_NE(out.find("tandem: initialising optimizer state: done, 3.2 G elements, "),
              std::string::npos)
        << out;
    EXPECT_EQ(log.lines(), 3);
    std::fclose(f);
  }
  {  // a period longer than the work: the first line only, then the total
    std::FILE* f = std::tmpfile();
    offload::ProgressLog log("x", 100, 0.0, 1000.0, f);
    for (int i = 0; i < 10; ++i) log.Add(10);
    log.Finish();
    EXPECT_EQ(log.lines(), 2) << ReadAll(f);
    std::fclose(f);
  }
  {  // counted from an earlier start (the construction's): past the quiet time at once
    std::FILE* f = std::tmpfile();
    offload::ProgressLog log("x", 100, 3.0, 1000.0, f,
                             std::chrono::steady_clock::now() - std::chrono::seconds(10));
    log.Add(50);
    log.Finish();
    const std::string out = ReadAll(f);
    EXPECT_NE(out.find("tandem: x: 50% (50 of 100 elements), 10."), std::string::npos) << out;
    EXPECT_EQ(log.lines(), 2) << out;
    std::fclose(f);
  }
  EXPECT_EQ(offload::CountText(999), "999");
  EXPECT_EQ(offload::CountText(41'000'000), "41.0 M");
}

}  // namespace
}  // namespace tandem
