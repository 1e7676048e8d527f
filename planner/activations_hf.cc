// The activation model of Hugging Face transformers' own implementation of a decoder,
// fitted term by term to the live bytes of real training iterations traced op by op
// (bench/activation_trace.py; docs/planner.md "Activations" has the derivation and the
// measured table).
//
// Note [Transformers activations]
// Per token (b x s of them), with w the activation dtype's bytes (the parameters'), h the
// hidden size, a / kv the query / key-value heads of head_dim d (values: d_v), i the MLP
// width, V the vocabulary:
//
//   an input norm      Llama (x.to(fp32) kept by pow, the bf16 normalised, the output):
//                      (4 + 2w) h + 4;  Gemma (fp32 throughout): (8 + w) h + 4
//   a post norm        Gemma's post-attention and post-feedforward: 8 h + 4
//   q/k norms          Qwen3 (4 + w)(a d + kv d) + 4 (a + kv);  Gemma 3: 8 (...) + 4 (...)
//   SDPA attention     q after rotary, k, v, the output, the fp32 log-sum-exp:
//                      w (a d + kv d + kv d_v + a d_v) + 4 a;  with a mask (a sliding
//                      window the sequence reaches): + w (a d + a d_v) (k, v repeated to
//                      every head) + w s (the float mask SDPA converts the boolean one to)
//   eager attention    q, k and v (the cache's), k and v repeated, the output copied
//                      contiguous, the fp32 softmax and its dtype copy (+ tanh's output
//                      with logit soft-capping): ... + (4 + w [+ w]) a s
//   gated MLP          gate and up (one output with experts), the activation, the
//                      product: 4 w i;  routed experts, k of E per token: k (4 w i_e +
//                      2 w h + 40) + (4 + w) E (each slot's input, output and int64
//                      routing indices; the router's fp32 softmax)
//   shared             the rotary cos and sin, 2 w d per table; with recomputation the
//                      masks a checkpointed layer takes: SDPA's boolean sliding mask, s,
//                      eager's float masks, w s per layer type (without, they go with
//                      forward)
//
// A layer keeps the sum (L layers: all of them); with gradient checkpointing each layer
// keeps its input, w h. The peak is the largest of four phases (parameters and gradients
// apart):
//   loss       kept + shared + the final norm's set + the held logits (w V: the output
//              object a training loop holds; tanh's too with final soft-capping) + 12 V:
//              cross-entropy's fp32 log-softmax, and in its backward the fp32 gradient
//              of the log-probabilities and of the logits (the logits' fp32 copy is gone)
//   final norm kept + shared + w V + 24 h: its fp32 input and five fp32 temporaries
//   MLP        kept + shared + w V + the recomputed layer and the checkpoint's w h (with
//              recomputation) + the MLP's backward: 2 w i + w h + 8 (Llama), or Gemma's
//              post-feedforward norm first: 16 h + w h; routed experts the larger of
//              w h + 7 k w h (their outputs' gradients first) and 2 w k i_e + 2 w h + 8
//   attention  the same up to the attention's backward, the layer's later part freed:
//              + w h + w (a d + kv d + kv d_v) (SDPA); eager, its dtype probabilities,
//              repeated values and output consumed: + w h + w a d_v + 8 a s (the fp32
//              gradients of the probabilities and of the softmax)
// With tied embeddings the head's gradient (w V h, once, not per token) waits beside the
// last three phases for the embedding's, then the two are summed.
// Measured on CPU with torch 2.11 and transformers 5.23 in bf16 and fp32 for Llama,
// Mistral, Qwen2, Qwen3, Gemma 2, Gemma 3, Mixtral and Qwen3-MoE (docs/planner.md
// "Activations" has the table): exact where a phase's tensors are fixed, up to 5% over
// where its temporaries vary, never more than 0.03% under.
#include <algorithm>
#include <string>

#include "tandem/error.h"
#include "tandem/planner.h"

namespace tandem::planner {

const char* Name(ActivationModel m) noexcept {
  switch (m) {
    case ActivationModel::kAuto:
      return "auto";
    case ActivationModel::kMegatron:
      return "megatron";
    case ActivationModel::kTransformers:
      return "transformers";
  }
  return "?";
}

ActivationModel ParseActivationModel(std::string_view s) {
  if (s == "auto") return ActivationModel::kAuto;
  if (s == "megatron") return ActivationModel::kMegatron;
  if (s == "transformers") return ActivationModel::kTransformers;
  throw Error(ErrorKind::kInvalidArgument,
              "unknown activation model '" + std::string(s) + "' (auto, megatron, transformers)");
}

uint64_t TransformersActivations::peak() const {
  return std::max({loss, final_norm, mlp, attention});
}

const char* TransformersActivations::where() const {
  const uint64_t p = peak();
  if (p == loss) return "loss";
  if (p == final_norm) return "final norm";
  if (p == mlp) return "MLP backward";
  return "attention backward";
}

TransformersActivations EstimateTransformersActivations(const ModelDescription& m,
                                                        const ActivationShape& x,
                                                        Recompute recompute, DType dtype) {
  if (recompute == Recompute::kSelective)
    throw Error(ErrorKind::kInvalidArgument,
                "transformers has no selective recomputation: --recompute none, or full "
                "(model.gradient_checkpointing_enable()); or --activation-model megatron");
  const TransformerShape& t = m.transformer;
  const uint64_t h = x.hidden != 0 ? x.hidden : m.hidden_size;
  const uint64_t L = x.layers != 0 ? x.layers : m.num_layers;
  const uint64_t a = x.heads != 0 ? x.heads : m.num_heads;
  const uint64_t V = x.vocab != 0 ? x.vocab : m.vocab_size;
  const uint64_t s = x.seq_len;
  const bool moe = t.moe_layers > 0;
  auto need = [](uint64_t v, const char* what) {
    if (v == 0)
      throw Error(ErrorKind::kInvalidArgument,
                  std::string("transformers activation estimate: ") + what + " must be > 0");
  };
  need(x.batch, "batch size");
  need(s, "sequence length");
  need(h, "hidden size");
  need(L, "layer count");
  need(a, "attention head count");
  need(V, "vocabulary size");
  need(moe ? t.expert_intermediate : t.intermediate, "the MLP width (intermediate size)");
  const uint64_t w = DTypeSize(dtype);
  const uint64_t d = t.head_dim != 0 ? t.head_dim : h / a;
  const uint64_t dv = t.v_head_dim != 0 ? t.v_head_dim : d;
  const uint64_t kv = t.kv_heads != 0 ? t.kv_heads : a;
  const uint64_t hq = a * d, hk = kv * d, hv = kv * dv, ho = a * dv;
  const bool gemma = t.gemma_norms, eager = t.eager_attention || x.attention == Attention::kEager;

  // Note [Transformers activations]: bytes per token.
  const uint64_t norm_in = (gemma ? 8 + w : 4 + 2 * w) * h + 4;
  const uint64_t norm_post = 8 * h + 4;
  const uint64_t qk = t.qk_norm ? (gemma ? 8 : 4 + w) * (hq + hk) + 4 * (a + kv) : 0;
  const bool full = recompute == Recompute::kFull;
  uint64_t attn = 0, masked_extra = 0, masks = 0, attn_backward = 0, attn_freed = 0;
  // Layers that run SDPA with an explicit mask: a sliding window the sequence reaches.
  const uint64_t masked =
      !eager && t.sliding_window > 0 && s >= t.sliding_window ? t.sliding_layers : 0;
  if (eager) {
    // The softmax's copy in the dtype (none when that is fp32 already).
    const uint64_t probs = w == 4 ? 0 : w;
    attn = w * hq + w * (hk + hv) + w * (hq + ho) + w * ho +
           (4 + probs + (t.attention_softcap ? w : 0)) * a * s;
    // Its float masks, one per layer type, are added, not kept: gone with forward unless
    // they are checkpointed layers' inputs.
    masks = full ? std::max<uint64_t>(t.layer_types, 1) * w * s : 0;
    // The softmax's backward: the fp32 gradient of the probabilities and its own, beside
    // the gradients of the output and the values.
    attn_backward = w * h + w * ho + 8 * a * s;
    // By the softmax's backward: the probabilities' dtype copy, the values repeated and
    // the output are freed.
    attn_freed = probs * a * s + w * ho + w * ho;
  } else {
    attn = w * (hq + hk + hv + ho) + 4 * a;
    masked_extra = w * (hq + ho) + w * s;
    // The boolean mask is a checkpointed layer's input; without recomputation it goes
    // with forward.
    masks = masked > 0 && full ? s : 0;
    attn_backward = w * h + w * (hq + hk + hv);
  }
  const uint64_t k = t.experts_per_token;
  const uint64_t dense_mlp = 4 * w * t.intermediate;
  // Per routed slot: its input and output beside its MLP, and the routing's indices and
  // sort keys (int64); the router's logits and fp32 softmax.
  const uint64_t moe_mlp = k * (4 * w * t.expert_intermediate + 2 * w * h + 40) +
                           (4 + w) * t.experts + 4 * w * t.shared_intermediate;
  const uint64_t pre = norm_in + qk + attn;                      // through the attention
  const uint64_t post = norm_in + (gemma ? 2 * norm_post : 0);  // the norms after it
  const uint64_t layer_dense = pre + post + dense_mlp, layer_moe = pre + post + moe_mlp;
  const uint64_t moe_layers = std::min(t.moe_layers, L);
  const uint64_t last = moe ? layer_moe : layer_dense;  // the layer backward meets first
  const uint64_t last_mlp = moe ? moe_mlp : dense_mlp;
  const uint64_t kept = full ? L * w * h
                             : (L - moe_layers) * layer_dense + moe_layers * layer_moe +
                                   masked * masked_extra;
  const uint64_t shared = 2 * w * d * std::max<uint32_t>(t.rope_tables, 1) + masks;
  // The output's logits; with final soft-capping tanh's output too, until its backward.
  const uint64_t held = w * V, softcap = t.final_softcap ? w * V : 0;
  const uint64_t one = last + (masked > 0 ? masked_extra : 0);
  const uint64_t one_pre = pre + (masked > 0 ? masked_extra : 0);
  uint64_t mlp_backward = gemma ? 16 * h + w * h : 2 * w * t.intermediate + w * h + 8;
  // Routed experts: the routed outputs' gradients (gathered, weighted, in fp32) first,
  // then the experts' own.
  if (moe)
    mlp_backward = std::max({w * h + 7 * k * w * h,
                             2 * w * k * t.expert_intermediate + 2 * w * h + 8,
                             t.intermediate > 0 ? mlp_backward : 0});  // a dense layer's
  const uint64_t base = kept + shared + held;
  uint64_t attention = base + attn_backward + (full ? one_pre + w * h : 0);
  // Freed by then: the layer's later part (without recomputation: of the last layer's
  // set in `kept`), and what the attention's backward consumed first.
  const uint64_t freed = (full ? 0 : post + last_mlp) + attn_freed;
  attention = attention > freed ? attention - freed : 0;

  const uint64_t tokens = x.batch * s;
  // A tied output head's gradient waits for the embedding's from its own backward to the
  // end of backward, then the two are summed: a vocabulary x hidden buffer beside the
  // layers' phases that is not the gradient the plan counts.
  const uint64_t tied = t.tied_embeddings ? w * V * h : 0;
  TransformersActivations r;
  r.layer = layer_dense * tokens;
  r.kept = kept * tokens;
  r.shared = shared * tokens;
  r.logits = (held + softcap + 12 * V) * tokens;
  r.loss = (base + softcap + norm_in + 12 * V) * tokens;
  r.final_norm = (base + 24 * h) * tokens + tied;
  r.mlp = (base + (full ? one + w * h : 0) + mlp_backward) * tokens + tied;
  r.attention = attention * tokens + tied;
  return r;
}

}  // namespace tandem::planner
