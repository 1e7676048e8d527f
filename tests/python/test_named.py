"""Named parameters, as torch >= 2.4 optimizers take them: (name, parameter) pairs,
groups of pairs, or module= for plain parameters; the names become the engine's tensor
names and "param_names" in param_groups, and each tensor's shape reaches the engine."""

import pytest
import torch

import tandem
import tandem.torch
from helpers import batches, make_mlp, params_bits, same_bits, train

NAMES = ["0.weight", "0.bias", "2.weight", "2.bias", "4.weight", "4.bias"]


def engine_tensors(opt):
    return opt._core.engine.snapshot()["tensors"]


@pytest.mark.parametrize("fraction", [0.0, 0.5, 1.0])
def test_named_parameters(fraction):
    model = make_mlp()
    opt = tandem.torch.AdamW(model.named_parameters(), lr=1e-2, offload_fraction=fraction,
                             chunk_elements=64)
    assert opt.param_groups[0]["param_names"] == NAMES
    assert opt.param_groups[0]["params"] == list(model.parameters())
    assert opt.param_names == NAMES
    assert [t["name"] for t in engine_tensors(opt)] == NAMES
    assert opt.state_dict()["param_groups"][0]["param_names"] == NAMES
    # Same bits as the plain parameter list.
    plain = make_mlp()
    train(model, opt, batches(3))
    train(plain, tandem.torch.AdamW(plain.parameters(), lr=1e-2, offload_fraction=fraction,
                                    chunk_elements=64), batches(3))
    assert same_bits(params_bits(model), params_bits(plain))


def test_groups_of_named_parameters():
    model = make_mlp()
    named = list(model.named_parameters())
    opt = tandem.torch.AdamW([{"params": named[:2], "lr": 1e-3},
                              {"params": named[2:], "weight_decay": 0.0}], lr=1e-2)
    assert opt.param_groups[0]["param_names"] == NAMES[:2]
    assert opt.param_groups[1]["param_names"] == NAMES[2:]
    assert opt.param_names == NAMES


def test_module_keyword_names_plain_parameters():
    model = make_mlp()
    model[2].requires_grad_(False)
    opt = tandem.torch.SGD(model.parameters(), lr=0.1, module=model)
    assert opt.param_groups[0]["param_names"] == NAMES
    assert opt.param_names == ["0.weight", "0.bias", "4.weight", "4.bias"]
    with pytest.raises(ValueError, match="not a parameter of the module"):
        tandem.torch.SGD([torch.nn.Parameter(torch.zeros(3))], lr=0.1, module=model)


def test_unnamed_parameters_keep_the_old_names():
    opt = tandem.torch.AdamW(make_mlp().parameters())
    assert opt.param_names == ["g0.p%d" % k for k in range(6)]
    assert "param_names" not in opt.param_groups[0]


def test_names_must_be_all_or_none():
    model = make_mlp()
    named = list(model.named_parameters())
    with pytest.raises(ValueError, match="all param groups must be named or none"):
        tandem.torch.AdamW([{"params": named[:2]}, {"params": [p for _, p in named[2:]]}])
    with pytest.raises(ValueError, match="must be named or none"):
        tandem.torch.AdamW([named[0], named[1][1]])
    with pytest.raises(ValueError, match="names must be unique"):
        tandem.torch.AdamW([("w", named[0][1]), ("w", named[1][1])])


def test_errors_name_the_parameter():
    model = make_mlp()
    opt = tandem.torch.AdamW(model.named_parameters())
    model[4].bias.grad = torch.zeros(5)
    model[4].bias.grad.data = torch.zeros(6)
    with pytest.raises(ValueError, match=r"parameter '4.bias' \(shape \(5,\), torch.float32\)"):
        opt.step()


def test_shapes_reach_the_engine():
    model = make_mlp()
    opt = tandem.torch.AdamW(model.named_parameters())
    shapes = [list(t["shape"]) for t in engine_tensors(opt)]
    assert shapes == [list(p.shape) for p in model.parameters()]


def test_state_dict_round_trip_with_names():
    model = make_mlp()
    opt = tandem.torch.AdamW(model.named_parameters(), lr=1e-2, master_format="bf16+ecc8")
    train(model, opt, batches(2))
    sd = opt.state_dict()
    other_model = make_mlp(seed=3)
    other = tandem.torch.AdamW(other_model.named_parameters(), lr=1e-2,
                               master_format="bf16+ecc8")
    other.load_state_dict(sd)
    assert same_bits(params_bits(other_model), params_bits(model))
    data = batches(2, seed=9)
    train(model, opt, data)
    train(other_model, other, data)
    assert same_bits(params_bits(other_model), params_bits(model))


def test_binding_takes_seven_and_eight_field_specs():
    p, g = torch.zeros(6, 4), torch.ones(6, 4)
    base = ("w", p.numel(), "f32", "f32", p.data_ptr(), g.data_ptr(), 0)
    groups = [dict(lr_scale=1.0)]
    for spec, shape in ((base, [24]), (base + ([6, 4],), [6, 4])):
        engine = tandem._C.HybridOptimizer([spec], "sgd", groups, mode="host")
        engine.step(0.5)
        assert list(engine.snapshot()["tensors"][0].get("shape") or [24]) == shape
    assert torch.equal(p, torch.full((6, 4), -1.0))  # two steps of lr 0.5, gradient 1
    with pytest.raises(ValueError, match="tensor spec must be"):
        tandem._C.HybridOptimizer([base[:6]], "sgd", groups, mode="host")
    with pytest.raises(ValueError, match="shape|numel"):
        tandem._C.HybridOptimizer([base + ([5, 4],)], "sgd", groups, mode="host")
