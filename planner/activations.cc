// Activation memory after Korthikanti et al. 2022, "Reducing Activation Recomputation in
// Large Transformer Models", section 4 (no tensor or sequence parallelism, t = 1).
#include <string>

#include "tandem/error.h"
#include "tandem/planner.h"

namespace tandem::planner {

const char* Name(Recompute r) noexcept {
  switch (r) {
    case Recompute::kNone:
      return "none";
    case Recompute::kSelective:
      return "selective";
    case Recompute::kFull:
      return "full";
  }
  return "?";
}

const char* Name(Attention a) noexcept { return a == Attention::kFlash ? "flash" : "eager"; }

Attention ParseAttention(std::string_view s) {
  if (s == "flash") return Attention::kFlash;
  if (s == "eager") return Attention::kEager;
  throw Error(ErrorKind::kInvalidArgument,
              "unknown attention '" + std::string(s) + "' (flash, eager)");
}

Recompute ParseRecompute(std::string_view s) {
  if (s == "none") return Recompute::kNone;
  if (s == "selective") return Recompute::kSelective;
  if (s == "full") return Recompute::kFull;
  throw Error(ErrorKind::kInvalidArgument,
              "unknown recomputation mode '" + std::string(s) + "' (none, selective, full)");
}

uint64_t EstimateActivationBytes(const ActivationShape& x, Recompute r) {
  auto need = [](uint64_t v, const char* what) {
    if (v == 0)
      throw Error(ErrorKind::kInvalidArgument,
                  std::string("activation estimate: ") + what + " must be > 0");
  };
  need(x.batch, "batch size");
  need(x.seq_len, "sequence length");
  need(x.hidden, "hidden size");
  need(x.layers, "layer count");
  if (r == Recompute::kNone) need(x.heads, "attention head count");
  const uint64_t sbh = x.seq_len * x.batch * x.hidden;
  uint64_t per_layer = 0;
  switch (r) {
    case Recompute::kNone:
      if (x.attention == Attention::kEager) {
        // s*b*h*(34 + 5*a*s/h) = 34*s*b*h + 5*a*s^2*b: the 5as/h term is the attention
        // scores, softmax output and dropout mask (2 + 2 + 1 bytes per score).
        per_layer = 34 * sbh + 5 * x.heads * x.seq_len * x.seq_len * x.batch;
      } else {
        // FlashAttention recomputes the scores in backward from Q, K, V (already in the
        // 34) and keeps only the fp32 log-sum-exp of each head and token.
        per_layer = 34 * sbh + 4 * x.heads * x.seq_len * x.batch;
      }
      break;
    case Recompute::kSelective:  // attention core recomputed: the 5as/h term goes
      per_layer = 34 * sbh;
      break;
    case Recompute::kFull:  // only each layer's bf16 input is kept
      per_layer = 2 * sbh;
      break;
  }
  const uint64_t logits = 4 * x.seq_len * x.batch * x.vocab;  // fp32 logits
  // Full recomputation rebuilds one layer's activations at a time in backward: that
  // layer's whole set (as without recomputation) exists beside the kept inputs.
  uint64_t recomputed = 0;
  if (r == Recompute::kFull) {
    ActivationShape one = x;
    one.layers = 1;
    one.vocab = 0;
    if (one.heads == 0) one.heads = 1;  // the flash term is small; eager needs heads
    recomputed = EstimateActivationBytes(one, Recompute::kNone);
  }
  return x.layers * per_layer + logits + recomputed;
}

}  // namespace tandem::planner
