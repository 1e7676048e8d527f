"""Checkpoint files keep the torch param_groups and the binding's bookkeeping, so a run
resumed from save_checkpoint/load_checkpoint mid-schedule is bit-identical."""

import io
import json
import math
import warnings

import pytest
import torch

import tandem._C
import tandem.torch
from helpers import batches, make_mlp, params_bits, same_bits, train
from test_exact import same_state

pytestmark = pytest.mark.skipif(not tandem._C.has_checkpoint,
                                reason="built without checkpoint/")

FORMATS = [
    dict(master="f32", momentum="f32", variance="f32"),
    dict(master="bf16+ecc8", momentum="q8", variance="q8", offload_fraction=0.5,
         chunk_elements=64),
]


def two_groups(model, lr):
    params = list(model.parameters())
    return [{"params": params[:2], "lr": lr},
            {"params": params[2:], "lr": lr * 0.3, "weight_decay": 0.0}]


def warmup_cosine(opt, total=24, warmup=5):
    def factor(s):
        if s < warmup:
            return (s + 1) / warmup
        return 0.5 * (1 + math.cos(math.pi * (s - warmup) / (total - warmup)))
    return torch.optim.lr_scheduler.LambdaLR(opt, factor)


SCHEDULERS = {
    "cosine": lambda opt: torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=24),
    "warmup_cosine": warmup_cosine,
}


@pytest.mark.parametrize("sched_name", sorted(SCHEDULERS))
@pytest.mark.parametrize("formats", FORMATS, ids=["f32", "ecc8_q8"])
def test_resume_mid_schedule_is_bit_identical(tmp_path, sched_name, formats):
    make_sched = SCHEDULERS[sched_name]
    data = batches(24, seed=31)
    # The uninterrupted run.
    model_a = make_mlp(seed=1)
    opt_a = tandem.torch.AdamW(two_groups(model_a, 2e-2), lr=2e-2, weight_decay=0.05,
                               **formats)
    sched_a = make_sched(opt_a)
    train(model_a, opt_a, data[:10], sched_a)
    path = tmp_path / "mid.tckpt"
    opt_a.save_checkpoint(path)
    sched_state = io.BytesIO()
    torch.save(sched_a.state_dict(), sched_state)
    train(model_a, opt_a, data[10:], sched_a)

    # A fresh process: other initial weights, the optimizer and scheduler built anew.
    model_b = make_mlp(seed=2)
    opt_b = tandem.torch.AdamW(two_groups(model_b, 2e-2), lr=2e-2, weight_decay=0.05,
                               **formats)
    sched_b = make_sched(opt_b)
    opt_b.load_checkpoint(path)
    sched_state.seek(0)
    sched_b.load_state_dict(torch.load(sched_state))
    train(model_b, opt_b, data[10:], sched_b)

    assert same_bits(params_bits(model_b), params_bits(model_a))
    assert same_state(opt_b.state_dict(), opt_a.state_dict())
    assert [g["lr"] for g in opt_b.param_groups] == [g["lr"] for g in opt_a.param_groups]


def test_param_groups_restored_exactly(tmp_path):
    model = make_mlp(seed=1)
    opt = tandem.torch.AdamW(two_groups(model, 1e-2), lr=1e-2, betas=(0.8, 0.95))
    sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=10)
    train(model, opt, batches(3), sched)
    opt.param_groups[1]["betas"] = (0.85, 0.99)       # engine gets it at the next step
    opt.param_groups[0]["param_names"] = ["0.weight", "0.bias"]
    opt.param_groups[0]["custom"] = {"a": [1, (2, 3)], 4: None, "inf": float("inf")}
    opt.param_groups[1]["lr"] = torch.tensor(3e-3)    # a 0-d tensor: stored as its float
    saved = [{k: v for k, v in g.items() if k != "params"} for g in opt.param_groups]
    path = tmp_path / "groups.tckpt"
    opt.save_checkpoint(path)

    model_b = make_mlp(seed=2)
    opt_b = tandem.torch.AdamW(two_groups(model_b, 5.0), lr=5.0)
    opt_b.load_checkpoint(path)
    for g, (want, group) in enumerate(zip(saved, opt_b.param_groups)):
        got = {k: v for k, v in group.items() if k != "params"}
        assert got.keys() == want.keys(), g
        for key, value in want.items():
            if torch.is_tensor(value):
                assert type(got[key]) is float and got[key] == value.item()
            else:
                assert got[key] == value and type(got[key]) is type(value), (g, key)
    assert type(opt_b.param_groups[0]["betas"]) is tuple
    assert (opt_b._layout.ref_group == opt._layout.ref_group
            and opt_b._layout.lr_scales == opt._layout.lr_scales)
    # The engine takes the hyper-parameters the loaded param_groups show (betas (0.85,
    # 0.99) for group 1), as opt's engine will at its next step.
    assert opt_b._layout.engine_hyper == [opt._hyper(g) for g in opt.param_groups]
    # Both continue alike (opt's 0-d tensor lr is a float in opt_b: same value).
    data = batches(3, seed=5)
    assert train(model, opt, data) == train(model_b, opt_b, data)


@pytest.mark.parametrize("value,what", [
    (object(), "object"),
    (torch.zeros(2), "Tensor"),
    (lambda s: s, "function"),
    ({"k": {1, 2}}, "set"),
])
def test_unstorable_value_is_refused_naming_the_key(tmp_path, value, what):
    model = make_mlp()
    opt = tandem.torch.SGD(model.parameters(), lr=0.1)
    opt.param_groups[0]["extra"] = value
    path = tmp_path / "x.tckpt"
    with pytest.raises(ValueError, match=r"param_groups\[0\]\['extra'\].*%s" % what):
        opt.save_checkpoint(path)
    assert not path.exists()


def test_old_file_without_metadata_keeps_live_groups(tmp_path):
    model_a = make_mlp(seed=1)
    opt_a = tandem.torch.AdamW(model_a.parameters(), lr=1e-2)
    train(model_a, opt_a, batches(3))
    path = tmp_path / "old.tckpt"
    opt_a._core.engine.save_checkpoint(str(path), "none", True)  # what older tandem wrote

    model_b = make_mlp(seed=2)
    opt_b = tandem.torch.AdamW(model_b.parameters(), lr=1e-2)
    opt_b.param_groups[0]["lr"] = 7e-3
    with pytest.warns(UserWarning, match="no tandem.torch param_groups"):
        opt_b.load_checkpoint(path)
    assert opt_b.param_groups[0]["lr"] == 7e-3
    assert same_bits(params_bits(model_b), params_bits(model_a))
    assert opt_b.step_count == 3


def test_foreign_metadata_keeps_live_groups(tmp_path):
    model = make_mlp()
    opt = tandem.torch.AdamW(model.parameters(), lr=1e-2)
    path = tmp_path / "foreign.tckpt"
    opt._core.engine.save_checkpoint(str(path), "none", True, "written by a C++ trainer")
    opt.param_groups[0]["lr"] = 2e-3
    with pytest.warns(UserWarning):
        opt.load_checkpoint(path)
    assert opt.param_groups[0]["lr"] == 2e-3


def _metadata_of(opt):
    return json.loads(tandem.torch._state._metadata(opt))


@pytest.mark.parametrize("corrupt,match", [
    (lambda m: m.update(version=9), "version 9"),
    (lambda m: m.update(algorithm="sgd"), "algorithm 'sgd'"),
    (lambda m: m["group_sizes"].pop(), "group_sizes"),
    (lambda m: m["group_sizes"].__setitem__(0, 3), "group 0 has 3"),
    (lambda m: m.update(ref_group=5), "ref_group"),
    (lambda m: m.update(ref_group="0"), "ref_group"),
    (lambda m: m.pop("lr_scales"), "'lr_scales'"),
    (lambda m: m["param_groups"][1].pop("betas"), "'betas'"),
    (lambda m: m["param_groups"][0].update(lr={"$what": 1}), "tagged"),
    (lambda m: m["param_groups"][0].update(eps="x"), "eps must be a number"),
    (lambda m: m["param_groups"][1].update(betas={"$tuple": [0.9, 1.5]}), "beta2"),
    (lambda m: m.update(lr_scales=[1.0, 2.0], ref_group=1), "lr_scale"),
])
def test_bad_metadata_is_refused_and_changes_nothing(tmp_path, corrupt, match):
    model = make_mlp(seed=1)
    opt = tandem.torch.AdamW(two_groups(model, 1e-2), lr=1e-2)
    train(model, opt, batches(2))
    meta = _metadata_of(opt)
    corrupt(meta)
    path = tmp_path / "bad.tckpt"
    opt._core.engine.save_checkpoint(str(path), "none", True, json.dumps(meta))
    train(model, opt, batches(1, seed=3))
    before, params = opt.state_dict(), params_bits(model)
    groups = [dict(g) for g in opt.param_groups]
    with pytest.raises(ValueError, match=match):
        opt.load_checkpoint(path)
    assert same_state(opt.state_dict(), before)
    assert same_bits(params_bits(model), params)
    assert opt.param_groups == groups
    assert opt.step_count == 3


def test_load_without_warning_for_new_files(tmp_path):
    model = make_mlp()
    opt = tandem.torch.Lion(model.parameters(), lr=1e-3)
    path = tmp_path / "new.tckpt"
    opt.save_checkpoint(path)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        opt.load_checkpoint(path)


def test_version_1_metadata_loads_and_its_engine_copy_is_not_used(tmp_path):
    # Version 1 also kept "engine_hyper" (the hyper-parameters last handed to the
    # engine); param_groups are the one source (Note [One source of hyper-parameters]).
    model = make_mlp(seed=1)
    opt = tandem.torch.AdamW(two_groups(model, 1e-2), lr=1e-2)
    train(model, opt, batches(2))
    results = []
    for engine_hyper in (None, dict(beta1=0.5, beta2=0.9, eps=1e-3, weight_decay=0.5)):
        meta = _metadata_of(opt)
        meta["version"] = 1
        meta["engine_hyper"] = [dict(opt._hyper(g), **(engine_hyper or {}))
                                for g in opt.param_groups]
        path = tmp_path / "v1.tckpt"
        opt._core.engine.save_checkpoint(str(path), "none", True, json.dumps(meta))
        other = make_mlp(seed=2)
        other_opt = tandem.torch.AdamW(two_groups(other, 1e-2), lr=1e-2)
        other_opt.load_checkpoint(path)
        train(other, other_opt, batches(2, seed=4))
        results.append(params_bits(other))
    assert same_bits(*results)
