"""torch.optim's per-group flags (Note [torch.optim's flags in a param group] in
tandem/_core/options.py). maximize, amsgrad and differentiable set True on any path that
carries a group's values (a group dict at construction, add_param_group, an edit of
param_groups[i] after construction, a loaded state dict) are refused naming the group
and the key, with nothing changed; foreach, fused and capturable are how torch runs the
same update, accepted in any of those places and changing no bit. Host mode, CPU."""

import copy

import pytest
import torch

import tandem.torch
from helpers import batches, make_mlp, params_bits, same_bits, train
from test_state_validation import bits_equal


def two_groups(extra=None, cls=tandem.torch.AdamW, **kwargs):
    model = make_mlp(seed=4)
    params = list(model.parameters())
    second = dict({"params": params[2:], "lr": 3e-3}, **(extra or {}))
    return model, cls([{"params": params[:2]}, second], lr=1e-2, offload_fraction=0.5,
                      chunk_elements=64, **kwargs)


# The key and the reason; each path names the group its own way ("group 1: ", a loaded
# state dict's "state dict['param_groups'][1]: ").
REFUSED = [("maximize", r"maximize=True is not supported by tandem \(the engine descends "
                        r"every group"),
           ("amsgrad", r"amsgrad=True is not supported by tandem"),
           ("differentiable", r"differentiable=True is not supported by tandem \(the "
                              r"engine's step is not an autograd operation")]


@pytest.mark.parametrize("key, match", REFUSED, ids=[k for k, _ in REFUSED])
def test_flag_in_a_group_dict_is_refused(key, match):
    with pytest.raises(ValueError, match="group 1: " + match):
        two_groups({key: True})


@pytest.mark.parametrize("key, match", REFUSED, ids=[k for k, _ in REFUSED])
def test_flag_in_add_param_group_is_refused_and_changes_nothing(key, match):
    model = make_mlp(seed=4)
    params = list(model.parameters())
    opt = tandem.torch.AdamW(params[:2], lr=1e-2)
    with pytest.raises(ValueError, match="group 1: " + match):
        opt.add_param_group({"params": params[2:], key: True})
    assert len(opt.param_groups) == 1


@pytest.mark.parametrize("key, match", REFUSED, ids=[k for k, _ in REFUSED])
def test_flag_set_after_construction_is_refused_at_the_step(key, match):
    model, opt = two_groups()
    train(model, opt, batches(1))
    weights = params_bits(model)
    opt.param_groups[1][key] = True
    opt.zero_grad()
    model(batches(1)[0][0]).square().mean().backward()
    with pytest.raises(ValueError, match="group 1: " + match):
        opt.step()
    assert same_bits(params_bits(model), weights)
    opt.param_groups[1][key] = False  # put back: the step goes on as if never set
    train(model, opt, batches(2, seed=9))
    ref_model, ref = two_groups()
    train(ref_model, ref, batches(1))
    train(ref_model, ref, batches(2, seed=9))
    assert same_bits(params_bits(model), params_bits(ref_model))


@pytest.mark.parametrize("key, match", REFUSED, ids=[k for k, _ in REFUSED])
def test_flag_in_a_loaded_state_dict_is_refused_and_changes_nothing(key, match):
    model, opt = two_groups()
    train(model, opt, batches(2))
    sd = copy.deepcopy(opt.state_dict())
    sd["param_groups"][1][key] = True
    before, weights = copy.deepcopy(opt.state_dict()), params_bits(model)
    with pytest.raises(ValueError, match=r"state dict\['param_groups'\]\[1\]: " + match):
        opt.load_state_dict(sd)
    assert bits_equal(opt.state_dict(), before)
    assert same_bits(params_bits(model), weights)
    assert key not in opt.param_groups[1]


def test_maximize_per_group_in_a_torch_state_dict_is_refused():
    model = make_mlp(seed=4)
    params = list(model.parameters())
    ref = torch.optim.AdamW([{"params": params[:2]}, {"params": params[2:], "maximize": True}])
    _, opt = two_groups()
    with pytest.raises(ValueError, match=r"maximize"):
        opt.load_state_dict(ref.state_dict())


HINTS = dict(foreach=False, fused=None, capturable=False)


@pytest.mark.parametrize("hints", [HINTS, dict(foreach=True, fused=True, capturable=True)],
                         ids=["off", "on"])
def test_torch_hints_are_accepted_everywhere_and_change_no_bit(hints):
    model, opt = two_groups(hints)
    ref_model, ref = two_groups()
    train(model, opt, batches(2))
    train(ref_model, ref, batches(2))
    opt.param_groups[0].update(hints)
    train(model, opt, batches(2, seed=7))
    train(ref_model, ref, batches(2, seed=7))
    assert same_bits(params_bits(model), params_bits(ref_model))
    assert opt.param_groups[1]["capturable"] == hints["capturable"]  # kept, as torch keeps it
    opt.load_state_dict(opt.state_dict())


def test_a_torch_state_dict_with_every_flag_off_loads():
    model = make_mlp(seed=4)
    params = list(model.parameters())
    ref = torch.optim.AdamW([{"params": params[:2]}, {"params": params[2:], "lr": 3e-3}],
                            lr=1e-2)
    train(model, ref, batches(1))
    _, opt = two_groups()
    opt.load_state_dict(ref.state_dict())  # amsgrad, maximize, ... all False or None


def test_sgd_ignores_amsgrad_as_torch_does():
    model, opt = two_groups({"amsgrad": True}, cls=tandem.torch.SGD, momentum=0.9)
    train(model, opt, batches(1))
    with pytest.raises(ValueError, match=r"group 1: maximize=True"):
        two_groups({"maximize": True}, cls=tandem.torch.SGD, momentum=0.9)
