"""Loading state never rounds the weight of a parameter that has not been stepped yet:
Note [A never-stepped parameter keeps its weight] in python/tandem/torch/_state.py.
Accelerate's prepare round-trips the optimizer's own state dict before training; with a
master coarser than the weight (fp32 weights, bf16 or bf16+ecc8 masters) the load used to
write the rounded masters into the weights, so training drifted from the same loop without
the round trip."""

import pytest
import torch

import tandem.torch

from helpers import batches, make_mlp, params_bits, same_bits, train

COARSE = [pytest.param(dict(master_format="bf16+ecc8", momentum_format="q8",
                            variance_format="q8"), id="bf16+ecc8"),
          pytest.param(dict(master_format="bf16"), id="bf16")]


def adamw(model, formats):
    return tandem.torch.AdamW(model.parameters(), lr=1e-2, weight_decay=0.05,
                              offload_fraction=0.5, **formats)


@pytest.mark.parametrize("formats", COARSE)
def test_round_trip_before_the_first_step_changes_nothing(formats):
    plain, model = make_mlp(), make_mlp()
    opt_plain, opt = adamw(plain, formats), adamw(model, formats)
    opt.load_state_dict(opt.state_dict())
    assert same_bits(params_bits(plain), params_bits(model))
    data = batches(3, seed=4)
    train(plain, opt_plain, data)
    train(model, opt, data)
    assert same_bits(params_bits(plain), params_bits(model))


@pytest.mark.parametrize("formats", COARSE)
def test_stepped_parameters_take_their_masters_unstepped_keep_their_weights(formats):
    model = make_mlp()
    opt = adamw(model, formats)
    model[4].requires_grad_(False)        # the last layer gets no gradient: never stepped
    train(model, opt, batches(2, seed=5))
    saved = opt.state_dict()
    stepped = params_bits(model)
    train(model, opt, batches(1, seed=6))  # move the stepped ones away
    with torch.no_grad():
        model[4].weight.mul_(0.5)         # a write after the save: the truth now
    last = model[4].weight.detach().clone()
    opt.load_state_dict(saved)
    now = params_bits(model)
    assert same_bits(now[:4], stepped[:4])
    assert torch.equal(model[4].weight, last)
    assert opt.tensor_step_counts() == [2, 2, 2, 2, 0, 0]
    # Its master was re-read from the kept weight: a step starts from it.
    model[4].requires_grad_(True)
    fresh = make_mlp()
    fresh.load_state_dict(model.state_dict())
    fresh_opt = adamw(fresh, formats)
    fresh_opt.load_state_dict(opt.state_dict())
    data = batches(2, seed=7)
    train(model, opt, data)
    train(fresh, fresh_opt, data)
    assert same_bits(params_bits(model), params_bits(fresh))


@pytest.mark.skipif(not tandem._C.has_checkpoint, reason="built without checkpoint/")
@pytest.mark.parametrize("formats", COARSE)
def test_load_checkpoint_before_the_first_step_changes_nothing(tmp_path, formats):
    plain, model = make_mlp(), make_mlp()
    opt_plain, opt = adamw(plain, formats), adamw(model, formats)
    opt.save_checkpoint(tmp_path / "ckpt")
    opt.load_checkpoint(tmp_path / "ckpt")
    assert same_bits(params_bits(plain), params_bits(model))
    data = batches(2, seed=8)
    train(plain, opt_plain, data)
    train(model, opt, data)
    assert same_bits(params_bits(plain), params_bits(model))
