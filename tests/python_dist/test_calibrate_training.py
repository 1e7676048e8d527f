"""tandem.calibrate_training: a forward and backward of the model's own layer shapes, timed,
written into a profile as gpu.train_tflops, which the plan's iteration then uses
(docs/planner.md "Iteration"). Runs on the CPU here; the figure it writes is the CPU's."""

import json

import pytest
import torch

import tandem

TINY_LLAMA = dict(architectures=["LlamaForCausalLM"], model_type="llama", hidden_size=64,
                  intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
                  num_key_value_heads=2, vocab_size=256, tie_word_embeddings=False)
PROFILE = {"schema": "tandem-profile/1", "machine": "box", "gpu": {"hbm_copy_gbps": 4000},
           "host": {"triad_gbps": 100},
           "pcie": {"h2d_gbps": 55, "d2h_gbps": 54, "bidir_gbps": 100}}


def test_measures_and_writes_the_training_throughput(tmp_path):
    path = tmp_path / "p.json"
    path.write_text(json.dumps(PROFILE))
    r = tandem.calibrate_training(path, model=TINY_LLAMA, layers=1, seq=16, steps=2,
                                  device="cpu", peak_tflops=989)
    assert r["layers"] == 1 and r["seq"] == 16 and r["recompute"] == "full"
    assert r["ms"] > 0 and r["hardware_flops"] > 0
    assert r["train_tflops"] == pytest.approx(r["hardware_flops"] / (r["ms"] * 1e-3) / 1e12)
    data = json.loads(path.read_text())
    assert data["gpu"]["train_tflops"] == r["train_tflops"]
    assert data["gpu"]["peak_tflops"] == 989
    assert data["pcie"] == PROFILE["pcie"]  # the rest kept
    p = tandem.plan(TINY_LLAMA, gpu_mem="80GB", host_mem="64GiB", seq=16,
                    recompute="full", profile=str(path))
    assert p.iteration is not None
    assert "measured" in p.text


def test_bad_arguments_change_nothing(tmp_path):
    path = tmp_path / "p.json"
    path.write_text(json.dumps(PROFILE))
    with pytest.raises(ValueError, match='recompute must be "full" or "none"'):
        tandem.calibrate_training(path, model=TINY_LLAMA, recompute="selective", device="cpu")
    with pytest.raises(ValueError, match="must be integers >= 1"):
        tandem.calibrate_training(path, model=TINY_LLAMA, layers=0, device="cpu")
    with pytest.raises(ValueError, match="peak_tflops must be a number > 0"):
        tandem.calibrate_training(path, model=TINY_LLAMA, peak_tflops=0, device="cpu")
    assert json.loads(path.read_text()) == PROFILE
    assert torch.nn.RMSNorm  # what the timed decoder is built of
