// The compute-split model (tandem/compute_split.h) and the streamed part of the placement.
#include "tandem/compute_split.h"

#include <gtest/gtest.h>

#include "tandem/error.h"
#include "tandem/placement.h"
#include "tandem/types.h"

namespace tandem {
namespace {

MachineRates H200Like() { return {50.0, 50.0, 6.0, 270.0}; }

ComputeSplitInput Llama8BHalf() {
  ComputeSplitInput in;
  in.hot = 4'000'000'000;
  in.offloaded = 4'000'000'000;
  in.stream_bytes = 3.125;
  in.grad_bytes = 2;
  in.param_bytes = 2;
  return in;
}

TEST(ComputeSplit, PredictsEachTerm) {
  const ComputeSplit s = PredictSplit(Llama8BHalf(), H200Like(), 0.0);
  EXPECT_DOUBLE_EQ(s.down_ms, 4e9 * 2 / 50e9 * 1e3);
  EXPECT_DOUBLE_EQ(s.host_ms, 4e9 / 6e9 * 1e3);
  EXPECT_DOUBLE_EQ(s.gpu_ms, 4e9 / 270e9 * 1e3);
  EXPECT_DOUBLE_EQ(s.stream_ms, 0.0);
  EXPECT_DOUBLE_EQ(s.step_ms, s.host_ms);
  EXPECT_STREQ(s.bound(), "host");
  const ComputeSplit g = PredictSplit(Llama8BHalf(), H200Like(), 1.0);
  EXPECT_DOUBLE_EQ(g.host_ms, 0.0);
  EXPECT_DOUBLE_EQ(g.up_ms, 4e9 * 3.125 / 50e9 * 1e3);
  EXPECT_DOUBLE_EQ(g.step_ms, g.stream_ms);
  EXPECT_STREQ(g.bound(), "stream");
  // Between: the two classes one after the other.
  const ComputeSplit h = PredictSplit(Llama8BHalf(), H200Like(), 0.25);
  EXPECT_DOUBLE_EQ(h.stream_ms, 1e9 * 3.125 / 50e9 * 1e3);
  EXPECT_DOUBLE_EQ(h.host_path_ms, 3e9 / 6e9 * 1e3);
  EXPECT_DOUBLE_EQ(h.step_ms, h.stream_ms + h.host_path_ms);
  EXPECT_STREQ(h.bound(), "stream+host");
}

TEST(ComputeSplit, StreamsWhenTheLinkBeatsTheHost) {
  const ComputeSplitInput in = Llama8BHalf();
  // 3.125 bytes at 50 GB/s (62.5 ps) against 1/6 ns per element on the host.
  const ComputeSplit best = ChooseSplit(in, H200Like());
  EXPECT_EQ(best.share, 1.0);
  // A slow GPU kernel pulls the share back until the kernel and the link balance.
  MachineRates slow_gpu = H200Like();
  slow_gpu.gpu_gparams = 10;
  const ComputeSplit b = ChooseSplit(in, slow_gpu);
  EXPECT_GT(b.share, 0.0);
  EXPECT_LT(b.share, 1.0);
  for (int i = 0; i <= 1000; ++i)
    EXPECT_GE(PredictSplit(in, slow_gpu, i / 1000.0).step_ms, b.step_ms * (1 - 1e-9));
}

TEST(ComputeSplit, FastHostKeepsEverythingOnTheHost) {
  MachineRates r = H200Like();
  r.host_gparams = 1000;
  EXPECT_EQ(ChooseSplit(Llama8BHalf(), r).share, 0.0);
  ComputeSplitInput none = Llama8BHalf();
  none.offloaded = 0;
  EXPECT_EQ(ChooseSplit(none, H200Like()).share, 0.0);
}

TEST(ComputeSplit, RejectsBadRatesAndShares) {
  MachineRates r = H200Like();
  r.d2h_gbps = 0;
  EXPECT_THROW(PredictSplit(Llama8BHalf(), r, 0.5), Error);
  EXPECT_THROW(PredictSplit(Llama8BHalf(), H200Like(), 1.5), Error);
}

TEST(ComputeSplit, ParsesOffloadCompute) {
  EXPECT_EQ(ParseOffloadCompute("auto"), kOffloadComputeAuto);
  EXPECT_EQ(ParseOffloadCompute("host"), 0.0);
  EXPECT_EQ(ParseOffloadCompute("gpu"), 1.0);
  EXPECT_EQ(ParseOffloadCompute("0.25"), 0.25);
  for (const char* bad : {"", "fast", "1.5", "-0.1", "0.5x"}) {
    try {
      ParseOffloadCompute(bad);
      ADD_FAILURE() << bad;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(bad), std::string::npos) << e.what();
    }
  }
  EXPECT_EQ(OffloadComputeName(kOffloadComputeAuto), "auto");
  EXPECT_EQ(OffloadComputeName(0.25), "0.25");
}

TEST(StreamPlacement, StreamsTheFirstHostResidentElements) {
  const std::vector<uint64_t> numels = {1000, 4096, 4096, 100};
  for (double share : {0.0, 0.3, 0.5, 0.77, 1.0}) {
    const Placement p = ComputePlacement(numels, 0.8, PlacementPolicy::kBackwardOrder, share);
    uint64_t streamed = 0;
    bool host_seen = false;
    for (const TensorPlacement& t : p.tensors) {
      EXPECT_LE(t.stream_count, t.host_count());
      const uint64_t cut = t.device_count + t.stream_count;
      if (cut != t.numel) {
        EXPECT_EQ(cut % kQuantGroup, 0u);
      }
      // Registration order: once a tensor computes something on the host, no later
      // tensor streams.
      if (host_seen) {
        EXPECT_EQ(t.stream_count, 0u);
      }
      if (t.host_compute_count() > 0) host_seen = true;
      streamed += t.stream_count;
    }
    EXPECT_EQ(streamed, p.streamed);
    const double want = share * double(p.offloaded);
    EXPECT_LE(std::abs(double(p.streamed) - want), kQuantGroup) << share;
    if (share == 1.0) {
      EXPECT_EQ(p.streamed, p.offloaded);
    }
  }
  EXPECT_THROW(ComputePlacement(numels, 0.5, PlacementPolicy::kBackwardOrder, 1.2), Error);
}

}  // namespace
}  // namespace tandem
