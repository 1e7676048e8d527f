"""(b) Exactness: bit-identity across offload fractions, placements, chunk sizes, thread
counts and early start; and bit-identity with a float32 NumPy re-implementation of the
reference formulas (docs/numerics.md) for fp32 formats."""


import numpy as np
import pytest
import torch

import tandem.torch
from helpers import batches, make_mlp, params_bits, same_bits, train

F32 = np.float32


def run(fraction, early_start=False, **options):
    model = make_mlp(seed=5)
    opt = tandem.torch.AdamW(model.parameters(), lr=3e-3, weight_decay=0.1,
                             offload_fraction=fraction, early_start=early_start,
                             chunk_elements=64, **options)
    losses = train(model, opt, batches(25, seed=6))
    return losses, params_bits(model), opt.state_dict()


def state_bits(sd):
    out = []
    for i in sorted(sd["state"]):
        for name, t in sorted(sd["state"][i].items()):
            out.append((i, name, t.view(torch.int16) if t.dtype == torch.bfloat16 else t))
    return out


def same_state(a, b):
    sa, sb = state_bits(a), state_bits(b)
    return len(sa) == len(sb) and all(
        x[0] == y[0] and x[1] == y[1] and torch.equal(x[2], y[2]) for x, y in zip(sa, sb))


@pytest.mark.parametrize("formats", [
    dict(master="f32", momentum="f32", variance="f32"),
    dict(master="bf16+ecc8", momentum="q8", variance="q8"),
    dict(master="bf16+ecc16", momentum="q8", variance="f32"),
])
def test_bit_identical_across_fractions(formats):
    base_losses, base_params, base_state = run(0.0, **formats)
    variants = [
        dict(fraction=0.5),
        dict(fraction=1.0),
        dict(fraction=0.5, placement="largest_first", host_threads=1),
        dict(fraction=0.5, placement="forward_order", pipeline_slots=2),
        dict(fraction=1.0, early_start=True),
        dict(fraction=0.5, early_start=True, host_threads=2),
    ]
    for v in variants:
        losses, params, state = run(**v, **formats)
        assert losses == base_losses, v
        assert same_bits(params, base_params), v
        assert same_state(state, base_state), v


def step_scalars(algo, lr, t, b1=0.9, b2=0.999, eps=1e-8, wd=0.0, momentum=0.0,
                 dampening=0.0):
    """engine/step_scalars.cc: computed in double, rounded once to float32."""
    s = dict(lr=F32(lr), beta1=F32(b1), beta2=F32(b2), omb1=F32(1.0 - b1),
             omb2=F32(1.0 - b2), eps=F32(eps), wd=F32(wd), decay=F32(1.0 - lr * wd),
             momentum=F32(momentum), omd=F32(1.0 - dampening))
    if algo in ("adamw", "adam"):
        s["step_size"] = F32(lr / (1.0 - b1 ** t))
        s["inv_sqrt_bc2"] = F32(1.0 / np.sqrt(1.0 - b2 ** t))
    return s


def reference_step(algo, w, g, st, s, t, nesterov=False):
    """One update in float32, one rounding per operation, in the order of
    docs/numerics.md (grad_mul is 1: no clipping, no loss scale)."""
    g = g * F32(1.0)
    if algo in ("adamw", "adam"):
        if algo == "adam" and s["wd"] != 0:
            g = g + s["wd"] * w
        st["m"] = s["beta1"] * st["m"] + s["omb1"] * g
        st["v"] = s["beta2"] * st["v"] + s["omb2"] * (g * g)
        if algo == "adamw":
            w = w * s["decay"]
        r = np.sqrt(st["v"])
        denom = r * s["inv_sqrt_bc2"] + s["eps"]
        w = w - s["step_size"] * (st["m"] / denom)
    elif algo == "lion":
        w = w * s["decay"]
        c = s["beta1"] * st["m"] + s["omb1"] * g
        w = w - np.where(c > 0, s["lr"], np.where(c < 0, -s["lr"], F32(0)))
        st["m"] = s["beta2"] * st["m"] + s["omb2"] * g
    elif algo == "sgd":
        if s["wd"] != 0:
            g = g + s["wd"] * w
        if s["momentum"] != 0:
            st["m"] = g if t == 1 else s["momentum"] * st["m"] + s["omd"] * g
            g = g + s["momentum"] * st["m"] if nesterov else st["m"]
        w = w - s["lr"] * g
    return w.astype(F32)


@pytest.mark.parametrize("algo,kwargs", [
    ("adamw", dict(lr=1e-2, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.1)),
    ("adam", dict(lr=1e-2, betas=(0.8, 0.99), eps=1e-6, weight_decay=0.01)),
    ("lion", dict(lr=1e-3, betas=(0.9, 0.99), weight_decay=0.1)),
    ("sgd", dict(lr=0.05, momentum=0.9, dampening=0.0, weight_decay=1e-3, nesterov=True)),
    ("sgd", dict(lr=0.05, momentum=0.7, dampening=0.2, weight_decay=0.0)),
])
@pytest.mark.parametrize("fraction", [0.0, 0.5])
def test_bit_identical_to_numpy_reference(algo, kwargs, fraction):
    cls = {"adamw": tandem.torch.AdamW, "adam": tandem.torch.Adam,
           "lion": tandem.torch.Lion, "sgd": tandem.torch.SGD}[algo]
    model = make_mlp(seed=9)
    weights = [p.detach().numpy().copy() for p in model.parameters()]
    states = [dict(m=np.zeros_like(w), v=np.zeros_like(w)) for w in weights]
    opt = cls(model.parameters(), offload_fraction=fraction, chunk_elements=96, **kwargs)
    b1, b2 = kwargs.get("betas", (0.9, 0.999))
    for t, (x, y) in enumerate(batches(3, seed=10), start=1):
        opt.zero_grad()
        torch.nn.functional.mse_loss(model(x), y).backward()
        grads = [p.grad.numpy().copy() for p in model.parameters()]
        opt.step()
        s = step_scalars(algo, kwargs["lr"], t, b1, b2, kwargs.get("eps", 1e-8),
                         kwargs.get("weight_decay", 0.0), kwargs.get("momentum", 0.0),
                         kwargs.get("dampening", 0.0))
        for i, g in enumerate(grads):
            weights[i] = reference_step(algo, weights[i], g, states[i], s, t,
                                        kwargs.get("nesterov", False))
        for w, p in zip(weights, model.parameters()):
            got = p.detach().numpy()
            assert np.array_equal(w.view(np.int32), got.view(np.int32)), \
                "step %d: %d elements differ" % (t, int((w != got).sum()))


def test_early_start_hooks_call_grad_ready():
    model = make_mlp()
    opt = tandem.torch.AdamW(model.parameters(), lr=1e-3, offload_fraction=1.0,
                             early_start=True)
    staging = opt.memory()["host"]["staging"]
    train(model, opt, batches(1))
    # GradReady allocates the full-size early-start gradient buffer on first use.
    assert opt.memory()["host"]["staging"] > staging
    opt.early_start = False  # e.g. for micro-batches of gradient accumulation
    train(model, opt, batches(1))


def test_wait_param_and_forward_waits_are_noops_in_host_mode():
    model = make_mlp()
    opt = tandem.torch.AdamW(model.parameters(), lr=1e-3)
    handles = opt.register_forward_waits(model)
    assert len(handles) == 3  # the three Linear layers
    opt.wait_param(model[0].weight)
    train(model, opt, batches(2))
    for h in handles:
        h.remove()


def test_built_under_no_grad_with_early_start():
    model = make_mlp()
    with torch.no_grad():
        opt = tandem.torch.AdamW(model.parameters(), lr=1e-3, offload_fraction=1.0,
                                 early_start=True)
    train(model, opt, batches(2))


@pytest.mark.parametrize("dtype", [torch.bfloat16])  # CPU torch 1.13 has no f16 matmul
def test_half_precision_params_bit_identical_across_fractions(dtype):
    results = []
    for fraction in (0.0, 0.5, 1.0):
        model = make_mlp(seed=4, dtype=dtype)
        opt = tandem.torch.AdamW(model.parameters(), lr=1e-2, offload_fraction=fraction,
                                 master="bf16+ecc8", momentum="q8", variance="q8",
                                 chunk_elements=64, early_start=fraction == 1.0)
        losses = train(model, opt, batches(10, seed=5, dtype=dtype))
        results.append((losses, params_bits(model)))
    for losses, bits in results[1:]:
        assert losses == results[0][0]
        assert same_bits(bits, results[0][1])


def run_speculative(speculative, fraction, formats):
    """20 steps with max_grad_norm 1.0 and a scheduler; steps 4 and 11 get a NaN gradient
    (skipped), and the loss is scaled up at steps 7 and 15 so clipping triggers there."""
    model = make_mlp(seed=7)
    opt = tandem.torch.AdamW(model.parameters(), lr=3e-3, weight_decay=0.1,
                             offload_fraction=fraction, chunk_elements=64,
                             max_grad_norm=1.0, speculative_early_start=speculative,
                             **formats)
    sched = torch.optim.lr_scheduler.StepLR(opt, step_size=5, gamma=0.5)
    applied, undone = [], []
    for t, (x, y) in enumerate(batches(20, seed=8)):
        opt.zero_grad()
        if speculative:
            opt.begin_step()
        loss = torch.nn.functional.mse_loss(model(x), y) * (50.0 if t in (7, 15) else 0.01)
        if t in (4, 11):
            loss = loss * float("nan")
        loss.backward()
        opt.step()
        sched.step()
        applied.append(opt.last_result.applied)
        times = opt.last_step_times()
        # A speculated step that clips or skips is undone: its chunks rolled back, or its
        # speculation stopped once the partials handed so far showed it.
        undone.append(times["rolled_back_chunks"] > 0 or times["speculation_stopped"])
    return applied, params_bits(model), opt.state_dict(), undone


@pytest.mark.parametrize("formats", [
    dict(master="f32", momentum="f32", variance="f32"),
    dict(master="bf16+ecc8", momentum="q8", variance="q8"),
])
@pytest.mark.parametrize("fraction", [0.5, 1.0])
def test_speculative_early_start_is_bit_identical(formats, fraction):
    base_applied, base_params, base_state, _ = run_speculative(False, fraction, formats)
    applied, params, state, undone = run_speculative(True, fraction, formats)
    assert base_applied == applied
    assert applied.count(False) == 2
    # the NaN and clipped steps were speculated, then undone
    assert [undone[t] for t in (4, 7, 11, 15)] == [True] * 4
    assert same_bits(params, base_params)
    assert same_state(state, base_state)


def test_speculative_early_start_misuse():
    model = make_mlp()
    plain = tandem.torch.AdamW(model.parameters(), lr=1e-3, offload_fraction=0.5)
    with pytest.raises(ValueError, match="speculative_early_start"):
        plain.begin_step()
    opt = tandem.torch.AdamW(model.parameters(), lr=1e-3, offload_fraction=0.5,
                             speculative_early_start=True)
    assert opt.memory()["host"]["speculation"] > 0
    before = params_bits(model)
    opt.begin_step()
    with pytest.raises(ValueError, match="twice"):
        opt.begin_step()
    with pytest.raises(ValueError):
        opt.state_dict()  # the engine refuses a snapshot while a step is begun
    x, y = batches(1)[0]
    torch.nn.functional.mse_loss(model(x), y).backward()
    with pytest.raises(ValueError):
        opt.step(loss_scale=2.0)  # differs from begin_step: undone, nothing changed
    assert same_bits(params_bits(model), before)
    opt.begin_step()
    opt.step()
    assert opt.last_result.applied
    assert not same_bits(params_bits(model), before)
