"""tandem.megatron.TandemAdam: the surface Megatron-Core's DistributedOptimizer uses on
its precision-aware inner optimizer (docs/megatron.md), in host mode (CPU tensors):
bf16 shards as params, fp32 ``decoupled_grad``, get_unscaled_state / set_scaled_state,
per-group lrs that change every step, state dicts. Megatron's DistributedOptimizer
itself needs CUDA: tests/megatron/gpt_proof.py covers it on a GPU."""

import copy
import io
import math
import types
import warnings

import pytest
import torch

pytest.importorskip("megatron.core", reason="megatron.core is not importable (pip install "
                    "megatron-core): tandem.megatron tests skipped")

import tandem.torch  # noqa: E402
from tandem import megatron as tm  # noqa: E402

SHAPES = [(37,), (64,), (5, 33), (1,)]


def shards(seed=0):
    """bf16 1-D shards (as Megatron's param-buffer views), in two groups."""
    g = torch.Generator().manual_seed(seed)
    return [torch.randn(math.prod(s), generator=g).bfloat16() for s in SHAPES]


def groups_of(params, lrs=(1e-2, 3e-3), wds=(0.1, 0.0)):
    return [{"params": params[:2], "lr": lrs[0], "weight_decay": wds[0], "wd_mult": 1.0,
             "lr_mult": 1.0, "is_expert_parallel": False, "default_config": True},
            {"params": params[2:], "lr": lrs[1], "weight_decay": wds[1], "wd_mult": 0.0,
             "lr_mult": 1.0, "is_expert_parallel": False, "default_config": True}]


def grads_for(step, params, bf16_exact=False):
    g = torch.Generator().manual_seed(1000 + step)
    out = [torch.randn(p.numel(), generator=g) for p in params]
    if bf16_exact:
        out = [x.bfloat16().float() for x in out]
    return out


def schedule(step):
    """Per-group lrs and weight decays that change every step, with changing ratios."""
    return (1e-2 * (1 + step) / 4, 3e-3 * (0.5 + 0.2 * step)), (0.1 - 0.01 * step, 0.0)


def apply_schedule(opt, step):
    lrs, wds = schedule(step)
    for group, lr, wd in zip(opt.param_groups, lrs, wds):
        group["lr"], group["weight_decay"] = lr, wd


def run_tandem(opt, params, steps, start=0, bf16_exact=False, new_buffers=False):
    """Steps as Megatron does: decoupled_grad views of one gradient buffer per parameter
    (the same memory every step), or new tensors every step (new_buffers)."""
    for s in range(start, start + steps):
        apply_schedule(opt, s)
        for p, g in zip(params, grads_for(s, params, bf16_exact)):
            if new_buffers:
                p.decoupled_grad = g
            else:
                if not hasattr(p, "grad_buffer"):
                    p.grad_buffer = torch.empty(p.numel())
                p.decoupled_grad = p.grad_buffer.copy_(g).view(-1)
        opt.step()
        opt.zero_grad()


def test_it_is_what_megatron_checks_for():
    params = shards()
    opt = tm.TandemAdam(groups_of(params), betas=(0.9, 0.95))
    assert isinstance(opt, torch.optim.AdamW)  # DistributedOptimizer's isinstance check
    assert opt.master_weights and opt.use_decoupled_grad
    assert opt.store_param_remainders is False
    assert opt.exp_avg_dtype == torch.float32 and opt.exp_avg_sq_dtype == torch.float32
    assert len(opt.state) == 0  # state is created at the first step, as FusedAdam's
    # Megatron keeps its own keys in the groups and deep-copies / pickles them.
    copied = copy.deepcopy([{k: v for k, v in g.items() if k != "params"}
                            for g in opt.param_groups])
    assert copied[1]["wd_mult"] == 0.0 and copied[0]["step"] == 0


def test_steps_close_to_torch_adamw_over_fp32_copies():
    params = shards()
    ref_params = [p.float().clone().requires_grad_() for p in params]
    opt = tm.TandemAdam(groups_of(params), betas=(0.9, 0.95), eps=1e-8)
    ref = torch.optim.AdamW(groups_of(ref_params), betas=(0.9, 0.95), eps=1e-8)
    for s in range(6):
        apply_schedule(opt, s)
        apply_schedule(ref, s)
        for p, r, g in zip(params, ref_params, grads_for(s, params)):
            p.decoupled_grad = g
            r.grad = g.clone()
        opt.step()
        ref.step()
        opt.zero_grad()
        ref.zero_grad()
    assert opt.state_dict()["param_groups"][0]["step"] == 6
    for p, r in zip(params, ref_params):
        master = opt.get_unscaled_state(p, "master_param")
        assert master.dtype == torch.float32 and master.shape == p.shape
        torch.testing.assert_close(master, r.detach(), rtol=1e-5, atol=1e-6)
        torch.testing.assert_close(p.float(), r.detach(), rtol=1e-2, atol=1e-2)
        assert torch.equal(p, master.bfloat16())  # the engine wrote the bf16 shard
        st = ref.state[r]
        torch.testing.assert_close(opt.get_unscaled_state(p, "exp_avg"), st["exp_avg"],
                                   rtol=1e-5, atol=1e-7)
        torch.testing.assert_close(opt.get_unscaled_state(p, "exp_avg_sq"),
                                   st["exp_avg_sq"], rtol=1e-5, atol=1e-9)


def test_bit_identical_to_tandem_torch_adamw_f32():
    # fp32 gradients that bf16 holds exactly: the engine's fp32 and bf16 gradient paths
    # then feed the same numbers to the same update.
    params = shards()
    twins = [torch.nn.Parameter(p.clone()) for p in params]
    opt = tm.TandemAdam(groups_of(params), betas=(0.9, 0.95))
    other = tandem.torch.AdamW(groups_of(twins), betas=(0.9, 0.95))
    for s in range(5):
        apply_schedule(opt, s)
        apply_schedule(other, s)
        for p, t, g in zip(params, twins, grads_for(s, params, bf16_exact=True)):
            p.decoupled_grad = g
            t.grad = g.bfloat16()
        opt.step()
        other.step()
        opt.zero_grad()
        other.zero_grad()
    theirs = other.state_dict()["state"]
    for i, (p, t) in enumerate(zip(params, twins)):
        assert torch.equal(p.view(torch.int16), t.detach().view(torch.int16))
        for name, key in (("master_param", "master_f32"), ("exp_avg", "m_f32"),
                          ("exp_avg_sq", "v_f32")):
            assert torch.equal(opt.get_unscaled_state(p, name).view(torch.int32),
                               theirs[i][key].view(torch.int32)), (i, name)


def test_lr_ratio_changes_reach_the_engine():
    # A group at lr 0 must not move while the other does; then the roles swap.
    params = shards()
    opt = tm.TandemAdam(groups_of(params, lrs=(1e-2, 0.0), wds=(0.0, 0.0)))
    before = [p.clone() for p in params]
    for p, g in zip(params, grads_for(0, params)):
        p.decoupled_grad = g
    opt.step()
    assert not torch.equal(params[0], before[0])
    assert torch.equal(params[2], before[2]) and torch.equal(params[3], before[3])
    opt.param_groups[0]["lr"], opt.param_groups[1]["lr"] = 0.0, 1e-2
    moved = [p.clone() for p in params]
    opt.step()  # decoupled_grad still set: stepped again
    assert torch.equal(params[0], moved[0]) and not torch.equal(params[2], moved[2])


def test_a_parameter_without_gradient_is_not_stepped():
    params = shards()
    opt = tm.TandemAdam(groups_of(params))
    for p, g in zip(params[:3], grads_for(0, params)):
        p.decoupled_grad = g
    untouched = params[3].clone()
    opt.step()
    assert torch.equal(params[3], untouched)
    assert torch.count_nonzero(opt.get_unscaled_state(params[3], "exp_avg")) == 0
    assert opt.state_dict()["state"][3]["step"].item() == 0


def test_a_step_without_any_gradient_changes_nothing():
    # Megatron's dummy initialisation step: p.grad set (bf16), decoupled_grad not.
    params = shards()
    opt = tm.TandemAdam(groups_of(params))
    before = [p.clone() for p in params]
    for p in params:
        p.grad = torch.zeros_like(p)
    opt.step()
    opt.zero_grad()
    assert all(p.grad is None for p in params)
    assert all(torch.equal(a, b) for a, b in zip(params, before))
    assert opt.param_groups[0]["step"] == 0


@pytest.mark.parametrize("formats", [("f32", "f32", "f32"), ("f32", "q8", "q8"),
                                     ("bf16+ecc8", "q8", "q8"), ("bf16+ecc16", "f32", "q8")])
def test_unscaled_state_round_trips(formats):
    params = shards()
    opt = tm.TandemAdam(groups_of(params), master_format=formats[0],
                        momentum_format=formats[1], variance_format=formats[2])
    run_tandem(opt, params, 3)
    exact = formats == ("f32", "f32", "f32")
    for p in params:
        for name in ("master_param", "exp_avg", "exp_avg_sq"):
            got = opt.get_unscaled_state(p, name)
            assert got.dtype == torch.float32 and got.shape == p.shape
            assert torch.equal(got, opt.state[p][name])  # the state view decodes alike
            # Setting what was read changes nothing (decode then encode is stable), but
            # for bf16+ecc8 masters, whose 8-bit correction is rounded again.
            opt.set_scaled_state(p, name, got)
            if name == "master_param" and formats[0] == "bf16+ecc8":
                torch.testing.assert_close(opt.get_unscaled_state(p, name), got,
                                           rtol=1e-4, atol=0.0)
            else:
                assert torch.equal(opt.get_unscaled_state(p, name), got), name
            # New values come back exactly in f32, within the format's error otherwise.
            new = torch.rand(p.numel()) * (1e-3 if name == "exp_avg_sq" else 1.0)
            if name == "exp_avg":
                new -= 0.5
            if name == "master_param":
                new = p.float() + 1e-3 * new
            opt.set_scaled_state(p, name, new.clone())
            back = opt.get_unscaled_state(p, name)
            if exact:
                assert torch.equal(back, new)
            else:
                torch.testing.assert_close(back, new, rtol=3e-2, atol=3e-3 * new.abs().max())


@pytest.mark.parametrize("te", [False, True])
@pytest.mark.parametrize("formats", [("f32", "f32", "f32"), ("f32", "q8", "q8"),
                                     ("bf16+ecc8", "q8", "q8")])
def test_megatron_style_load_resumes_the_same_step(formats, te):
    """The DistributedOptimizer's load: placeholder tensors through load_state_dict (with
    the step in the groups), then every state through set_scaled_state; the next steps
    equal the uninterrupted run's (bf16+ecc8 masters: within the correction's rounding,
    since Megatron's checkpoints hold fp32 values). te: Megatron with TransformerEngine
    installed leaves the entries' stale "step" and passes the step in the groups only."""
    fmt = dict(master_format=formats[0], momentum_format=formats[1],
               variance_format=formats[2])
    params = shards()
    opt = tm.TandemAdam(groups_of(params), **fmt)
    run_tandem(opt, params, 3)
    saved = {id(p): {n: opt.get_unscaled_state(p, n) for n in ("master_param", "exp_avg",
                                                               "exp_avg_sq")}
             for p in params}
    groups = [{k: v for k, v in g.items() if k != "params"} for g in opt.param_groups]
    saved_params = [p.clone() for p in params]

    fresh = shards(seed=7)  # other weights: the load must bring the masters
    opt2 = tm.TandemAdam(groups_of(fresh), **fmt)
    placeholders = {i: {"exp_avg": torch.full((p.numel(),), float("nan")),
                        "exp_avg_sq": torch.empty(p.numel()),
                        "master_param": torch.empty(p.numel())}
                    for i, p in enumerate(fresh)}
    with_params = [dict(g, params=[0, 1]) if i == 0 else dict(g, params=[2, 3])
                   for i, g in enumerate(groups)]
    # DistributedOptimizer.sharded_state_dict(is_loading=True): load_state_dict(
    # state_dict()) on an optimizer without state, which allocates placeholders ...
    opt2.load_state_dict(opt2.state_dict())
    opt2.load_state_dict({"state": placeholders,
                          "param_groups": [dict(g, step=0) for g in with_params]})
    assert opt2.state_dict()["state"][0]["step"].item() == 0
    # ... then its load_state_dict(loaded) hands our own state_dict()'s entries back
    # with the checkpoint's step written into them ...
    inner = opt2.state_dict()
    for i, entry in inner["state"].items():
        assert set(entry) == {"step", "master_param", "exp_avg", "exp_avg_sq"}
        assert entry["exp_avg"].data_ptr() == placeholders[i]["exp_avg"].data_ptr()
        if not te:
            entry["step"] = torch.tensor(3.0)
    opt2.load_state_dict({"state": inner["state"], "param_groups": with_params})
    # ... and the checkpoint's values arrive one by one (dp_reshardable adds "padding").
    for p, q in zip(fresh, params):
        for name, value in saved[id(q)].items():
            opt2.set_scaled_state(p, name, value)
        opt2.set_scaled_state(p, "padding", False)
    run_tandem(opt, params, 2, start=3)
    run_tandem(opt2, fresh, 2, start=3)
    exact = formats[0] == "f32"
    for p, q in zip(fresh, params):
        for name in ("master_param", "exp_avg", "exp_avg_sq"):
            a, b = opt2.get_unscaled_state(p, name), opt.get_unscaled_state(q, name)
            if exact:
                assert torch.equal(a, b), name
            else:
                torch.testing.assert_close(a, b, rtol=1e-3, atol=1e-6)
        if exact:
            assert torch.equal(p.view(torch.int16), q.view(torch.int16))
    assert opt2.param_groups[0]["step"] == 5
    del saved_params


def test_unreplaced_placeholder_is_refused_at_the_step():
    params = shards()
    opt = tm.TandemAdam(groups_of(params))
    sd = {"state": {0: {"exp_avg": torch.full((params[0].numel(),), float("nan"))}},
          "param_groups": [dict(g, params=[0, 1]) if i == 0 else dict(g, params=[2, 3])
                           for i, g in enumerate(opt.state_dict()["param_groups"])]}
    opt.load_state_dict(sd)
    for p, g in zip(params, grads_for(0, params)):
        p.decoupled_grad = g
    with pytest.raises(ValueError, match="NaN|nan"):
        opt.step()


@pytest.mark.parametrize("formats", [("f32", "f32", "f32"), ("bf16+ecc8", "q8", "q8")])
def test_state_dict_round_trip(formats):
    fmt = dict(master_format=formats[0], momentum_format=formats[1],
               variance_format=formats[2])
    params = shards()
    opt = tm.TandemAdam(groups_of(params), **fmt)
    run_tandem(opt, params, 3)
    buf = io.BytesIO()
    torch.save(opt.state_dict(), buf)  # picklable: Megatron saves its groups
    buf.seek(0)
    sd = torch.load(buf, weights_only=False)
    assert sd["tandem"]["momentum"] == formats[1]
    assert sd["param_groups"][1]["wd_mult"] == 0.0 and sd["param_groups"][0]["step"] == 3

    fresh = shards(seed=3)
    opt2 = tm.TandemAdam(groups_of(fresh), **fmt)
    opt2.load_state_dict(sd)
    for p, q in zip(fresh, params):  # the parameters are set from the restored masters
        assert torch.equal(p.view(torch.int16), q.view(torch.int16))
    run_tandem(opt, params, 2, start=3)
    run_tandem(opt2, fresh, 2, start=3)
    for p, q in zip(fresh, params):
        assert torch.equal(p.view(torch.int16), q.view(torch.int16))
        assert torch.equal(opt2.get_unscaled_state(p, "exp_avg"),
                           opt.get_unscaled_state(q, "exp_avg"))

    # Its own state dict handed straight back (Megatron does this) changes nothing.
    sd = opt.state_dict()
    opt.load_state_dict(sd)
    assert opt.state_dict()["state"][0]["step"].item() == 5


def test_state_dict_of_other_formats_is_refused():
    params = shards()
    opt = tm.TandemAdam(groups_of(params), momentum_format="q8")
    run_tandem(opt, params, 1)
    sd = opt.state_dict()
    other = tm.TandemAdam(groups_of(shards()))
    with pytest.raises(ValueError, match="formats"):
        other.load_state_dict(sd)


def test_a_moved_gradient_buffer_is_read_where_it_is():
    # The engine takes each step's gradient pointers (StepOptions::grads): new buffers
    # every step cost no rebuild and give the bits of one fixed buffer.
    params = shards()
    ref_params = [p.clone() for p in params]
    opt = tm.TandemAdam(groups_of(params))
    ref = tm.TandemAdam(groups_of(ref_params))
    run_tandem(opt, params, 2)
    run_tandem(ref, ref_params, 2)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        run_tandem(opt, params, 3, start=2, new_buffers=True)
    run_tandem(ref, ref_params, 3, start=2)
    assert opt.rebuilds == 0 and ref.rebuilds == 0
    for p, q in zip(params, ref_params):
        assert torch.equal(p, q)
        assert torch.equal(opt.get_unscaled_state(p, "exp_avg_sq"),
                           ref.get_unscaled_state(q, "exp_avg_sq"))


def test_a_gradient_of_another_dtype_rebuilds_the_engine_with_its_state():
    # The engine reads the dtype it was built for: bf16 gradients after fp32 ones (and
    # back) rebuild it, carrying the state, with a warning from the second rebuild on.
    params = shards()
    ref_params = [p.clone() for p in params]
    opt = tm.TandemAdam(groups_of(params))
    ref = tm.TandemAdam(groups_of(ref_params))
    run_tandem(opt, params, 2, bf16_exact=True)
    run_tandem(ref, ref_params, 2, bf16_exact=True)
    with pytest.warns(UserWarning, match="gradient buffers moved"):
        for s, dtype in ((2, torch.bfloat16), (3, torch.float32)):
            apply_schedule(opt, s)
            apply_schedule(ref, s)
            for p, q, g in zip(params, ref_params, grads_for(s, params, bf16_exact=True)):
                p.decoupled_grad = g.to(dtype)
                q.decoupled_grad = g
            opt.step()
            ref.step()
    assert opt.rebuilds == 2 and ref.rebuilds == 0
    for p, q in zip(params, ref_params):  # gradients bf16 holds exactly: the same bits
        assert torch.equal(p, q)
        assert torch.equal(opt.get_unscaled_state(p, "exp_avg"),
                           ref.get_unscaled_state(q, "exp_avg"))


def test_masters_follow_weights_loaded_before_the_first_step():
    params = shards()
    opt = tm.TandemAdam(groups_of(params))
    opt.initialize_state(params[0])  # state exists (engine built) ...
    with torch.no_grad():
        params[0].fill_(0.5)  # ... then the model's weights are loaded
    assert torch.equal(opt.get_unscaled_state(params[0], "master_param"),
                       torch.full((params[0].numel(),), 0.5))


def test_refusals():
    params = shards()
    with pytest.raises(ValueError, match="bias_correction"):
        tm.TandemAdam(groups_of(params), bias_correction=False)
    with pytest.raises(ValueError, match="amsgrad"):
        tm.TandemAdam(groups_of(params), amsgrad=True)
    with pytest.raises(ValueError, match="exp_avg_dtype"):
        tm.TandemAdam(groups_of(params), exp_avg_dtype=torch.bfloat16)
    with pytest.raises(ValueError, match="store_param_remainders"):
        tm.TandemAdam(groups_of(params), store_param_remainders=True)
    opt = tm.TandemAdam(groups_of(params), exp_avg_dtype=torch.uint8)
    assert opt._formats == ("f32", "q8", "f32")
    with pytest.raises(KeyError, match="unknown state"):
        opt.get_unscaled_state(params[0], "exp_avg_sqq")
    with pytest.raises(ValueError, match="elements"):
        opt.set_scaled_state(params[0], "exp_avg", torch.zeros(3))
    with pytest.raises(KeyError, match="not a parameter"):
        opt.get_unscaled_state(torch.zeros(4, dtype=torch.bfloat16), "exp_avg")
    params[0].decoupled_grad = torch.zeros(5)
    with pytest.raises(ValueError, match="elements"):
        opt.step()


def test_get_megatron_optimizer_refuses_unsupported_configurations():
    from megatron.core.optimizer import OptimizerConfig
    chunk = types.SimpleNamespace(ddp_config=types.SimpleNamespace(
        use_megatron_fsdp=False, use_distributed_optimizer=True))
    good = dict(optimizer="adam", lr=1e-3, bf16=True, use_distributed_optimizer=True)
    cases = [(dict(good, optimizer="sgd"), "adam"),
             (dict(good, use_distributed_optimizer=False), "use_distributed_optimizer"),
             (dict(good, bf16=False), "bf16"),
             (dict(good, optimizer_cpu_offload=True), "offload_fraction")]
    for kwargs, match in cases:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            config = OptimizerConfig(**kwargs)
        with pytest.raises(ValueError, match=match):
            tm.get_megatron_optimizer(config, [chunk])
    # Megatron-FSDP chunks go to tandem.megatron_fsdp (tests/python_mfsdp), which refuses
    # what it does not support before Megatron builds anything.
    def fsdp(tp=1, **ddp):
        return types.SimpleNamespace(
            ddp_config=types.SimpleNamespace(use_megatron_fsdp=True,
                                             use_distributed_optimizer=True, **ddp),
            config=types.SimpleNamespace(tensor_model_parallel_size=tp))
    fsdp_cases = [(dict(good, optimizer="sgd"), fsdp(), "adam"),
                  (good, fsdp(tp=2), "tensor parallelism"),
                  (good, fsdp(outer_dp_sharding_strategy="optim"), "HFSDP"),
                  (dict(good, optimizer_cpu_offload=True, optimizer_offload_fraction=0.5),
                   fsdp(), "disagree"),
                  # Megatron's norm would read decoupled_grad, Megatron-FSDP sets grad.
                  (dict(good, use_precision_aware_optimizer=True),
                   fsdp(megatron_fsdp_use_decoupled_grad=False),
                   "megatron_fsdp_use_decoupled_grad=False")]
    for kwargs, chunk, match in fsdp_cases:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            # Set afterwards: OptimizerConfig's checks would ask for TransformerEngine.
            aware = kwargs.pop("use_precision_aware_optimizer", False)
            config = OptimizerConfig(**kwargs)
            config.use_precision_aware_optimizer = aware
        extra = {"offload_fraction": 1.0} if match == "disagree" else {}
        with pytest.raises(ValueError, match=match):
            tm.get_megatron_optimizer(config, [chunk], **extra)


def test_megatron_core_versions(monkeypatch):
    # Note [Megatron-Core versions]: the installed release passes; an older one, or one
    # without a hook tandem sets or calls, is refused before Megatron builds anything.
    import megatron.core
    from megatron.core.optimizer import OptimizerConfig
    from megatron.core.optimizer.distrib_optimizer import DistributedOptimizer
    from tandem.megatron import _adam as _megatron_adam
    assert _megatron_adam.require_megatron_core() >= _megatron_adam.OLDEST_MEGATRON_CORE
    for text, parsed in (("0.16.1", (0, 16, 1)), ("0.19.2rc1", (0, 19, 2)),
                         ("0.20.0.dev0+abc", (0, 20, 0)), ("1.0", (1, 0, 0))):
        monkeypatch.setattr(megatron.core, "__version__", text)
        assert _megatron_adam.megatron_core_version() == parsed
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        config = OptimizerConfig(optimizer="adam", lr=1e-3, bf16=True,
                                 use_distributed_optimizer=True)
    chunk = types.SimpleNamespace(ddp_config=types.SimpleNamespace(
        use_megatron_fsdp=False, use_distributed_optimizer=True))
    monkeypatch.setattr(megatron.core, "__version__", "0.15.3")
    with pytest.raises(RuntimeError, match=r"megatron-core 0\.16\.1 or newer; 0\.15\.3"):
        tm.get_megatron_optimizer(config, [chunk])
    monkeypatch.setattr(megatron.core, "__version__", "unknown")
    with pytest.raises(RuntimeError, match="cannot read megatron-core's version"):
        tm.get_megatron_optimizer(config, [chunk])
    monkeypatch.setattr(megatron.core, "__version__", "0.99.0")
    monkeypatch.delattr(DistributedOptimizer, "sharded_param_state_fsdp_dtensor")
    with pytest.raises(RuntimeError, match="has no DistributedOptimizer."
                       "sharded_param_state_fsdp_dtensor"):
        tm.get_megatron_optimizer(config, [chunk])


def test_state_dict_before_any_state():
    # Megatron builds its DistributedOptimizer with load_state_dict(state_dict()) and
    # reads one "step" per state entry: no state is created by either.
    params = shards()
    opt = tm.TandemAdam(groups_of(params))
    sd = opt.state_dict()
    assert sorted(sd["state"]) == [0, 1, 2, 3]
    assert all(e["step"].item() == 0 for e in sd["state"].values())
    opt.load_state_dict(sd)
    assert len(opt.state) == 0 and opt.mode is None
    with torch.no_grad():
        params[1].fill_(0.25)  # weights loaded later reach the masters
    run_tandem(opt, params, 1)
    ref = [p.float() for p in shards()]
    ref[1].fill_(0.25)
    assert opt.mode == "host"
    assert not torch.equal(params[0].float(), ref[0])
    assert torch.allclose(params[1].float(), ref[1], atol=0.02)


def test_megatrons_distributed_optimizer_on_the_cpu(tmp_path):
    """tests/megatron/cpu_smoke.py: gpt_proof.py with Megatron's CUDA calls redirected
    to the CPU, i.e. Megatron's DDP, DistributedOptimizer, scheduler and distributed
    checkpoints around TandemAdam (host mode), against Megatron's own optimizer."""
    pytest.importorskip("psutil", reason="megatron.core.dist_checkpointing needs psutil")
    import json
    import os
    import pathlib
    import socket
    import subprocess
    import sys
    root = pathlib.Path(__file__).resolve().parents[2]
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    out = tmp_path / "smoke.json"
    env = dict(os.environ, MASTER_PORT=str(port), TMPDIR=str(tmp_path))
    proc = subprocess.run(
        [sys.executable, str(root / "tests/megatron/cpu_smoke.py"), "--steps", "4",
         "--resume-at", "2", "--layers", "1", "--hidden", "64", "--heads", "4", "--vocab",
         "256", "--seq", "32", "--micro-batch", "2", "--out", str(out)],
        env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    result = json.loads(out.read_text())
    assert result["ok"] and not result["errors"]
    assert result["checks"]["off0_vs_off1"]["identical"]
    assert len(result["resume"]) == 6
    assert all(r["state_equal"] for k, r in result["resume"].items() if "q8" not in k)


def test_a_refused_state_dict_changes_nothing():
    params = shards()
    opt = tm.TandemAdam(groups_of(params))
    run_tandem(opt, params, 2)
    sd = opt.state_dict()
    bad = {"state": {i: dict(e) for i, e in sd["state"].items()},
           "param_groups": [dict(g, lr=123.0) for g in sd["param_groups"]],
           "tandem": sd["tandem"]}
    bad["state"][2]["m_f32"] = bad["state"][2]["m_f32"][:-1]  # one element short
    before = [p.clone() for p in params]
    exp_avg = opt.get_unscaled_state(params[2], "exp_avg")
    with pytest.raises(ValueError, match="m_f32"):
        opt.load_state_dict(bad)
    assert all(g["lr"] != 123.0 for g in opt.param_groups)
    assert all(torch.equal(a, b) for a, b in zip(params, before))
    assert torch.equal(opt.get_unscaled_state(params[2], "exp_avg"), exp_avg)
    run_tandem(opt, params, 1, start=2)  # still steps
    assert opt.param_groups[0]["step"] == 3


def test_a_rank_that_owns_no_element():
    # The distributed optimizer's groups on a rank may hold no shard (or empty ones).
    empty = torch.zeros(0, dtype=torch.bfloat16)
    opt = tm.TandemAdam([{"params": [], "lr": 1e-3}, {"params": [empty], "lr": 1e-3}])
    empty.decoupled_grad = torch.zeros(0)
    opt.step()
    opt.reload_params()
    assert len(opt.state) == 0 and opt.state_dict()["state"][0]["step"].item() == 0
    params = shards()
    opt = tm.TandemAdam([{"params": params[:2], "lr": 1e-2}, {"params": [], "lr": 1e-2}])
    run_tandem(opt, params[:2], 2)
    assert opt.param_groups[1]["step"] == 2
