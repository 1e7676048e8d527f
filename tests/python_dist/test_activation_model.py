"""tandem.plan on a live transformers model (docs/planner.md "Activations" and "From
Python"): it reads the model's own config, its activation estimate matches the peak of
live tensor bytes of a traced training iteration (bench/activation_trace.py) within the
stated tolerance, with and without gradient checkpointing, and it plans the dtype the
model will train in. Tiny configs on the CPU: seconds."""

import importlib.util
import os
import sys

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")
tandem = pytest.importorskip("tandem")

BENCH = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "bench")


def _load(name):
    spec = importlib.util.spec_from_file_location(name, os.path.join(BENCH, name + ".py"))
    module = importlib.util.module_from_spec(spec)
    sys.path.insert(0, BENCH)
    try:
        spec.loader.exec_module(module)
    finally:
        sys.path.remove(BENCH)
    return module


check = _load("activation_check")

# The planner's estimate over the traced peak: never under by more than 1%, at most 6% over
# (docs/planner.md "Activations": the formula is exact where a phase's tensors are fixed,
# conservative where its temporaries vary).
UNDER, OVER = 0.99, 1.06

# Small vocabularies put the peak in a layer's backward (with checkpointing: the layer
# rebuilt), large ones in the loss's; Gemma 2 runs eager attention, Gemma 3 SDPA with a
# sliding-window mask (window 256 <= seq).
CASES = [check.case(f, 128, 512, 2, 4, 2, 32, 256, 256, c)
         for f in ("llama", "qwen2", "gemma3") for c in check.CHECKPOINTING]
CASES += [check.case(f, 128, 344, 2, 4, 2, 32, 2048, 256, "none") for f in ("llama", "gemma2")]
CASES += [check.case("gemma2", 128, 344, 2, 4, 2, 32, 256, 256, "reentrant")]


@pytest.mark.parametrize("c", CASES, ids=lambda c: "%s-V%d-%s" % (
    c["family"], c["vocab"], c["checkpointing"]))
def test_estimate_matches_the_traced_peak(c):
    row = check.run_case(c, "cpu")
    assert UNDER <= row["ratio"] <= OVER, (
        "%s: planned %d bytes, measured %d (ratio %.4f, phase %s)" % (
            c, row["planned"], row["measured"], row["ratio"], row["phase"]))


def _llama(**extra):
    config = transformers.LlamaConfig(hidden_size=128, intermediate_size=344,
                                      num_hidden_layers=2, num_attention_heads=4,
                                      num_key_value_heads=2, vocab_size=1024, **extra)
    return config


def test_a_live_model_is_planned_from_its_config():
    model = transformers.LlamaForCausalLM(_llama()).to(torch.bfloat16)
    p = tandem.plan(model, gpu_mem="8GiB", host_mem="16GiB", seq=512)
    assert p.data["activations"]["model"] == "transformers"
    assert p.data["model"]["architecture"] == "llama"
    assert p.data["model"]["params"] == sum(x.numel() for x in model.parameters())
    assert p.data["optimizer"]["param_dtype"] == "bf16"
    assert "--config" in p.args and "--params-json" in p.args
    # Gradient checkpointing enabled on the module is what the plan assumes, and says.
    model.gradient_checkpointing_enable()
    q = tandem.plan(model, gpu_mem="8GiB", host_mem="16GiB", seq=512)
    assert q.data["activations"]["recompute"] == "full"
    assert q.data["activations"]["bytes"] < p.data["activations"]["bytes"]
    assert "model.gradient_checkpointing_enable()" in q.text


def test_meta_module_is_planned_in_its_config_dtype():
    with torch.device("meta"):
        model = transformers.LlamaForCausalLM(_llama(dtype="bfloat16"))
    assert next(model.parameters()).dtype == torch.float32
    p = tandem.plan(model, gpu_mem="8GiB", host_mem="16GiB", seq=256)
    assert p.data["optimizer"]["param_dtype"] == "bf16"
    assert any("meta device: planned in bfloat16, its config's dtype" in m
               for m in p.data["messages"])
    # Without a dtype in the config: bf16, said so.
    with torch.device("meta"):
        bare = transformers.LlamaForCausalLM(_llama())
    q = tandem.plan(bare, gpu_mem="8GiB", host_mem="16GiB")
    assert q.data["optimizer"]["param_dtype"] == "bf16"
    assert "as its config names no dtype" in q.text


def test_fp32_module_with_a_bf16_config_says_how_to_plan_the_cast():
    model = transformers.LlamaForCausalLM(_llama(dtype="bfloat16")).float()
    p = tandem.plan(model, gpu_mem="8GiB", host_mem="16GiB", seq=256)
    assert p.data["optimizer"]["param_dtype"] == "f32"
    assert ("note: the module is float32, its config bfloat16: planned in float32; pass "
            "param_dtype='bf16' if you cast it before training") in p.text
    # An explicit param_dtype wins, and there is nothing to say.
    q = tandem.plan(model, gpu_mem="8GiB", host_mem="16GiB", seq=256, param_dtype="bf16",
                    grad_dtype="bf16")
    assert q.data["optimizer"]["param_dtype"] == "bf16"
    assert "its config bfloat16" not in q.text
    assert q.data["activations"]["bytes"] < p.data["activations"]["bytes"]


def test_gemma3_multimodal_config_plans_its_language_model():
    config = transformers.Gemma3Config(
        text_config=dict(hidden_size=128, intermediate_size=344, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=2, head_dim=32,
                         vocab_size=1024),
        vision_config=dict(hidden_size=64, intermediate_size=128, num_hidden_layers=1,
                           num_attention_heads=2))
    p = tandem.plan(config, gpu_mem="8GiB", host_mem="16GiB", seq=256)
    assert p.data["model"]["architecture"] == "gemma3"
    assert p.data["activations"]["model"] == "transformers"
    assert "vision tower" in p.text


def test_a_family_the_planner_does_not_read_is_planned_from_its_parameters():
    config = transformers.GPTNeoXConfig(hidden_size=64, intermediate_size=128,
                                        num_hidden_layers=2, num_attention_heads=4,
                                        vocab_size=256)
    model = transformers.GPTNeoXForCausalLM(config)
    p = tandem.plan(model, gpu_mem="8GiB", host_mem="16GiB")
    assert p.feasible
    assert p.data["model"]["params"] == sum(x.numel() for x in model.parameters())
    assert "its config is not of a family the planner reads (GPTNeoXForCausalLM)" in p.text \
        or "(gpt_neox)" in p.text
    assert "--config" not in p.args
