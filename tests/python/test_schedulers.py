"""(c) torch.optim.lr_scheduler schedulers drive the engine's learning rate."""

import copy

import pytest
import torch

import tandem._C
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


@pytest.mark.parametrize("via", ["state_dict", "checkpoint"])
def test_resume_with_changing_betas_and_ratio_is_bit_identical(tmp_path, via):
    """OneCycleLR moves betas every step, and one group's lr ratio changes mid-run: the
    engine's groups, the reference group and the lr scales all come back on resume."""
    if via == "checkpoint" and not tandem._C.has_checkpoint:
        pytest.skip("built without checkpoint/")
    data = batches(16, seed=14)

    def build(seed):
        model = make_mlp(seed=seed)
        opt = tandem.torch.AdamW(two_groups(model, 1e-2, ratio=2.0), lr=1e-2,
                                 weight_decay=0.05, master="bf16+ecc8", momentum="q8",
                                 variance="q8", offload_fraction=0.5, chunk_elements=64)
        sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=[1e-2, 2e-2],
                                                    total_steps=16)
        return model, opt, sched

    model_a, opt_a, sched_a = build(1)
    train(model_a, opt_a, data[:5], sched_a)
    opt_a.param_groups[1]["lr"] *= 0.25  # the ratio changes: the reference group moves
    train(model_a, opt_a, data[5:8], sched_a)
    saved_sched = copy.deepcopy(sched_a.state_dict())
    if via == "checkpoint":
        opt_a.save_checkpoint(tmp_path / "a.tckpt")
    else:
        saved_opt = copy.deepcopy(opt_a.state_dict())
    train(model_a, opt_a, data[8:], sched_a)

    model_b, opt_b, sched_b = build(2)
    if via == "checkpoint":
        opt_b.load_checkpoint(tmp_path / "a.tckpt")
    else:
        opt_b.load_state_dict(saved_opt)
    sched_b.load_state_dict(saved_sched)
    train(model_b, opt_b, data[8:], sched_b)
    for a, b in zip(model_a.parameters(), model_b.parameters()):
        assert torch.equal(a, b)
    assert opt_b._layout.ref_group == opt_a._layout.ref_group
