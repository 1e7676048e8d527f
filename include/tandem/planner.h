// The memory-budget planner: will a model's optimizer step fit on this GPU and host, at
// which offload fraction, and how long will the step take.
//
// Usage (C++; docs/planner.md is the user guide and defines every formula):
//
//   tandem::planner::PlanInputs in;
//   in.model = tandem::planner::ModelFromPreset("llama3-8b");
//   in.gpu_budget = 80ull << 30;
//   in.host_budget = 512ull << 30;
//   in.formats = {MasterFormat::kBF16Ecc8, MomentFormat::kQ8, MomentFormat::kQ8};
//   tandem::planner::PlanResult plan = tandem::planner::MakePlan(in);
//
// Everything here is a plain value or a pure function: safe to call from any thread.
// Failure: functions throw tandem::Error (kInvalidArgument for bad inputs naming the key,
// file or field at fault; kIO for unreadable or unwritable files). An impossible plan is
// not an error: MakePlan returns it with feasible == false and the shortfalls named.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "tandem/compute_split.h"
#include "tandem/placement.h"
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

// ---------------------------------------------------------------------------------------
// Calibration profile ("tandem-profile/1"; docs/planner.md "Profile schema")

inline constexpr const char* kProfileSchema = "tandem-profile/1";

// The gradient pre-pass's cost per element when a profile has no measured rate
// (Profile::Gpu::prepass_gparams_per_s): as many bytes at the HBM copy bandwidth as this.
// Its exact 512-bit sum of squares (Note [Exact sum of squares] in engine/exact_sum.h)
// makes it compute-bound at about twice a bf16 gradient's read: 8.49 ms over Llama-3 8B's
// 8.03e9 bf16 gradients on the H200 (946 Gelem/s), against 3797 GB/s / 4 B = 949 there
// (bench/results/compute_split_h200.json; 4.35 ms before the exact sum).
inline constexpr double kDefaultPrepassBytesPerElement = 4.0;

struct KernelRate {
  double gparams_per_s = 0;  // measured optimizer-step throughput, 1e9 elements per second
};

struct Profile {
  std::string machine, date, source;
  struct Gpu {
    std::string name;
    double hbm_copy_gbps = 0;                   // device copy, read+write bytes per second / 1e9
    std::map<std::string, KernelRate> kernels;  // by KernelKey
    // The gradient pre-pass (exact sum of squares and non-finite check, one read of every
    // gradient) over bf16 gradients, 1e9 elements per second. Optional
    // ("prepass_gparams_per_s"; 0: not measured, absent in profiles written before it):
    // the step-time model then takes kDefaultPrepassBytesPerElement at hbm_copy_gbps
    // (docs/planner.md "Step time").
    double prepass_gparams_per_s = 0;
    // Training throughput (docs/planner.md "Iteration"): a training forward + backward on
    // this GPU in 10^12 FLOP/s of hardware work (TrainingFlops: recomputation counted as
    // work), measured with the model's shapes (tandem.calibrate_training). Optional
    // ("train_tflops"; 0: not measured): the iteration model then takes
    // kDefaultTrainTflops and says so.
    double train_tflops = 0;
    // The GPU's dense bf16 peak in 10^12 FLOP/s, for the MFU the plan reports. Optional
    // ("peak_tflops"; 0: kDefaultPeakTflops, said so).
    double peak_tflops = 0;
  } gpu;
  struct Host {
    int threads = 0;
    std::string isa;
    double copy_gbps = 0;
    double triad_gbps = 0;  // STREAM triad over all threads, bytes per second / 1e9
    std::map<std::string, KernelRate> kernels;
    // The host kernels measured while pinned PCIe copies run both ways at once ("under
    // DMA load": the DMA engines read and write host DRAM too), by KernelKey. Optional
    // ("kernels_under_dma"; absent in profiles written before it): the step-time model
    // then derives the rate from `kernels` (docs/planner.md "Step time").
    std::map<std::string, KernelRate> kernels_under_dma;
    // The host DRAM throughput (bytes read + written per second / 1e9) that the PCIe DMA of
    // every rank of the node shares (Note [The node is one machine] in
    // tandem/compute_split.h): the PCIe traffic of all the node's GPUs streaming both ways
    // at once (tandem-bench calibrate --ranks N with N GPUs). Optional ("dram_gbps"; 0: not
    // measured): triad_gbps stands for it.
    double dram_gbps = 0;
  } host;
  struct Pcie {
    double h2d_gbps = 0, d2h_gbps = 0, bidir_gbps = 0;  // pinned copies; bidir = sum of both
    // Each direction while the other is busy at once (GB/s). Optional (0: not measured;
    // absent in older profiles): the model then splits bidir_gbps in proportion to the
    // bytes each way, never above the direction alone.
    double h2d_concurrent_gbps = 0, d2h_concurrent_gbps = 0;
  } pcie;
  // Note [Fixed step cost]: what one step costs beyond its bytes and elements, as
  // per_step_ms + per_tensor_us x tensors, measured over tiny tensors with every element
  // streamed (offload_compute gpu, the path auto takes on a machine like the H200):
  //   engine   HybridOptimizer::Step plus a device synchronisation: the pre-pass's wait
  //            for its result, the scalars, the hot and streamed plans' launches, the
  //            first upload's and last download's latencies (tandem-bench calibrate);
  //   binding  tandem.torch's step() less the engine's Step: per-tensor gradient
  //            checks, version counters, stream ordering (tandem.calibrate_binding, in
  //            Python; bench/planner_accuracy.py runs it when the profile lacks it).
  // Each part is optional ("step_overhead": {"engine": {...}, "binding": {...}}; absent
  // in profiles written before it): a missing part counts as 0 and the plan says so.
  struct Overhead {
    bool measured = false;
    double per_step_ms = 0, per_tensor_us = 0;  // >= 0
    double ms(uint64_t tensors) const {
      return per_step_ms + per_tensor_us * 1e-3 * static_cast<double>(tensors);
    }
  };
  struct StepOverhead {
    Overhead engine, binding;
  } step_overhead;
  // Note [The node is one machine]: one rank's figures measured while `ranks` ranks of the
  // node ran the same measurement at once, each on its own share of the host's CPUs
  // (tandem::RankCpus) and, with `gpus` == ranks, its own GPU (tandem-bench calibrate
  // --ranks N; each figure the slowest rank's). Optional ("node"; ranks 0: absent): a plan
  // for G GPUs per node uses them when ranks == G and derives them otherwise
  // (MachineRatesFor).
  struct Node {
    int ranks = 0;          // >= 1 when present
    int gpus = 0;           // ranks that drove their own GPU at once (0: host only)
    int cpus_per_rank = 0;  // the fewest host CPUs a rank had (informational)
    std::map<std::string, KernelRate> host_kernels;            // per rank, by KernelKey
    std::map<std::string, KernelRate> host_kernels_under_dma;  // per rank, every GPU busy
    double h2d_concurrent_gbps = 0, d2h_concurrent_gbps = 0;   // per rank; 0: not measured
  } node;
  bool builtin_default = false;  // true only for DefaultProfile(); not written to JSON
};

// One part of the fixed step cost (Note [Fixed step cost]) from the median step times
// over `few` and `many` tiny tensors: the line through both (per_tensor_us from the
// slope, per_step_ms the rest of the `few` step), each part clamped to >= 0; measured.
// Throws Error(kInvalidArgument) unless 0 < few < many and both times are finite and >= 0.
Profile::Overhead FitStepOverhead(uint64_t few, double few_ms, uint64_t many, double many_ms);

// Built-in figures where a profile has none, each said so in the plan:
// The training throughput: Llama-3-8B shapes, FSDP2 over 4 H200s, seq 2048, full
// activation checkpointing: 683 ms per iteration of which the step took 296 ms after
// backward, so 387 ms of forward and backward for 131.7 TFLOP of hardware work per GPU
// (docs/planner.md "Iteration").
inline constexpr double kDefaultTrainTflops = 340.0;
// The same on one GPU without FSDP2 (a plain loop): transformers' Llama-3-8B and
// Qwen2.5-7B shapes on one H200, gradient checkpointing, batch 1, seq 2048 and 4096 with
// nearly nothing offloaded: 479 to 546 TFLOP/s of hardware work (bench/fit_matrix.py,
// 2026-11-29; docs/planner.md "Iteration").
inline constexpr double kDefaultTrainTflopsOneGpu = 510.0;
// Dense bf16 peak of an H100 or H200 SXM.
inline constexpr double kDefaultPeakTflops = 989.0;
// Host DRAM under every GPU's DMA: four ranks streaming on a 4 x H200 host with 64 cores
// moved 27 G elements/s of bf16+ecc8/q8/q8 state together (6.25 bytes each), 169 GB/s.
inline constexpr double kDefaultNodeDramGbps = 169.0;

// The H200 reference figures of the design brief (HBM copy 4260 GB/s; PCIe 55.6 H2D,
// 55.5 D2H, 101.7 both; host triad 146 GB/s, 16 threads; no kernel keys), with host DRAM
// under DMA kDefaultNodeDramGbps.
Profile DefaultProfile();
// An NVIDIA GH200 Grace Hopper Superchip node, from NVIDIA's published figures, none
// measured by Tandem (`machine` and `source` say so; builtin_default false): one Hopper GPU
// with 144 GB HBM3e at 4900 GB/s (the peak, where DefaultProfile's 4260 is a measured
// copy); NVLink-C2C in `pcie`: 450 GB/s each way, 900 both; one Grace CPU: 72 Neoverse V2
// cores (threads 72, isa "sve"), LPDDR5X at 512 GB/s (host copy and triad; no DRAM-under-
// DMA figure, so the triad stands for it). No kernel rates: the rooflines stand for them.
// `tandem-bench calibrate` on a Grace host measures what can be measured over it.
Profile GraceHopperProfile();
// The built-in profiles by name: "h200" (DefaultProfile) and "grace-hopper"
// (GraceHopperProfile); std::nullopt for any other name.
std::optional<Profile> BuiltinProfile(std::string_view name);
// The built-in profile named `name_or_path`, else the profile file at that path
// (ReadProfile, and its errors).
Profile ProfileByNameOrPath(const std::string& name_or_path);
// Parses / reads a profile; Error(kInvalidArgument) naming `where` (or the file) and the
// missing or bad field, or a wrong schema; Error(kIO) if the file cannot be read.
Profile ParseProfile(std::string_view json, std::string_view where);
Profile ReadProfile(const std::string& path);
// Serialises (2-space indented JSON) / writes a profile, atomically and durably (path.tmp,
// fsync, rename, as SaveCheckpoint); Error(kIO) if the file cannot be written, `path`
// then untouched.
std::string ProfileToJson(const Profile& p);
void WriteProfile(const Profile& p, const std::string& path);

// "<algo>/<master>/<m>/<v>/<grad dtype>", e.g. "adamw/bf16+ecc8/q8/q8/bf16".
std::string KernelKey(Algorithm algo, const StateFormats& f, DType grad_dtype);

// The rates of the compute-split model (tandem/compute_split.h) for these formats on the
// profiled machine, for one rank of `ranks` (>= 1) stepping at once on one node (Note
// [The node is one machine] in tandem/compute_split.h): what OptimizerConfig::machine_rates
// takes. Each is measured where the profile has it, else derived as the step-time model
// does (docs/planner.md "Step time"):
//   h2d_gbps, d2h_gbps  node.pcie.*_concurrent_gbps when node.ranks == ranks > 1; else
//                       pcie.*_concurrent_gbps, else bidir_gbps split in proportion to
//                       the parameter and gradient bytes (never above one direction
//                       alone), and with ranks > 1 each capped at host DRAM under DMA
//                       (host.dram_gbps, else host.triad_gbps) / (2 x ranks)
//   host_gparams        node.host.kernels_under_dma[key] when node.ranks == ranks > 1;
//                       else host.kernels_under_dma[key] / ranks, else the host kernel
//                       (node.host.kernels[key] with ranks at once, else host.kernels[key]
//                       or the triad roofline, / ranks) slowed by the DMA's share of DRAM
//                       traffic (tandem::HostRateUnderDma)
//   gpu_gparams         gpu.kernels[key], else the HBM roofline
// key = KernelKey(algo, formats, grad_dtype); SGD is taken with momentum (0.9). Throws
// Error(kInvalidArgument) if a profile bandwidth is not > 0 or ranks is 0.
MachineRates MachineRatesFor(const Profile& profile, Algorithm algo, const StateFormats& formats,
                             DType grad_dtype, DType param_dtype = DType::kBF16,
                             uint32_t ranks = 1);

// ---------------------------------------------------------------------------------------
// Sizes

// "80GiB", "80 GB", "512MiB", "1.5TiB", "4096B" -> bytes. Units: B, KB, MB, GB, TB
// (powers of 1000), KiB, MiB, GiB, TiB (powers of 1024); case-insensitive. The unit is
// required: a bare number ("80") throws, suggesting "80GiB" and "80GB".
// Throws Error(kInvalidArgument) naming the text.
uint64_t ParseBytes(std::string_view text);
// "8e9", "8.03e9", "8B", "7.5B", "125M", "1T", "1000" -> a count (K, M, B/G, T suffixes).
// Without a suffix the number must be whole ("8.5" throws); with one it is rounded to the
// nearest integer. Throws Error(kInvalidArgument) naming the text.
uint64_t ParseCount(std::string_view text);
double ToGiB(uint64_t bytes);

// ---------------------------------------------------------------------------------------
// The plan

// Where the memory goes, in bytes, for one GPU or one rank's share of the host.
struct MemoryBreakdown {
  uint64_t weights = 0;     // model parameters: all of them, or rank 0's FSDP2 shards
  uint64_t master = 0;      // master copies that do not alias the weights
  uint64_t correction = 0;  // ecc8 / ecc16 arrays
  uint64_t moments = 0;     // first and second moments (codes or fp32)
  uint64_t scales = 0;      // q8 group scales
  // All gradients (rank 0's shards under FSDP2), or the largest layer's with gradient
  // release.
  uint64_t gradients = 0;
  // FSDP2 only: the all-gathered parameters and unsharded gradients of the units in
  // flight during forward and backward (Fsdp2UnshardedBytes; docs/planner.md "FSDP2").
  uint64_t unsharded = 0;
  // Host: pinned pipeline slots of the host-computed elements. GPU: the streaming slots
  // when any element is streamed (stream_slots x the largest chunk, at most
  // stream_chunk_bytes each).
  uint64_t staging = 0;
  uint64_t activations = 0;  // kept for backward
  uint64_t metadata = 0;     // kernel tables, reduction scratch
  uint64_t speculation = 0;  // backup of the offloaded state (speculative early start)
  // GPU: what the process holds beyond its tensors, as the driver counts it: the CUDA
  // context and the caching allocator's rounding and fragmentation (RuntimeBytes).
  uint64_t runtime = 0;
  uint64_t total() const;
};

// The GPU memory a training process holds beyond the tensors the plan counts
// (MemoryBreakdown::runtime), so that the plan's GPU figure is what the driver reports at
// the peak, measured on an H200 with torch 2.11 and transformers 5 (bench/fit_matrix.py:
// the driver's used memory less torch's reserved peak, and torch's reserved less its
// allocated peak; docs/planner.md "Runtime"):
// the CUDA context with cuBLAS's workspaces and the loaded kernels, per GPU (1.48 to
// 1.57 GiB measured);
inline constexpr uint64_t kCudaContextBytes = uint64_t{1600} << 20;  // 1.56 GiB
// each tensor the caching allocator hands out rounded up to its 512-byte blocks (the
// weights and gradients: their tensor count);
inline constexpr uint64_t kAllocatorRoundBytes = 512;
// and the blocks cached but not reusable at the peak: a share of the activations, whose
// sizes change through the iteration while the weights and optimizer state stay put
// (reserved less allocated at the peak: 0.90 GiB beside 3.5 GiB of activations at seq
// 2048, 1.62 beside 6.9 at 4096: Llama-3-8B shapes, fraction 1, gradient release).
inline constexpr double kAllocatorFragmentation = 0.25;

// The planner's choice between two settings: kOff, kOn, or kAuto (the plan picks, point by
// point, what fits and runs faster).
enum class Choice : uint8_t { kOff = 0, kOn = 1, kAuto = 2 };
const char* Name(Choice c) noexcept;        // "off", "on", "auto"
Choice ParseChoice(std::string_view s);     // throws Error(kInvalidArgument)

// A speculation budget the plan chooses (PlanInputs::speculative_host_bytes, ...).
inline constexpr uint64_t kAutoBytes = ~uint64_t{0};

enum class Stage : uint8_t { kGpu = 0, kD2H = 1, kHost = 2, kH2D = 3 };
const char* Name(Stage s) noexcept;  // "gpu", "d2h", "host", "h2d"

// Predicted optimizer step of one rank (docs/planner.md "Step time").
struct StepTime {
  // gpu: the fused kernel over the GPU-resident and streamed elements; d2h, h2d: PCIe
  // (gradients down and parameters up of the host-computed elements, state both ways of
  // the streamed ones); host: the host kernels with their per-chunk overhead.
  double prepass_ms = 0, gpu_ms = 0, d2h_ms = 0, host_ms = 0, h2d_ms = 0, fill_ms = 0;
  // The fixed per-step cost of the profile (Note [Fixed step cost]) at this rank's tensor
  // count: the engine's and the binding's parts (0 where the profile lacks one).
  double engine_overhead_ms = 0, binding_overhead_ms = 0;
  // The host-resident classes: the streamed chunks' chain (state up, kernel, state down)
  // and then the host pipeline's (gradient down, host kernel, parameter up), each its
  // slowest stage plus one chunk of the others (its fill).
  double pipeline_ms = 0;
  // prepass + max(gpu, pipeline) + engine_overhead + binding_overhead
  double step_ms = 0;
  Stage bottleneck = Stage::kGpu;
  // The compute split (Note [Three placement classes] in tandem/compute_split.h): of the
  // host-resident elements, `streamed` are computed on the GPU; split.share is their
  // share and split's terms are tandem::PredictSplit's at it (no prepass, fill or chunk
  // overhead). All zero without host-resident elements.
  uint64_t streamed = 0;
  ComputeSplit split;
};

// One training iteration of one rank (docs/planner.md "Iteration"): forward and backward
// from the profile's training throughput, then what of the optimizer step is exposed
// after backward (Note [What backward hides] in planner/overlap.cc).
struct IterationTime {
  bool modelled = false;  // the model has a transformer shape and --seq was given
  double forward_ms = 0, backward_ms = 0;
  // Offload work handed to the engine during backward (speculated chunks, gradient
  // downloads), the part of it still running when backward ends, and the work Step does.
  double during_backward_ms = 0, backlog_ms = 0, at_step_ms = 0;
  // After backward until the parameters are final: when speculation commits (or none is
  // planned), and when it is rolled back (clipping triggers, a non-finite gradient):
  // everything at Step, plus restoring the backups.
  double exposed_ms = 0, exposed_abort_ms = 0;
  double iteration_ms = 0, iteration_abort_ms = 0;  // forward + backward + exposed
  double tokens_per_s = 0;  // per GPU, when speculation commits
  double mfu = 0;           // model FLOPs / (iteration x peak), when speculation commits
};

struct PlanInputs {
  ModelDescription model;
  uint64_t gpu_budget = 0;   // bytes per GPU, > 0
  uint64_t host_budget = 0;  // bytes of host memory per node, > 0
  // GPU memory kept free for what the plan does not count (NCCL's buffers, other
  // processes, the estimates' error; the CUDA context and the caching allocator are
  // MemoryBreakdown::runtime): the plan fits into
  // gpu_budget * (1 - gpu_headroom_fraction) - gpu_headroom_bytes (UsableGpuBytes).
  // Default 5% (the runtime is counted apart, as measured); fraction in [0, 1).
  double gpu_headroom_fraction = 0.05;
  uint64_t gpu_headroom_bytes = 0;
  // Activations per GPU: given in bytes when activation_bytes_given, else estimated from
  // `activation_shape` (its hidden/layers/heads/vocab default to the model's when 0) if
  // activation_shape.seq_len > 0, else 0, with `activation_model` (kAuto: transformers'
  // for a model read from a transformers config, Megatron's otherwise).
  bool activation_bytes_given = false;
  uint64_t activation_bytes = 0;
  ActivationShape activation_shape;
  Recompute recompute = Recompute::kNone;
  ActivationModel activation_model = ActivationModel::kAuto;
  // The GPU's runtime bytes (MemoryBreakdown::runtime): the CUDA context's, the
  // allocator's rounding of each tensor and its share of the activations. Defaults: the
  // estimates above; all 0 leaves the runtime out.
  uint64_t cuda_context_bytes = kCudaContextBytes;
  uint64_t allocator_round_bytes = kAllocatorRoundBytes;
  double allocator_fragmentation = kAllocatorFragmentation;
  // With gradient release: the most bytes of handed-over gradients the GPU keeps while
  // the link takes them down (tandem.torch's grads_in_flight_bytes, Note [Gradients in
  // flight] in python/tandem/_grads.py): bounds the gradients waiting behind the link.
  uint64_t grads_in_flight_bytes = uint64_t{1} << 30;

  Algorithm algorithm = Algorithm::kAdamW;
  HyperParams hyper;  // only momentum matters (SGD keeps a buffer iff momentum > 0)
  StateFormats formats{MasterFormat::kBF16Ecc8, MomentFormat::kQ8, MomentFormat::kQ8};
  DType param_dtype = DType::kBF16;
  DType grad_dtype = DType::kBF16;
  // Gradient release (OptimizerConfig::release_grads; tandem.torch release_grads=True;
  // docs/planner.md "Gradient release"): each gradient is handed to the engine as it is
  // final in backward and its GPU memory given back once the engine has taken it: the
  // GPU-resident part copied into an engine buffer, the offloaded part downloaded into a
  // pinned host gradient area; streamed chunks take their gradient up again at Step.
  // kOff keeps every gradient on the GPU until Step(); kAuto picks per point.
  Choice grad_release = Choice::kOff;
  // A what-if the engine cannot run in this version (the plan says "not available in this
  // version" wherever it mentions it; tandem-plan refuses it): optimizer state divided
  // among the ranks, weights and gradients whole (ShardSpecs). Superseded by fsdp2, which
  // the engine runs; not with fsdp2.
  bool zero1_sharding = false;
  // FSDP2 (`fully_shard` on each transformer block, then on the root; tandem.torch over
  // the DTensor parameters; docs/distributed.md). Every tensor is sharded along
  // dimension 0 over `shard_size` ranks: rank 0 holds ceil(rows / shard_size) rows, the
  // largest shard, and its optimizer holds state for those rows only. Weights and
  // gradients are rank 0's shards, plus the unsharded working set of
  // `fsdp2_blocks_in_flight` blocks and the root unit (MemoryBreakdown::unsharded). q8
  // moments of tensors whose shape is 1-D or whose last dimension is not a multiple of
  // 32 are f32 (the shard-safe group rule). Default false: every rank holds the whole
  // model and the whole optimizer state (plain data parallelism).
  bool fsdp2 = false;
  // Ranks each tensor is sharded over: 0 (default) = all ranks (FSDP); a divisor of the
  // rank count for HSDP (ranks / shard_size replicas). Only with fsdp2.
  uint32_t shard_size = 0;
  // Blocks whose parameters are all-gathered (and, in backward, whose gradients are
  // unsharded) at the same time: the one computing and the one prefetched or being
  // reduce-scattered. Default 2; >= 1. Only with fsdp2.
  uint32_t fsdp2_blocks_in_flight = 2;
  PlacementPolicy placement = PlacementPolicy::kBackwardOrder;
  uint64_t chunk_elements = 1 << 21;  // as OptimizerConfig
  int pipeline_slots = 4;             // as OptimizerConfig
  // Where the host-resident elements are computed, as OptimizerConfig::offload_compute:
  // kOffloadComputeAuto (default: the share tandem::ChooseSplit picks for the profile's
  // rates, MachineRatesFor, at each fraction), 0 (host: the plan of versions before the
  // three classes, figure for figure), 1 (gpu) or a share in between; text forms through
  // tandem::ParseOffloadCompute. Streamed elements keep their state in host memory less
  // the master's part that aliases the parameter; the GPU then holds stream_slots slots
  // of up to stream_chunk_bytes (MemoryBreakdown::staging on the GPU side). Memory comes
  // from tandem::PredictMemory with offload_compute set to the resolved share.
  double offload_compute = kOffloadComputeAuto;
  uint64_t stream_chunk_bytes = uint64_t{32} << 20;  // as OptimizerConfig; >= 4096
  int stream_slots = 3;                              // as OptimizerConfig; >= 2
  // Speculative early start (OptimizerConfig::speculative_early_start, BeginStep before
  // backward): offloaded state is updated during backward as its gradients arrive and
  // kept when the step commits. What a rollback restores is backed up in pinned memory,
  // and a streamed chunk's new parameters wait on the GPU, within two budgets per rank:
  // bytes of host-computed state (speculative_host_bytes) and of streamed state
  // (speculative_stream_bytes, OptimizerConfig's). kAutoBytes: with an iteration model
  // (--seq), the most that fit the memory left and that backward can cover; without one,
  // the engine's defaults (all host-computed state; 1 GiB streamed).
  bool speculative_early_start = false;
  uint64_t speculative_host_bytes = kAutoBytes;
  uint64_t speculative_stream_bytes = kAutoBytes;
  // With release and speculation: OptimizerConfig::in_place_grad_bytes (the handed-over
  // gradients kept on the GPU for speculative kernels to read in place): that many bytes'
  // elements of the speculated ones skip the gradient's upload (Note [What backward
  // hides], planner/overlap.cc). 0: none.
  uint64_t in_place_grad_bytes = 0;
  // The offload fraction to plan at, in [0, 1] (a run's own, to predict it); negative
  // (default): the plan chooses the fastest that fits.
  double fraction = -1;
  uint32_t gpus_per_node = 1;                        // >= 1
  uint32_t nodes = 1;                                // >= 1
  Profile profile = DefaultProfile();
};

// The plan at one offload fraction.
struct FractionPoint {
  double fraction = 0;
  uint64_t hot_elements = 0, cold_elements = 0;  // of rank 0's tensors (ShardSpecs)
  MemoryBreakdown gpu;                           // one GPU
  MemoryBreakdown host;                          // one rank's host memory
  uint64_t host_node_bytes = 0;                  // host.total() * gpus_per_node
  bool fits_gpu = false, fits_host = false;
  StepTime time;
  // offload_compute auto only: its share would stream, but the GPU budget cannot hold the
  // stream slots too while computing on the host fits, so this point computes every
  // offloaded element on the host (time.split.share 0). The engine's auto looks at time
  // alone: such a plan runs with offload_compute 0 ("host").
  bool split_fallback = false;
  // The share is the one offload_compute resolves to (auto: what the engine's auto picks);
  // false when the plan chose another share for a faster iteration.
  bool share_as_asked = true;
  // Gradient release at this point (PlanInputs::grad_release, resolved).
  bool grad_release = false;
  // Elements of rank 0 whose update speculation runs during backward, by class.
  uint64_t speculated_host = 0, speculated_streamed = 0;
  // With speculation, its budgets as the engine takes them (OptimizerConfig): the
  // host-computed state's backups (every host-computed chunk when
  // speculated_host == the point's host-computed elements) and the streamed chunks'
  // spares, in bytes per rank.
  uint64_t speculative_host_bytes = 0, speculative_stream_bytes = 0;
  IterationTime iteration;
};

// One keyword argument of tandem.torch's optimizer, typed as Python and JSON take it.
struct OptimizerKwarg {
  enum class Kind { kBool, kInteger, kNumber, kString };
  std::string name;
  Kind kind = Kind::kInteger;
  bool boolean = false;
  uint64_t integer = 0;
  double number = 0;
  std::string text;
  std::string Python() const;  // True, 14403780608, 0.2698, "gpu"
};
// The keyword arguments of tandem.torch's optimizer (class OptimizerClassName) that run
// `point` of a plan made from `in`: offload_fraction, offload_compute (the point's share,
// named "gpu" or "host" at 1 or 0), the state formats, release_grads and, with
// speculation, speculative_early_start, its two budgets and in_place_grad_bytes
// (docs/planner.md "Running the plan").
std::vector<OptimizerKwarg> OptimizerKwargs(const PlanInputs& in, const FractionPoint& point);
const char* OptimizerClassName(Algorithm algorithm) noexcept;  // "AdamW", "Adam", "Lion", "SGD"

// Element rates used by the step-time model, with where each came from.
struct Rates {
  double gpu_gparams_per_s = 0, host_gparams_per_s = 0;  // host: this rank's share
  std::string gpu_source, host_source;  // "measured <key>" or "roofline ... at NN% ..."
  double gpu_bytes_per_element = 0, host_bytes_per_element = 0;
  // The compute-split model's rates for this rank (MachineRatesFor, the host's share
  // divided among the node's ranks) and where the PCIe and host figures came from.
  MachineRates machine;
  std::string pcie_source, host_dma_source;
  // Host DRAM under every rank's DMA (Profile::Host::dram_gbps, else the triad), GB/s,
  // and where it came from.
  double dram_gbps = 0;
  std::string dram_source;
  // The gradient pre-pass (1e9 elements per second) and where it came from.
  double prepass_gparams_per_s = 0;
  std::string prepass_source;
  // Where the fixed per-step cost came from (Note [Fixed step cost]), one text per part:
  // "measured: 1.20 ms + 4.0 us x tensors" or "not in the profile: counted as 0".
  std::string engine_overhead_source, binding_overhead_source;
  // Host-resident state bytes of one streamed element, each way (its master less the part
  // that aliases the parameter, plus the moments and scales): 3.125 for AdamW
  // bf16+ecc8/q8/q8 with bf16 parameters.
  double stream_bytes_per_element = 0;
};

struct PlanResult {
  bool feasible = false;
  // Smallest fraction (multiple of 1e-4) at which the GPU budget holds; -1 if none.
  double min_fraction = -1;
  // Largest fraction (multiple of 1e-4) at which the host budget holds; -1 if none.
  double max_host_fraction = -1;
  FractionPoint recommended;         // the fastest point that fits both (valid if feasible)
  std::vector<FractionPoint> sweep;  // fractions 0, 1/16, ..., 1
  // GPU bytes (less the streaming slots) non-increasing and host bytes non-decreasing on
  // the sweep.
  bool monotone = true;
  uint64_t gpu_short_bytes = 0;       // > 0: GPU budget short by this much even at fraction 1
  uint64_t host_short_bytes = 0;      // > 0: host budget short by this much at min_fraction
  std::vector<std::string> messages;  // the verdict, then warnings
  Rates rates;
  uint64_t ranks = 1;
  uint64_t shard_elements = 0;  // rank 0's optimizer state elements (all without sharding)
  uint64_t shard_size = 1;      // ranks a tensor is sharded over (FSDP2, ZeRO-1), else 1
  // Whether the engine of this version runs this plan: false with the ZeRO-1 what-if
  // (zero1_sharding). Gradient release and early start, FSDP2's too, run through the C++
  // API and tandem._C; tandem.torch does not hand FSDP2 gradients over during backward
  // yet (the verdict message says so).
  bool runnable = true;
  // FSDP2: tensors whose q8 moments the shard-safe group rule keeps in f32, and their
  // rank-0 elements.
  uint64_t f32_moment_tensors = 0, f32_moment_elements = 0;
  uint64_t usable_gpu_bytes = 0;  // UsableGpuBytes(inputs)
  uint64_t activation_bytes = 0;
  // The activation model the estimate used (inputs.activation_model resolved; kMegatron
  // also when the bytes were given or not estimated) and, for kTransformers, its phases.
  ActivationModel activation_model = ActivationModel::kMegatron;
  TransformersActivations transformers_activations;
  // When the plan does not fit: what would, each computed by the planner (gradient
  // release, activation checkpointing, a shorter sequence, a smaller micro-batch, more
  // host memory), one sentence each; also in `messages`.
  std::vector<std::string> would_fit;
  // The iteration model's inputs: the FLOPs of one GPU's micro-batch, the training
  // throughput and the peak (profile or built-in), with where they came from.
  bool iteration_modelled = false;
  std::string iteration_note;  // why not, when not
  TrainingFlops flops;
  double train_tflops = 0, peak_tflops = 0;
  std::string train_source, peak_source;
  // The recommended point's GPU bytes with and without gradient release (same fraction
  // and share): what release saves.
  uint64_t gpu_bytes_with_release = 0, gpu_bytes_without_release = 0;
  PlanInputs inputs;
};

// The GPU bytes a plan may use: the budget less the headroom (0 if the headroom exceeds
// it). Throws Error(kInvalidArgument) if gpu_headroom_fraction is not in [0, 1).
uint64_t UsableGpuBytes(const PlanInputs& inputs);

// The runtime bytes of one GPU (MemoryBreakdown::runtime): inputs.cuda_context_bytes + 2 x
// the model's tensors x inputs.allocator_round_bytes (weights and gradients) +
// inputs.allocator_fragmentation x `activation_bytes`.
uint64_t RuntimeBytes(const PlanInputs& inputs, uint64_t activation_bytes);

// Builds the plan. Optimizer-state and staging bytes come from tandem::PredictMemory on
// rank 0's tensors (the whole model; its FSDP2 shards with fsdp2, with the group rule's
// f32 moments; its ZeRO-1 shard with the zero1_sharding what-if), so they equal what
// HybridOptimizer::memory() would report there. messages: the
// verdict, then notes (headroom, what-ifs, FSDP2, the model's notes, the profile).
// Throws Error(kInvalidArgument) for bad inputs (empty model, zero budgets, bad shapes;
// fsdp2 with zero1_sharding; a shard_size without fsdp2 or
// that does not divide the ranks; a tensor shape whose product is not its numel).
PlanResult MakePlan(const PlanInputs& inputs);

// The same plan evaluated at one fraction in [0, 1].
FractionPoint EvaluateFraction(const PlanInputs& inputs, double fraction);

// Predicted step time of one rank with `hot` elements on the GPU and `cold` on the host,
// `streamed` (<= cold) of which the GPU computes (docs/planner.md "Step time"); with
// `release` (gradient release) the streamed chunks take their gradients up again.
StepTime PredictStepTime(const PlanInputs& inputs, const Rates& rates, uint64_t hot, uint64_t cold,
                         uint64_t shard_elements, uint64_t streamed = 0, bool release = false);
// The compute share inputs.offload_compute asks for with `hot` and `cold` elements: the
// share itself, or (auto) tandem::ChooseSplit's for rates.machine.
double ResolveComputeShare(const PlanInputs& inputs, const Rates& rates, uint64_t hot,
                           uint64_t cold, bool release = false);
// Kernel rates for `inputs` from its profile: measured keys, else rooflines.
Rates ResolveRates(const PlanInputs& inputs);

// Renderings of a plan: a text report (tables and verdict), JSON, and an SVG chart.
std::string PlanToText(const PlanResult& plan);
std::string PlanToJson(const PlanResult& plan);
std::string PlanToSvg(const PlanResult& plan);

// Whether any offload fraction fits both budgets (MakePlan(inputs).feasible, without the
// step and iteration search). Throws as MakePlan.
bool PlanFits(const PlanInputs& inputs);

// ---------------------------------------------------------------------------------------
// The largest model that fits (docs/planner.md "The largest model")

// For one width of the Llama-3 family: the most layers that fit and its plan.
struct LargestRow {
  std::string shape;              // the preset whose width it is ("llama3-70b")
  uint64_t published_layers = 0;  // the preset's own depth
  uint64_t layers = 0;            // the most that fit, up to twice published_layers; 0: none
  uint64_t params = 0;            // of the model with `layers` layers
  bool published_fits = false;    // the preset itself fits
  PlanResult plan;                // with `layers` layers (feasible), or one (not)
};
struct LargestResult {
  std::vector<LargestRow> rows;  // narrowest first
  int best = -1;                 // the row with the most parameters that fit; -1: none fits
  PlanInputs inputs;
};
// For each preset width (hidden size, heads, FFN and vocabulary of Llama-3 1B, 3B, 8B,
// 70B and 405B), the most decoder layers with which `inputs` (its model ignored) fits
// its budgets: found by bisection on PlanFits, each plan then made in full. Throws as
// MakePlan.
LargestResult FindLargest(const PlanInputs& inputs);
std::string LargestToText(const LargestResult& result);
std::string LargestToJson(const LargestResult& result);

}  // namespace tandem::planner
