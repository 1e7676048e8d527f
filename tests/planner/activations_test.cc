#include <gtest/gtest.h>

#include "tandem/error.h"
#include "tandem/planner.h"

namespace tandem::planner {
namespace {

ActivationShape Llama8b(uint64_t vocab) {
  ActivationShape s;
  s.batch = 1;
  s.seq_len = 4096;
  s.hidden = 4096;
  s.layers = 32;
  s.heads = 32;
  s.vocab = vocab;
  return s;
}

TEST(Activations, KorthikantiFormula) {
  // s*b*h*(34 + 5*a*s/h) = 2*1*4*(34 + 5*2*2/4) = 312 bytes for one layer, no logits.
  ActivationShape tiny{1, 2, 4, 1, 2, 0};
  EXPECT_EQ(EstimateActivationBytes(tiny, Recompute::kNone), 312u);
  EXPECT_EQ(EstimateActivationBytes(tiny, Recompute::kSelective), 34u * 8);
  EXPECT_EQ(EstimateActivationBytes(tiny, Recompute::kFull), 2u * 8);
}

TEST(Activations, Llama8bAt4k) {
  const uint64_t sbh = 4096ull * 4096;
  const uint64_t logits = 4ull * 4096 * 128256;
  // 34 + 5*32*4096/4096 = 194 bytes per s*b*h per layer.
  EXPECT_EQ(EstimateActivationBytes(Llama8b(128256), Recompute::kNone), 32 * 194 * sbh + logits);
  EXPECT_EQ(EstimateActivationBytes(Llama8b(128256), Recompute::kNone), 106254303232u);
  EXPECT_EQ(EstimateActivationBytes(Llama8b(128256), Recompute::kSelective),
            32 * 34 * sbh + logits);
  EXPECT_EQ(EstimateActivationBytes(Llama8b(128256), Recompute::kFull), 32 * 2 * sbh + logits);
  // Linear in the micro-batch.
  ActivationShape b4 = Llama8b(128256);
  b4.batch = 4;
  EXPECT_EQ(EstimateActivationBytes(b4, Recompute::kSelective),
            4 * EstimateActivationBytes(Llama8b(128256), Recompute::kSelective));
}

TEST(Activations, RejectsMissingShape) {
  ActivationShape s = Llama8b(0);
  s.seq_len = 0;
  EXPECT_THROW(EstimateActivationBytes(s, Recompute::kFull), Error);
  s = Llama8b(0);
  s.heads = 0;
  EXPECT_THROW(EstimateActivationBytes(s, Recompute::kNone), Error);
  EXPECT_NO_THROW(EstimateActivationBytes(s, Recompute::kSelective));
}

TEST(Activations, RecomputeNames) {
  for (Recompute r : {Recompute::kNone, Recompute::kSelective, Recompute::kFull})
    EXPECT_EQ(ParseRecompute(Name(r)), r);
  EXPECT_THROW(ParseRecompute("partial"), Error);
}

}  // namespace
}  // namespace tandem::planner
