// The planner's model of a training run: the model's tensors and transformer shape
// (presets, config files, tensor lists), its activation memory and its training FLOPs
// (tandem/planner.h says how the planner is used; docs/planner.md defines the formulas).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "tandem/types.h"

namespace tandem::planner {

// ---------------------------------------------------------------------------------------
// Model descriptions

// One parameter tensor of a model, by shape only.
struct ModelTensor {
  std::string name;
  uint64_t numel = 0;
  // Transformer block this tensor belongs to (0-based), or -1 for tensors outside the
  // blocks (embeddings, final norm, lm_head). Gradient release groups tensors by it.
  int layer = -1;
  // Shape as PyTorch holds it (a Linear weight is {out_features, in_features}); empty
  // means one dimension of numel. FSDP2 shards dimension 0 (docs/planner.md "FSDP2").
  std::vector<uint64_t> shape;
};

// A decoder as Hugging Face transformers builds it, from its config: what the activation
// model of transformers' implementation needs beyond hidden size, layers, heads and
// vocabulary (docs/planner.md "Activations"). Zero where the config has no such part.
struct TransformerShape {
  uint64_t intermediate = 0;  // dense MLP width (SwiGLU / GeGLU: gate, up, down)
  uint64_t kv_heads = 0;      // key and value heads (GQA); MLA: the heads
  uint64_t head_dim = 0;      // of queries and keys
  uint64_t v_head_dim = 0;    // of values, where it differs (MLA); 0: head_dim
  // Gemma's RMSNorm: four per layer (input, post-attention, pre- and post-feedforward),
  // computed in fp32 throughout; else Llama's two, upcast to fp32 and back.
  bool gemma_norms = false;
  bool qk_norm = false;          // RMSNorm over head_dim on queries and keys (Qwen3, Gemma 3)
  bool tied_embeddings = false;  // the output head is the embedding (tie_word_embeddings)
  bool eager_attention = false;  // transformers has no SDPA path for it (Gemma 2)
  bool attention_softcap = false;  // tanh soft-capping of the attention logits
  bool final_softcap = false;      // tanh soft-capping of the output logits (Gemma 2)
  uint64_t sliding_window = 0;     // 0: none
  uint64_t sliding_layers = 0;     // layers that attend within sliding_window
  uint32_t layer_types = 1;        // attention kinds (full, sliding): masks, rotary tables
  uint32_t rope_tables = 1;        // rotary (cos, sin) tables the model computes
  // Mixture of experts: layers with routed experts, the experts, those a token runs, their
  // width, and the shared experts' width per token.
  uint64_t moe_layers = 0, experts = 0, experts_per_token = 0, expert_intermediate = 0;
  uint64_t shared_intermediate = 0;
};

// A model: its tensors in forward order and, where known, the transformer shape used by
// the activation estimate (0 = unknown).
struct ModelDescription {
  std::string name;  // preset name, config file path, params file path or "N parameters"
  // "llama", "mistral", "qwen2", "qwen3", "gemma2", "gemma3", "mixtral", "qwen2_moe",
  // "qwen3_moe", "deepseek_v2", "deepseek_v3", "gpt2", "params" (from a tensor list),
  // "flat"
  std::string architecture;
  std::vector<ModelTensor> tensors;
  uint64_t hidden_size = 0;
  uint64_t num_layers = 0;
  uint64_t num_heads = 0;
  uint64_t vocab_size = 0;
  // Read from a transformers config (a config.json, or a live module's .config): the
  // activation estimate then models transformers' implementation by default
  // (ActivationModel::kAuto) and `transformer` holds its shape.
  bool transformers_config = false;
  TransformerShape transformer;
  // The dtype every tensor has, where the description says (a tensor list); else empty.
  std::optional<DType> dtype;
  // What the reader assumed or left out, one sentence each (e.g. a DeepSeek MTP module
  // not counted, fields ignored); the plan repeats them.
  std::vector<std::string> notes;

  uint64_t total_params() const;
  // Elements of the largest gradient-release group: one transformer block (all tensors
  // with the same layer >= 0) or one tensor outside the blocks.
  uint64_t largest_layer_params() const;
};

// `params` elements as `pieces` (>= 1) tensors of equal size (the last takes the
// remainder), named "flat.0", "flat.1", ...; each piece is its own gradient-release group.
// Throws Error(kInvalidArgument) if params == 0, params > 2^42, pieces == 0 or pieces >
// min(params, 2^17) (docs/planner.md "Limits").
ModelDescription ModelFromParamCount(uint64_t params, uint32_t pieces = 1);

// Options of the config.json readers.
struct ConfigOptions {
  // DeepSeek-V3: count the multi-token-prediction modules (num_nextn_predict_layers) as
  // extra blocks. Default false: Hugging Face transformers does not build them, and the
  // published 671B excludes them (docs/planner.md "Model descriptions").
  bool include_mtp = false;
  // The config only gives a tensor list its transformer shape (WithConfigShape; tandem-plan
  // --config with --params-json): the list counts the parameters, so a field that may
  // change the count is named in a note instead of refused.
  bool shape_only = false;
};

// A Hugging Face config.json, or a model directory holding one (DIR/config.json).
// Architectures ("architectures"[0], else "model_type"): LlamaForCausalLM,
// MistralForCausalLM, Qwen2ForCausalLM, Qwen3ForCausalLM, MixtralForCausalLM,
// Qwen2MoeForCausalLM, Qwen3MoeForCausalLM, DeepseekV2ForCausalLM,
// DeepseekV3ForCausalLM, GPT2LMHeadModel.
// Every top-level field is either read, on a list of fields known not to change the
// parameter count, or ignored with a note; a field that is none of these and whose name
// suggests a shape ("expert", "lora", "rank", "head", "layer", "intermediate", "vocab",
// "hidden", "embed", ...) is an error naming it (docs/planner.md "Config fields").
// Throws Error(kInvalidArgument) naming the file and the missing, bad or unknown key, or
// the unknown architecture, or a count or model past the planner's limits (a file over
// 16 MiB, a layer or expert count over 2^14, another count over 2^24, more than 2^17
// tensors or 2^42 parameters: docs/planner.md "Limits"); Error(kIO) if the file cannot be
// read.
ModelDescription ModelFromConfigFile(const std::string& path, const ConfigOptions& options = {});
// The same from the text of a config.json; `where` names it in errors.
ModelDescription ModelFromConfigText(std::string_view json, std::string_view where,
                                     const ConfigOptions& options = {});

// A tensor list: a JSON array of {"name": str, "shape": [int, ...], "dtype": str}, e.g.
// what `[{"name": n, "shape": list(p.shape), "dtype": str(p.dtype)} for n, p in
// model.named_parameters() if p.requires_grad]` writes. dtype: "float32", "bfloat16",
// "float16" with or without "torch.", or the library's names (f32, bf16, f16). A tensor's
// block is the number after ".layers.", ".h." or ".blocks." in its name (else -1). Empty
// tensors are left out (with a note). The description's dtype is set when all agree.
// Throws Error(kInvalidArgument) naming `where`, the entry's index and the bad field, or
// a list past the planner's limits (a file over 64 MiB, more than 2^17 tensors or 2^42
// parameters: docs/planner.md "Limits"); Error(kIO) if the file cannot be read.
ModelDescription ModelFromParamsJson(std::string_view json, std::string_view where);
ModelDescription ModelFromParamsFile(const std::string& path);

// `tensors` (a tensor list: a live module's named_parameters()) with the transformer shape
// of `config` (its config): name, architecture, the shape fields, transformers_config and
// the notes of both. The tensor list is what is placed and counted; a note says so when
// its parameter count differs from the config's (frozen, added or tied parameters).
// Throws Error(kInvalidArgument) naming both when the config's hidden size does not
// match the tensor list's embedding width.
ModelDescription WithConfigShape(ModelDescription tensors, const ModelDescription& config);

// Built-in presets: "llama3-1b", "llama3-3b", "llama3-8b", "llama3-70b", "llama3-405b".
// Throws Error(kInvalidArgument) listing the presets for an unknown name.
ModelDescription ModelFromPreset(std::string_view name);
std::vector<std::string> PresetNames();

// ---------------------------------------------------------------------------------------
// Activation memory (Korthikanti et al. 2022; docs/planner.md "Activations")

enum class Recompute : uint8_t { kNone = 0, kSelective = 1, kFull = 2 };
const char* Name(Recompute r) noexcept;        // "none", "selective", "full"
Recompute ParseRecompute(std::string_view s);  // throws Error(kInvalidArgument)

// How attention keeps what backward needs. kFlash (FlashAttention, PyTorch SDPA): no
// s x s scores are kept, only the fp32 log-sum-exp per head and token. kEager: the
// scores, their softmax and the dropout mask are kept (Korthikanti's 5as/h term).
enum class Attention : uint8_t { kFlash = 0, kEager = 1 };
const char* Name(Attention a) noexcept;        // "flash", "eager"
Attention ParseAttention(std::string_view s);  // throws Error(kInvalidArgument)

struct ActivationShape {
  uint64_t batch = 1;    // micro-batch per GPU, b
  uint64_t seq_len = 0;  // s
  uint64_t hidden = 0;   // h
  uint64_t layers = 0;   // L
  uint64_t heads = 0;    // a
  uint64_t vocab = 0;    // V (0: no logits term)
  Attention attention = Attention::kFlash;
};

// Bytes of activations kept for backward, bf16, no tensor/sequence parallelism:
//   per layer  none, eager: s*b*h*(34 + 5*a*s/h)   none, flash: 34*s*b*h + 4*a*s*b
//              selective: 34*s*b*h                 full: 2*s*b*h
//   total = L * per layer + 4*s*b*V (fp32 logits).
// Throws Error(kInvalidArgument) if seq_len, hidden, layers or (for kNone) heads is 0.
uint64_t EstimateActivationBytes(const ActivationShape& shape, Recompute recompute);

// Which training code the activation estimate models (docs/planner.md "Activations"):
// kMegatron, Korthikanti's formula above (Megatron-style fused blocks); kTransformers,
// Hugging Face transformers' own implementation, measured op by op; kAuto, transformers
// for a model read from a transformers config or module, Megatron's otherwise (presets,
// counts, tensor lists).
enum class ActivationModel : uint8_t { kAuto = 0, kMegatron = 1, kTransformers = 2 };
const char* Name(ActivationModel m) noexcept;              // "auto", "megatron", "transformers"
ActivationModel ParseActivationModel(std::string_view s);  // throws Error(kInvalidArgument)

// The activation peak of one training iteration of a transformers decoder (forward with
// labels, loss.backward(); the output object held through backward, as a plain loop
// does), phase by phase, in bytes per GPU (docs/planner.md "Activations" derives and
// tabulates each term). The peak is the largest phase; parameters and gradients are not
// in it.
struct TransformersActivations {
  uint64_t layer = 0;   // what one dense layer keeps for backward without recomputation
  uint64_t kept = 0;    // what all layers keep: every layer's set, or each layer's input
  uint64_t shared = 0;  // rotary tables and attention masks the layers share
  uint64_t logits = 0;  // the logits and the fp32 loss buffers at the loss's backward
  // The phases: the loss's backward (cross-entropy's log-softmax and its fp32 gradients),
  // the final norm's backward, and a layer's backward (its MLP, then its attention), with
  // full recomputation while that layer is rebuilt.
  uint64_t loss = 0, final_norm = 0, mlp = 0, attention = 0;
  uint64_t peak() const;
  const char* where() const;  // "loss", "final norm", "MLP backward", "attention backward"
};
// For `model` (its TransformerShape; hidden size, layers, heads and vocabulary from
// `shape` where non-zero), activations of `dtype` (the parameters'): kNone keeps every
// layer's set, kFull is model.gradient_checkpointing_enable() (use_reentrant True or
// False). Throws Error(kInvalidArgument) for kSelective (transformers has none), and if
// the sequence, batch, hidden size, layers, heads, vocabulary or the MLP width is 0.
TransformersActivations EstimateTransformersActivations(const ModelDescription& model,
                                                        const ActivationShape& shape,
                                                        Recompute recompute, DType dtype);

// ---------------------------------------------------------------------------------------
// Training work (docs/planner.md "Iteration")

// One training iteration of one GPU: its micro-batch (batch x seq tokens) through forward
// and backward of a dense transformer, after Narayanan et al. 2021 and PaLM's MFU. With
// M = matrix-multiply parameters (every tensor of 2+ dimensions in the blocks, plus the
// output head vocab x hidden, tied or not) and A = layers x q x seq (q: heads x head_dim
// where the config gives head_dim, else hidden; a sliding-window layer's seq at most its
// window), per token:
//   model     (MFU's count)  6 M + 12 A   (forward 2 M + 4 A, backward twice that)
//   hardware  the model's, plus the forward done again in backward: full recomputation
//             2 M + 4 A, selective (attention core) 4 A, none 0.
struct TrainingFlops {
  uint64_t matmul_params = 0;     // M
  double tokens = 0;              // batch x seq
  double model_per_token = 0;     // FLOP
  double hardware_per_token = 0;  // FLOP
  double forward_share = 0;       // of the hardware work, the first forward's
  double model() const { return model_per_token * tokens; }
  double hardware() const { return hardware_per_token * tokens; }
};
// Throws Error(kInvalidArgument) when the model has no transformer shape (hidden size,
// layers) or the shape no sequence length, and for a mixture of experts (not modelled).
// The shape's hidden, layers and vocab default to the model's when 0.
TrainingFlops EstimateTrainingFlops(const ModelDescription& model, const ActivationShape& shape,
                                    Recompute recompute);
// Whether the model routes tokens to experts (Mixtral, Qwen-MoE, DeepSeek).
bool IsMixtureOfExperts(const ModelDescription& model);

}  // namespace tandem::planner
