"""(c) torch.optim.lr_scheduler schedulers drive the engine's learning rate."""

import copy

import pytest
import torch

import tandem.torch
from helpers import batches, make_mlp, train


def two_groups(model, lr, ratio=0.5):
    params = list(model.parameters())
    return [{"params": params[:2], "lr": lr},
            {"params": params[2:], "lr": lr * ratio, "weight_decay": 0.0}]


@pytest.mark.parametrize("make_sched", [
    lambda o: torch.optim.lr_scheduler.StepLR(o, step_size=5, gamma=0.5),
    lambda o: torch.optim.lr_scheduler.LambdaLR(o, lambda s: min(1.0, (s + 1) / 10)),
    lambda o: torch.optim.lr_scheduler.CosineAnnealingLR(o, T_max=30),
])
def test_scheduler_matches_torch(make_sched):
    ref = make_mlp()
    ours = copy.deepcopy(ref)
    data = batches(30, seed=4)
    t_opt = torch.optim.AdamW(two_groups(ref, 1e-2), lr=1e-2, weight_decay=0.05)
    o_opt = tandem.torch.AdamW(two_groups(ours, 1e-2), lr=1e-2, weight_decay=0.05)
    t_sched, o_sched = make_sched(t_opt), make_sched(o_opt)
    t_lrs, o_lrs = [], []
    for x, y in data:
        for model, opt, sched, lrs in ((ref, t_opt, t_sched, t_lrs),
                                       (ours, o_opt, o_sched, o_lrs)):
            opt.zero_grad()
            torch.nn.functional.mse_loss(model(x), y).backward()
            opt.step()
            sched.step()
            lrs.append([g["lr"] for g in opt.param_groups])
    assert o_lrs == t_lrs
    for a, b in zip(ours.parameters(), ref.parameters()):
        assert torch.allclose(a, b, rtol=1e-5, atol=1e-7)


def test_changed_lr_ratio_raises_in_error_mode_and_follows_torch_by_default():
    model = make_mlp()
    opt = tandem.torch.SGD(two_groups(model, 0.1), lr=0.1, momentum=0.9,
                           hyperparam_update="error")
    train(model, opt, batches(2))
    opt.param_groups[1]["lr"] = 0.3  # ratio to group 0 changes from 0.5 to 3
    with pytest.raises(ValueError, match="ratio between the groups"):
        train(model, opt, batches(1))

    ref = make_mlp()
    ours = copy.deepcopy(ref)
    t_opt = torch.optim.SGD(two_groups(ref, 0.1), lr=0.1, momentum=0.9)
    o_opt = tandem.torch.SGD(two_groups(ours, 0.1), lr=0.1, momentum=0.9)
    data = batches(6, seed=8)
    for i, (x, y) in enumerate(data):
        if i == 3:
            for opt in (t_opt, o_opt):
                opt.param_groups[1]["lr"] = 0.3
                opt.param_groups[0]["momentum"] = 0.5
        for model, opt in ((ref, t_opt), (ours, o_opt)):
            opt.zero_grad()
            torch.nn.functional.mse_loss(model(x), y).backward()
            opt.step()
    for a, b in zip(ours.parameters(), ref.parameters()):
        assert torch.allclose(a, b, rtol=1e-5, atol=1e-7)


def test_changed_beta_raises_in_error_mode():
    model = make_mlp()
    opt = tandem.torch.AdamW(model.parameters(), lr=1e-3, hyperparam_update="error")
    opt.param_groups[0]["betas"] = (0.8, 0.999)
    with pytest.raises(ValueError, match="other than lr"):
        train(model, opt, batches(1))
