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
  s.attention = Attention::kEager;
  return s;
}

TEST(Activations, KorthikantiFormula) {
  // s*b*h*(34 + 5*a*s/h) = 2*1*4*(34 + 5*2*2/4) = 312 bytes for one layer, no logits.
  ActivationShape tiny{1, 2, 4, 1, 2, 0, Attention::kEager};
  EXPECT_EQ(EstimateActivationBytes(tiny, Recompute::kNone), 312u);
  EXPECT_EQ(EstimateActivationBytes(tiny, Recompute::kSelective), 34u * 8);
  // Full: each layer's input, and one layer's whole set while backward recomputes it.
  EXPECT_EQ(EstimateActivationBytes(tiny, Recompute::kFull), 2u * 8 + 312u);
}

TEST(Activations, Llama8bAt4k) {
  const uint64_t sbh = 4096ull * 4096;
  const uint64_t logits = 4ull * 4096 * 128256;
  // 34 + 5*32*4096/4096 = 194 bytes per s*b*h per layer.
  EXPECT_EQ(EstimateActivationBytes(Llama8b(128256), Recompute::kNone), 32 * 194 * sbh + logits);
  EXPECT_EQ(EstimateActivationBytes(Llama8b(128256), Recompute::kNone), 106254303232u);
  EXPECT_EQ(EstimateActivationBytes(Llama8b(128256), Recompute::kSelective),
            32 * 34 * sbh + logits);
  EXPECT_EQ(EstimateActivationBytes(Llama8b(128256), Recompute::kFull),
            32 * 2 * sbh + logits + 194 * sbh);
  // Linear in the micro-batch.
  ActivationShape b4 = Llama8b(128256);
  b4.batch = 4;
  EXPECT_EQ(EstimateActivationBytes(b4, Recompute::kSelective),
            4 * EstimateActivationBytes(Llama8b(128256), Recompute::kSelective));
}

TEST(Activations, FlashIsTheDefaultAndKeepsNoScores) {
  EXPECT_EQ(ActivationShape{}.attention, Attention::kFlash);
  const uint64_t sbh = 4096ull * 4096;
  const uint64_t logits = 4ull * 4096 * 128256;
  ActivationShape flash = Llama8b(128256);
  flash.attention = Attention::kFlash;
  // 34*s*b*h plus the fp32 log-sum-exp per head and token (4*a*s*b), no a*s^2 term.
  EXPECT_EQ(EstimateActivationBytes(flash, Recompute::kNone),
            32 * (34 * sbh + 4ull * 32 * 4096) + logits);
  EXPECT_LT(EstimateActivationBytes(flash, Recompute::kNone),
            EstimateActivationBytes(Llama8b(128256), Recompute::kNone) / 5);
  // Selective recomputation does not depend on the attention kind; full does only through
  // the one layer it rebuilds at a time.
  EXPECT_EQ(EstimateActivationBytes(flash, Recompute::kSelective),
            EstimateActivationBytes(Llama8b(128256), Recompute::kSelective));
  EXPECT_EQ(EstimateActivationBytes(flash, Recompute::kFull),
            32 * 2 * sbh + logits + 34 * sbh + 4ull * 32 * 4096);
  // Quadratic in s only with eager attention.
  ActivationShape eager2 = Llama8b(0), flash2 = flash;
  eager2.seq_len *= 2;
  flash2.seq_len *= 2;
  flash2.vocab = 0;
  ActivationShape flash1 = flash;
  flash1.vocab = 0;
  EXPECT_EQ(EstimateActivationBytes(flash2, Recompute::kNone),
            2 * EstimateActivationBytes(flash1, Recompute::kNone));
  EXPECT_GT(EstimateActivationBytes(eager2, Recompute::kNone),
            2 * EstimateActivationBytes(Llama8b(0), Recompute::kNone));
  EXPECT_EQ(ParseAttention("flash"), Attention::kFlash);
  EXPECT_EQ(ParseAttention(Name(Attention::kEager)), Attention::kEager);
  EXPECT_THROW(ParseAttention("sdpa"), Error);
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
