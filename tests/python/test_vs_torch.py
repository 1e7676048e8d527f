"""(a) Host mode against torch.optim on a small MLP: close (fp32 formats)."""

import copy

import torch

import tandem.torch
from helpers import batches, make_mlp, train


def max_rel_diff(model_a, model_b):
    worst = 0.0
    for a, b in zip(model_a.parameters(), model_b.parameters()):
        d = (a.detach() - b.detach()).abs().max().item()
        worst = max(worst, d / max(b.detach().abs().max().item(), 1e-30))
    return worst


def run_pair(make_ours, make_theirs, steps=50):
    ref = make_mlp()
    ours = copy.deepcopy(ref)
    data = batches(steps)
    train(ref, make_theirs(ref.parameters()), data)
    opt = make_ours(ours.parameters())
    assert opt.mode == "host"
    train(ours, opt, data)
    return max_rel_diff(ours, ref)


def test_adamw_matches_torch_adamw_50_steps():
    diff = run_pair(
        lambda p: tandem.torch.AdamW(p, lr=1e-2, weight_decay=0.05),
        lambda p: torch.optim.AdamW(p, lr=1e-2, weight_decay=0.05))
    print("\nAdamW vs torch.optim.AdamW, 50 steps: max relative difference %.3g" % diff)
    assert diff < 1e-5


def test_adam_l2_matches_torch_adam():
    diff = run_pair(
        lambda p: tandem.torch.Adam(p, lr=1e-2, weight_decay=0.01),
        lambda p: torch.optim.Adam(p, lr=1e-2, weight_decay=0.01))
    print("\nAdam(L2) vs torch.optim.Adam: max relative difference %.3g" % diff)
    assert diff < 1e-5


def test_sgd_nesterov_matches_torch_sgd():
    diff = run_pair(
        lambda p: tandem.torch.SGD(p, lr=0.05, momentum=0.9, nesterov=True,
                                   weight_decay=1e-3),
        lambda p: torch.optim.SGD(p, lr=0.05, momentum=0.9, nesterov=True,
                                  weight_decay=1e-3))
    print("\nSGD(nesterov) vs torch.optim.SGD: max relative difference %.3g" % diff)
    assert diff < 1e-5


def test_sgd_dampening_matches_torch_sgd():
    diff = run_pair(
        lambda p: tandem.torch.SGD(p, lr=0.05, momentum=0.8, dampening=0.3),
        lambda p: torch.optim.SGD(p, lr=0.05, momentum=0.8, dampening=0.3))
    assert diff < 1e-5


def test_quantized_formats_train():
    model = make_mlp()
    opt = tandem.torch.AdamW(model.parameters(), lr=1e-2, master="bf16+ecc8",
                             momentum="q8", variance="q8")
    losses = train(model, opt, batches(1, seed=3) * 60)
    assert losses[-1] < 0.9 * losses[0]
    mem = opt.memory()
    assert mem["host"]["correction"] > 0 and mem["host"]["scales"] > 0


def test_lion_trains():
    model = make_mlp()
    opt = tandem.torch.Lion(model.parameters(), lr=1e-3, weight_decay=0.1)
    losses = train(model, opt, batches(1, seed=2) * 60)  # one batch, fitted
    assert losses[-1] < 0.9 * losses[0]
