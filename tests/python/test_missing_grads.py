"""torch.optim's semantics for missing gradients and per-parameter step counts: a
parameter without a gradient at step() is not stepped at all, and each parameter's bias
correction uses its own step count (offload fractions 0, 0.5 and 1, host mode)."""

import pytest
import torch

import tandem.torch
from helpers import batches, make_mlp, params_bits, same_bits, train
from test_vs_torch import max_rel_diff

FRACTIONS = (0.0, 0.5, 1.0)


def adamw(params, fraction, **kwargs):
    return tandem.torch.AdamW(params, lr=1e-2, weight_decay=0.05, offload_fraction=fraction,
                              chunk_elements=64, **kwargs)


def backward(model, x, y):
    torch.nn.functional.mse_loss(model(x).float(), y.float()).backward()


@pytest.mark.parametrize("fraction", FRACTIONS)
def test_zero_grad_sets_grads_to_none_and_keeps_buffers(fraction):
    model = make_mlp()
    opt = adamw(model.parameters(), fraction)
    assert all(p.grad is None for p in model.parameters())  # untouched by construction
    train(model, opt, batches(1))
    ptrs = [p.grad.data_ptr() for p in model.parameters()]
    opt.zero_grad()
    assert all(p.grad is None for p in model.parameters())
    opt.zero_grad(set_to_none=False)  # None stays None, as torch
    assert all(p.grad is None for p in model.parameters())
    backward(model, *batches(1, seed=4)[0])
    assert [p.grad.data_ptr() for p in model.parameters()] == ptrs
    opt.zero_grad(set_to_none=False)
    assert all(torch.count_nonzero(p.grad) == 0 for p in model.parameters())
    assert [p.grad.data_ptr() for p in model.parameters()] == ptrs


@pytest.mark.parametrize("fraction", FRACTIONS)
@pytest.mark.parametrize("formats", [
    dict(master_format="f32"),
    dict(master_format="bf16+ecc8", momentum_format="q8", variance_format="q8"),
])
def test_frozen_after_build_does_not_move(fraction, formats):
    check_frozen_after_build(fraction, formats, "cpu")


def check_frozen_after_build(fraction, formats, device):
    model = make_mlp().to(device)
    opt = adamw(model.parameters(), fraction, **formats)
    train(model, opt, [(x.to(device), y.to(device)) for x, y in batches(2)])
    model[0].requires_grad_(False)
    frozen = params_bits(model[0])
    train(model, opt, [(x.to(device), y.to(device)) for x, y in batches(3, seed=5)])
    assert same_bits(params_bits(model[0]), frozen)
    counts = opt.tensor_step_counts()
    assert counts[:2] == [2, 2] and counts[2:] == [5] * 4


@pytest.mark.parametrize("fraction", FRACTIONS)
def test_step_without_backward_moves_nothing(fraction):
    model = make_mlp()
    opt = adamw(model.parameters(), fraction, master_format="bf16+ecc8",
                momentum_format="q8")
    train(model, opt, batches(3))  # moments are non-zero now
    before = params_bits(model)
    opt.zero_grad()
    opt.step()
    assert same_bits(params_bits(model), before)
    assert opt.last_result.stepped_tensors == 0
    assert opt.tensor_step_counts() == [3] * 6


def test_second_step_without_new_gradient_steps_again():
    # As torch.optim: a parameter whose p.grad is not None is stepped, new gradient or
    # not (test_grads_as_torch.py compares with torch at every fraction).
    model = make_mlp()
    ref = make_mlp()
    opt = adamw(model.parameters(), 0.0)
    ref_opt = torch.optim.AdamW(ref.parameters(), lr=1e-2, weight_decay=0.05)
    train(model, opt, batches(1))
    train(ref, ref_opt, batches(1))
    before = params_bits(model)
    opt.step()
    ref_opt.step()
    assert not same_bits(params_bits(model), before)
    assert opt.tensor_step_counts() == [2] * 6
    assert max_rel_diff(model, ref) < 1e-5


def test_assigned_and_in_place_gradients_count():
    model = make_mlp()
    opt = adamw(model.parameters(), 0.0)
    ref = make_mlp()
    ref_opt = torch.optim.AdamW(ref.parameters(), lr=1e-2, weight_decay=0.05)
    g = torch.Generator().manual_seed(3)
    for t in range(4):
        grads = [torch.randn(p.shape, generator=g) for p in model.parameters()]
        opt.zero_grad(set_to_none=t % 2 == 0)
        ref_opt.zero_grad()
        for p, q, gr in zip(model.parameters(), ref.parameters(), grads):
            if p.grad is None:
                p.grad = gr.clone()  # assigned
            else:
                p.grad.copy_(gr)     # written in place
            q.grad = gr.clone()
        opt.step()
        ref_opt.step()
    assert max_rel_diff(model, ref) < 1e-5


@pytest.mark.parametrize("fraction", FRACTIONS)
@pytest.mark.parametrize("algo", ["adamw", "adam", "sgd"])
def test_freeze_unfreeze_loop_matches_torch(fraction, algo):
    check_freeze_unfreeze_loop(fraction, algo, "cpu")


def check_freeze_unfreeze_loop(fraction, algo, device):
    ours, theirs = make_mlp().to(device), make_mlp().to(device)
    if algo == "sgd":
        opt = tandem.torch.SGD(ours.parameters(), lr=0.05, momentum=0.9, weight_decay=1e-3,
                               offload_fraction=fraction, chunk_elements=64)
        ref_opt = torch.optim.SGD(theirs.parameters(), lr=0.05, momentum=0.9,
                                  weight_decay=1e-3)
    else:
        cls = tandem.torch.AdamW if algo == "adamw" else tandem.torch.Adam
        ref_cls = torch.optim.AdamW if algo == "adamw" else torch.optim.Adam
        opt = cls(ours.parameters(), lr=1e-2, weight_decay=0.05, offload_fraction=fraction,
                  chunk_elements=64)
        ref_opt = ref_cls(theirs.parameters(), lr=1e-2, weight_decay=0.05)
    # Layer 0 frozen for steps 2-5, layer 2 for steps 4-8, layer 4 for step 9.
    frozen = {t: ([0] if 2 <= t <= 5 else []) + ([2] if 4 <= t <= 8 else []) +
              ([4] if t == 9 else []) for t in range(12)}
    for t, (x, y) in enumerate(batches(12, seed=6)):
        x, y = x.to(device), y.to(device)
        for model, o in ((ours, opt), (theirs, ref_opt)):
            for i in (0, 2, 4):
                model[i].requires_grad_(i not in frozen[t])
            o.zero_grad(set_to_none=True)  # torch < 2.0 defaults to False
            backward(model, x, y)
            o.step()
    assert max_rel_diff(ours, theirs) < 1e-5
    if algo != "sgd":  # torch's SGD keeps no step
        ref_steps = [int(ref_opt.state[p]["step"]) if p in ref_opt.state else 0
                     for p in theirs.parameters()]
        assert opt.tensor_step_counts() == ref_steps
    return opt


def test_state_dict_shows_per_parameter_steps():
    opt = check_freeze_unfreeze_loop(0.5, "adamw", "cpu")
    state = opt.state_dict()["state"]
    assert [int(state[i]["step"]) for i in range(6)] == opt.tensor_step_counts()
    assert opt.tensor_step_counts() == [8, 8, 7, 7, 11, 11]


class MoE(torch.nn.Module):
    """Three experts; each step routes the batch to the experts it names."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(2)
        self.gate = torch.nn.Linear(13, 16)
        self.experts = torch.nn.ModuleList(torch.nn.Linear(16, 5) for _ in range(3))

    def forward(self, x, experts):
        h = torch.tanh(self.gate(x))
        return sum(self.experts[e](h) for e in experts)


@pytest.mark.parametrize("fraction", FRACTIONS)
def test_expert_without_gradient_matches_torch(fraction):
    check_moe(fraction, "cpu")


def check_moe(fraction, device):
    ours, theirs = MoE().to(device), MoE().to(device)
    opt = adamw(ours.parameters(), fraction)
    ref_opt = torch.optim.AdamW(theirs.parameters(), lr=1e-2, weight_decay=0.05)
    routes = [(0,), (0, 1), (2,), (1,), (0, 2), (2,), (1, 2), (0,)]
    for (x, y), route in zip(batches(len(routes), seed=7), routes):
        x, y = x.to(device), y.to(device)
        for model, o in ((ours, opt), (theirs, ref_opt)):
            o.zero_grad(set_to_none=True)
            torch.nn.functional.mse_loss(model(x, route), y).backward()
            o.step()
    assert max_rel_diff(ours, theirs) < 1e-5
    assert opt.tensor_step_counts()[2:] == [4, 4, 3, 3, 4, 4]


def test_unfreezing_a_parameter_frozen_at_build_steps_it():
    # torch.optim steps it; so do we, after a rebind (test_rebind.py has the details).
    model = make_mlp()
    model[0].requires_grad_(False)
    opt = adamw(model.parameters(), 0.0)
    model[0].requires_grad_(True)
    opt.zero_grad()
    backward(model, *batches(1)[0])
    with pytest.warns(tandem.torch.RebindWarning):
        opt.step()
    assert opt.tensor_step_counts() == [1] * 6


@pytest.mark.parametrize("fraction", FRACTIONS)
def test_zero_grad_without_set_to_none_matches_torch(fraction):
    # set_to_none=False keeps zeroed gradients, so torch steps a frozen layer with a zero
    # gradient (its moments and weight decay move it); so do we.
    ours, theirs = make_mlp(), make_mlp()
    opt = adamw(ours.parameters(), fraction)
    ref_opt = torch.optim.AdamW(theirs.parameters(), lr=1e-2, weight_decay=0.05)
    for t, (x, y) in enumerate(batches(6, seed=8)):
        for model, o in ((ours, opt), (theirs, ref_opt)):
            model[0].requires_grad_(t < 2)
            o.zero_grad(set_to_none=False)
            backward(model, x, y)
            o.step()
    assert max_rel_diff(ours, theirs) < 1e-5
    assert opt.tensor_step_counts() == [6] * 6


def test_gradient_computed_before_the_optimizer_is_used():
    ours, theirs = make_mlp(), make_mlp()
    x, y = batches(1)[0]
    backward(ours, x, y)
    backward(theirs, x, y)
    opt = adamw(ours.parameters(), 0.0)
    ref_opt = torch.optim.AdamW(theirs.parameters(), lr=1e-2, weight_decay=0.05)
    opt.step()
    ref_opt.step()
    assert opt.last_result.stepped_tensors == 6
    assert max_rel_diff(ours, theirs) < 1e-5
