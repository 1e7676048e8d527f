"""(d) state_dict / load_state_dict: bit-identical round trip and continued training."""

import io

import pytest
import torch

import tandem._C
import tandem.torch
from helpers import batches, make_mlp, params_bits, same_bits, train
from test_exact import same_state


@pytest.mark.parametrize("formats", [
    dict(master="f32", momentum="f32", variance="f32"),
    dict(master="bf16+ecc8", momentum="q8", variance="q8"),
])
def test_round_trip_then_identical_training(formats):
    data = batches(20, seed=12)
    model_a = make_mlp(seed=1)
    opt_a = tandem.torch.AdamW(model_a.parameters(), lr=5e-3, offload_fraction=0.5,
                               chunk_elements=64, **formats)
    sched_a = torch.optim.lr_scheduler.StepLR(opt_a, step_size=4, gamma=0.7)
    train(model_a, opt_a, data[:10], sched_a)

    buf = io.BytesIO()
    torch.save({"opt": opt_a.state_dict(), "sched": sched_a.state_dict()}, buf)
    buf.seek(0)
    saved = torch.load(buf)

    # A different model and optimizer (other fraction and chunking) take the state; the
    # parameters come from the restored masters.
    model_b = make_mlp(seed=2)
    opt_b = tandem.torch.AdamW(model_b.parameters(), lr=1.0, offload_fraction=1.0,
                               chunk_elements=32, **formats)
    sched_b = torch.optim.lr_scheduler.StepLR(opt_b, step_size=4, gamma=0.7)
    opt_b.load_state_dict(saved["opt"])
    sched_b.load_state_dict(saved["sched"])
    assert same_bits(params_bits(model_b), params_bits(model_a))
    assert same_state(opt_b.state_dict(), opt_a.state_dict())
    assert opt_b.param_groups[0]["lr"] == opt_a.param_groups[0]["lr"]
    assert opt_b.step_count == opt_a.step_count == 10

    losses_a = train(model_a, opt_a, data[10:], sched_a)
    losses_b = train(model_b, opt_b, data[10:], sched_b)
    assert losses_a == losses_b
    assert same_bits(params_bits(model_b), params_bits(model_a))
    assert same_state(opt_b.state_dict(), opt_a.state_dict())


def test_state_dict_layout():
    model = make_mlp()
    model[0].bias.requires_grad_(False)  # frozen: kept in param_groups, not stepped
    opt = tandem.torch.AdamW(model.parameters(), lr=1e-3, master="bf16+ecc8",
                             momentum="q8", variance="q8")
    sd = opt.state_dict()
    assert sd["param_groups"][0]["params"] == list(range(6))
    assert sorted(sd["state"]) == [0, 2, 3, 4, 5]
    s = sd["state"][0]
    assert s["master_bf16"].dtype == torch.bfloat16
    assert s["ecc8"].dtype == torch.int8 and s["m_codes"].dtype == torch.int8
    assert s["v_codes"].dtype == torch.uint8 and s["v_scales"].dtype == torch.bfloat16
    assert s["m_scales"].numel() == (model[0].weight.numel() + 31) // 32
    assert sd["tandem"]["master"] == "bf16+ecc8"


def test_load_mismatch_raises_and_changes_nothing():
    model = make_mlp()
    opt = tandem.torch.AdamW(model.parameters(), lr=1e-3)
    train(model, opt, batches(2))
    other = tandem.torch.AdamW(make_mlp().parameters(), lr=1e-3, master="bf16+ecc8")
    before = params_bits(model)
    with pytest.raises(ValueError, match="formats"):
        opt.load_state_dict(other.state_dict())
    assert same_bits(params_bits(model), before)
    # A torch.optim state dict goes through from_torch_state (test_torch_state.py); one
    # for other parameters is refused the same way.
    fewer = list(model.parameters())[:3]
    with pytest.raises(ValueError, match="params"):
        opt.load_state_dict(torch.optim.AdamW(fewer).state_dict())
    assert same_bits(params_bits(model), before)


@pytest.mark.skipif(not tandem._C.has_checkpoint, reason="built without checkpoint/")
def test_checkpoint_file_round_trip(tmp_path):
    data = batches(16, seed=21)
    model_a = make_mlp(seed=1)
    opt_a = tandem.torch.AdamW(model_a.parameters(), lr=5e-3, offload_fraction=0.5,
                               chunk_elements=64, master="bf16+ecc8", momentum="q8",
                               variance="q8")
    train(model_a, opt_a, data[:8])
    path = tmp_path / "opt.tckpt"
    opt_a.save_checkpoint(path, compression="auto")

    model_b = make_mlp(seed=2)
    opt_b = tandem.torch.AdamW(model_b.parameters(), lr=5e-3, offload_fraction=0.0,
                               master="bf16+ecc8", momentum="q8", variance="q8")
    opt_b.load_checkpoint(path)
    assert same_bits(params_bits(model_b), params_bits(model_a))
    assert same_state(opt_b.state_dict(), opt_a.state_dict())
    assert train(model_a, opt_a, data[8:]) == train(model_b, opt_b, data[8:])
    assert same_bits(params_bits(model_b), params_bits(model_a))

    raw = bytearray(path.read_bytes())
    raw[len(raw) // 2] ^= 0x40
    bad = tmp_path / "bad.tckpt"
    bad.write_bytes(bytes(raw))
    before = params_bits(model_b)
    with pytest.raises(RuntimeError, match="bad.tckpt"):
        opt_b.load_checkpoint(bad)
    assert same_bits(params_bits(model_b), before)
    other = tandem.torch.AdamW(make_mlp().parameters(), lr=1e-3)  # f32 formats
    with pytest.raises(ValueError, match="formats"):
        other.load_checkpoint(path)
