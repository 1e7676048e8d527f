// The work of a training iteration (EstimateTrainingFlops) and the iteration model's
// inputs (ResolveTraining).
#include <gtest/gtest.h>

#include "planner/plan.h"
#include "tandem/error.h"

namespace tandem::planner {
namespace {

ActivationShape Seq(uint64_t seq, uint64_t batch = 1) {
  ActivationShape s;
  s.seq_len = seq;
  s.batch = batch;
  return s;
}

TEST(TrainingFlops, Llama8BPerToken) {
  const ModelDescription m = ModelFromPreset("llama3-8b");
  const TrainingFlops none = EstimateTrainingFlops(m, Seq(2048), Recompute::kNone);
  // Per block: q and o 4096 x 4096, k and v 1024 x 4096, three 4096 x 14336 MLP
  // matrices; and the head, 128256 x 4096. Norms and the embedding do no matmul.
  const uint64_t block = 2 * 4096ull * 4096 + 2 * 1024ull * 4096 + 3 * 4096ull * 14336;
  const uint64_t mm = 32 * block + 128256ull * 4096;
  EXPECT_EQ(none.matmul_params, mm);
  const double a = 32.0 * 4096 * 2048;  // layers x hidden x seq
  EXPECT_DOUBLE_EQ(none.model_per_token, 6.0 * mm + 12 * a);
  EXPECT_DOUBLE_EQ(none.hardware_per_token, none.model_per_token);
  EXPECT_DOUBLE_EQ(none.forward_share, (2.0 * mm + 4 * a) / (6.0 * mm + 12 * a));
  EXPECT_DOUBLE_EQ(none.tokens, 2048);
  // 98.8 TFLOP of model work per GPU per iteration: the figure of docs/planner.md.
  EXPECT_NEAR(none.model() / 1e12, 98.8, 0.05);
  // Full recomputation does the forward again in backward: 4/3 of the work and a quarter
  // of it the first forward.
  const TrainingFlops full = EstimateTrainingFlops(m, Seq(2048), Recompute::kFull);
  EXPECT_DOUBLE_EQ(full.model_per_token, none.model_per_token);
  EXPECT_DOUBLE_EQ(full.hardware_per_token, none.model_per_token + 2.0 * mm + 4 * a);
  EXPECT_NEAR(full.forward_share, 0.25, 1e-12);
  EXPECT_NEAR(full.hardware() / 1e12, 131.8, 0.05);
  // Selective: the attention core again.
  EXPECT_DOUBLE_EQ(EstimateTrainingFlops(m, Seq(2048), Recompute::kSelective).hardware_per_token,
                   none.model_per_token + 4 * a);
  // Linear in the micro-batch.
  EXPECT_DOUBLE_EQ(EstimateTrainingFlops(m, Seq(2048, 4), Recompute::kFull).hardware(),
                   4 * full.hardware());
}

TEST(TrainingFlops, TiedHeadsStillMultiply) {
  // Llama-3.2-1B ties its head to the embedding: the logits are still a matmul.
  const TrainingFlops f =
      EstimateTrainingFlops(ModelFromPreset("llama3-1b"), Seq(1024), Recompute::kNone);
  const uint64_t block = 2 * 2048ull * 2048 + 2 * 512ull * 2048 + 3 * 2048ull * 8192;
  EXPECT_EQ(f.matmul_params, 16 * block + 128256ull * 2048);
}

TEST(TrainingFlops, RefusesWhatItCannotCount) {
  EXPECT_THROW(EstimateTrainingFlops(ModelFromParamCount(1000000), Seq(1024), Recompute::kNone),
               Error);
  EXPECT_THROW(EstimateTrainingFlops(ModelFromPreset("llama3-8b"), Seq(0), Recompute::kNone),
               Error);
  const ModelDescription moe =
      ModelFromConfigFile(std::string(TANDEM_PLANNER_CONFIGS) + "/mixtral-8x7b/config.json");
  EXPECT_TRUE(IsMixtureOfExperts(moe));
  try {
    EstimateTrainingFlops(moe, Seq(1024), Recompute::kNone);
    ADD_FAILURE() << "counted a mixture of experts";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("mixture of experts"), std::string::npos) << e.what();
  }
}

TEST(ResolveTraining, FromTheProfileOrBuiltIn) {
  PlanInputs in;
  in.model = ModelFromPreset("llama3-8b");
  EXPECT_FALSE(ResolveTraining(in).modelled);  // no --seq
  in.activation_shape.seq_len = 2048;
  in.recompute = Recompute::kFull;
  // One GPU without FSDP2: the rate measured on one H200.
  TrainingModel t = ResolveTraining(in);
  ASSERT_TRUE(t.modelled);
  EXPECT_EQ(t.tflops, kDefaultTrainTflopsOneGpu);
  EXPECT_NE(t.tflops_source.find("one H200"), std::string::npos) << t.tflops_source;
  // Under FSDP2, or on several ranks: the one fitted to FSDP2 on 4 x H200.
  in.fsdp2 = true;
  in.gpus_per_node = 4;
  EXPECT_EQ(ResolveTraining(in).tflops, kDefaultTrainTflops);
  in.fsdp2 = false;
  EXPECT_EQ(ResolveTraining(in).tflops, kDefaultTrainTflops);
  in.gpus_per_node = 1;
  t = ResolveTraining(in);
  EXPECT_NE(t.tflops_source.find("built-in"), std::string::npos);
  EXPECT_EQ(t.peak, kDefaultPeakTflops);
  EXPECT_NEAR(t.forward_ms + t.backward_ms,
              t.flops.hardware() / (kDefaultTrainTflopsOneGpu * 1e9), 1e-9);
  EXPECT_NEAR(t.forward_ms * 3, t.backward_ms, 1e-9);  // full recomputation
  EXPECT_EQ(t.blocks, 32u);
  in.profile.gpu.train_tflops = 680;
  t = ResolveTraining(in);
  EXPECT_EQ(t.tflops, 680);
  EXPECT_EQ(t.tflops_source, "measured");
  // A mixture of experts or a shapeless model: not modelled, and the note says why.
  in.model = ModelFromParamCount(1 << 20);
  t = ResolveTraining(in);
  EXPECT_FALSE(t.modelled);
  EXPECT_NE(t.note.find("no transformer shape"), std::string::npos) << t.note;
}

}  // namespace
}  // namespace tandem::planner
