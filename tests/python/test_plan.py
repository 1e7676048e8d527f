"""tandem.plan: the planner from Python on a live module, a config, a preset and a count;
the same plan as tandem-plan's for the same tensors; errors as ValueError."""

import json

import pytest
import torch

import tandem


def llama_like(layers=2, dim=256, hidden=688, vocab=1000):
    blocks = []
    for _ in range(layers):
        blocks += [torch.nn.Linear(dim, 3 * dim, bias=False), torch.nn.Linear(dim, dim, bias=False),
                   torch.nn.Linear(dim, 2 * hidden, bias=False),
                   torch.nn.Linear(hidden, dim, bias=False), torch.nn.LayerNorm(dim)]
    return torch.nn.Sequential(torch.nn.Embedding(vocab, dim), *blocks,
                               torch.nn.Linear(dim, vocab, bias=False))


def test_a_live_module():
    model = llama_like()
    p = tandem.plan(model, gpu_mem="1GiB", host_mem="8GiB")
    assert p.feasible and p.fraction == 0.0
    n = sum(t.numel() for t in model.parameters())
    assert p.data["model"]["params"] == n
    assert "Sequential.params.json" in p.text
    assert repr(p).startswith("<tandem.Plan fits")


def test_frozen_and_shared_parameters_are_left_out_once():
    model = llama_like()
    model[0].weight.requires_grad_(False)
    model[-1].weight = model[1].weight  # tied: counted once
    p = tandem.plan(model, gpu_mem="1GiB", host_mem="8GiB")
    trainable = {id(t): t.numel() for t in model.parameters() if t.requires_grad}
    assert p.data["model"]["params"] == sum(trainable.values())


def test_a_small_gpu_offloads_and_a_tiny_one_does_not_fit():
    model = llama_like(layers=8, dim=512, hidden=1376, vocab=32000)  # 58M fp32 params
    # Weights and gradients take 443 MiB; the state at fraction 0 another ~180 MiB.
    p = tandem.plan(model, gpu_mem="520MiB", host_mem="8GiB", headroom="0%")
    assert p.feasible and 0.0 < p.fraction <= 1.0
    tiny = tandem.plan(model, gpu_mem="1MiB", host_mem="8GiB")
    assert not tiny.feasible and tiny.fraction is None


def test_the_same_plan_as_the_command_line(tmp_path):
    p = tandem.plan("llama3-8b", gpu_mem="40GiB", host_mem="512GiB", seq=2048,
                    recompute="full")
    rc, out, _ = tandem._C.plan_cli(["--model", "llama3-8b", "--gpu-mem", "40GiB",
                                     "--host-mem", "512GiB", "--seq", "2048", "--recompute",
                                     "full", "--json"])
    assert rc in (0, 1) and json.loads(out) == p.data
    assert p.args[:2] == ["--model", "llama3-8b"]


def test_configs_counts_and_fsdp2():
    config = {"model_type": "llama", "hidden_size": 512, "intermediate_size": 1376,
              "num_hidden_layers": 4, "num_attention_heads": 8, "num_key_value_heads": 8,
              "vocab_size": 32000, "tie_word_embeddings": False}
    p = tandem.plan(config, gpu_mem="1GiB", host_mem="8GiB")
    assert p.feasible
    assert tandem.plan(7_000_000, gpu_mem="1GiB", host_mem="8GiB").feasible
    sharded = tandem.plan("llama3-70b", gpu_mem="80GiB", host_mem="1TiB", fsdp2=True,
                          gpus_per_node=8, seq=4096, recompute="full")
    assert sharded.data["fsdp2"] is not None


def test_bad_input_is_a_value_error_with_the_planners_message():
    with pytest.raises(ValueError, match="no unit"):
        tandem.plan(7_000_000, gpu_mem="80", host_mem="8GiB")
    with pytest.raises(ValueError, match="gpu_mem must be positive"):
        tandem.plan(7_000_000, gpu_mem=0, host_mem="8GiB")
    with pytest.raises(ValueError, match="model must be"):
        tandem.plan(object(), gpu_mem="1GiB", host_mem="8GiB")
    with pytest.raises(ValueError, match="speculative|fsdp2|shard"):
        tandem.plan(7_000_000, gpu_mem="1GiB", host_mem="8GiB", shard_size=2)
