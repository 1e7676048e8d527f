// The work of one training iteration on one GPU (docs/planner.md "Iteration"): the FLOPs
// of forward and backward, counted as MFU counts them and as the hardware does them.
#include <algorithm>
#include <string>

#include "tandem/error.h"
#include "tandem/planner.h"

namespace tandem::planner {

bool IsMixtureOfExperts(const ModelDescription& m) {
  for (const char* a : {"mixtral", "qwen2_moe", "qwen3_moe", "deepseek_v2", "deepseek_v3"})
    if (m.architecture == a) return true;
  return false;
}

TrainingFlops EstimateTrainingFlops(const ModelDescription& m, const ActivationShape& shape,
                                    Recompute recompute) {
  const uint64_t hidden = shape.hidden != 0 ? shape.hidden : m.hidden_size;
  const uint64_t layers = shape.layers != 0 ? shape.layers : m.num_layers;
  const uint64_t vocab = shape.vocab != 0 ? shape.vocab : m.vocab_size;
  if (hidden == 0 || layers == 0)
    throw Error(ErrorKind::kInvalidArgument,
                "training FLOPs need the model's transformer shape (hidden size, layers): "
                "describe the model with a preset or a config.json");
  if (shape.seq_len == 0 || shape.batch == 0)
    throw Error(ErrorKind::kInvalidArgument,
                "training FLOPs need the sequence length and the micro-batch (--seq, --batch)");
  if (IsMixtureOfExperts(m))
    throw Error(ErrorKind::kInvalidArgument,
                "training FLOPs of a mixture of experts are not modelled (each token runs "
                "only its routed experts)");
  TrainingFlops f;
  // Matrix multiplies: every tensor of two or more dimensions inside the blocks, and the
  // output head (vocab x hidden), tied to the embedding or not; the embedding itself is a
  // lookup.
  for (const ModelTensor& t : m.tensors)
    if (t.layer >= 0 && t.shape.size() >= 2) f.matmul_params += t.numel;
  f.matmul_params += vocab * hidden;
  const double mm = static_cast<double>(f.matmul_params);
  // Attention's two matrix products per layer and token (scores and their values), over
  // the whole sequence, forward 4 x (heads x head_dim) x seq FLOP (PaLM's convention: the
  // causal mask is not discounted); a sliding-window layer over at most its window. The
  // query width is the hidden size unless the config says otherwise (Gemma).
  const TransformerShape& t = m.transformer;
  const uint64_t heads = shape.heads != 0 ? shape.heads : m.num_heads;
  const double width = static_cast<double>(t.head_dim != 0 && heads != 0 ? heads * t.head_dim
                                                                        : hidden);
  const uint64_t sliding = t.sliding_window > 0 ? std::min(t.sliding_layers, layers) : 0;
  const double seq = static_cast<double>(shape.seq_len);
  const double window = static_cast<double>(std::min(t.sliding_window, shape.seq_len));
  const double attn = width * (static_cast<double>(layers - sliding) * seq +
                               static_cast<double>(sliding) * window);
  const double forward = 2 * mm + 4 * attn, backward = 4 * mm + 8 * attn;
  f.tokens = static_cast<double>(shape.batch) * static_cast<double>(shape.seq_len);
  f.model_per_token = forward + backward;
  double again = 0;  // forward work done again in backward
  if (recompute == Recompute::kFull) again = forward;
  if (recompute == Recompute::kSelective) again = 4 * attn;
  f.hardware_per_token = f.model_per_token + again;
  f.forward_share = forward / f.hardware_per_token;
  return f;
}

}  // namespace tandem::planner
