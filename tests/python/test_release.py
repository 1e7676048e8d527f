"""Gradient release in plain loops (release_grads=True; docs/python.md, "Gradient
release"): each gradient is handed to the engine from autograd's post-accumulate-grad
hook and p.grad is None after backward; the steps give the bits of the same loop without
release, at every offload fraction and compute share, with and without speculation,
through steps that clip, a non-finite step and loss scaling. What cannot be exact is
refused with the reason and changes nothing (host mode, CPU)."""

import math

import pytest
import torch

import tandem.torch
from helpers import batches, make_mlp, params_bits, same_bits

Q8 = dict(master_format="bf16+ecc8", momentum_format="q8", variance_format="q8")
STEPS = 8
CLIP_STEPS = (2, 5)   # the loss is scaled up: clipping triggers
NAN_STEP = 6          # a NaN in the loss: every gradient is NaN, the step is skipped


def make(fraction=0.5, compute="host", release=False, speculative=False, early=False,
         formats=Q8, model=None, device="cpu"):
    model = make_mlp(seed=21).to(device) if model is None else model
    opt = tandem.torch.AdamW(model.named_parameters(), lr=3e-3, weight_decay=0.1,
                             offload_fraction=fraction, offload_compute=compute,
                             chunk_elements=64, stream_chunk_bytes=4096, max_grad_norm=2.0,
                             release_grads=release, speculative_early_start=speculative,
                             early_start=early, **formats)
    return model, opt


def loss_of(model, x, y, t):
    loss = torch.nn.functional.mse_loss(model(x), y)
    if t in CLIP_STEPS:
        loss = loss * 1000.0
    if t == NAN_STEP:
        loss = loss * float("nan")
    return loss


def train(fraction=0.5, compute="host", release=False, speculative=False, early=False,
          k=1, use_context=False, device="cpu"):
    """STEPS steps of k micro-batches; returns (parameter bits, state bits, results,
    whether every p.grad was None after each step's backward, the optimizer)."""
    model, opt = make(fraction, compute, release, speculative, early, device=device)
    data = [(x.to(device), y.to(device)) for x, y in batches(STEPS * k, seed=22)]
    results, released = [], []
    for t in range(STEPS):
        opt.zero_grad()
        if speculative:
            opt.begin_step(loss_scale=4.0 if t % 2 else 1.0)
        for i in range(k):
            x, y = data[t * k + i]
            loss = loss_of(model, x, y, t) / k
            if t % 2:
                loss = loss * 4.0
            if use_context and i < k - 1:
                with opt.accumulating():
                    loss.backward()
            else:
                loss.backward()
        released.append(all(p.grad is None for p in model.parameters()))
        opt.step(loss_scale=4.0 if t % 2 else 1.0)
        results.append((opt.last_result.applied, opt.last_result.grad_norm))
    return [b.cpu() for b in params_bits(model)], state_bits(opt), results, released, opt


def state_bits(opt):
    out = []
    for entry in opt.state_dict()["state"].values():
        for key in sorted(entry):
            value = entry[key]
            if isinstance(value, torch.Tensor):
                out.append(value.reshape(-1).contiguous().view(torch.uint8).clone())
    return out


def check_reference(results):
    applied = [a for a, _ in results]
    assert applied.count(False) == 1 and not applied[NAN_STEP]
    assert all(norm > 2.0 for t, (_, norm) in enumerate(results) if t in CLIP_STEPS)
    assert any(norm < 2.0 for _, norm in results)


def release_bits(fraction, compute, device="cpu"):
    """Release (with and without speculation) against the same loop without it, bit
    for bit; returns the reference run."""
    ref = train(fraction, compute, device=device)
    check_reference(ref[2])
    assert not any(ref[3])  # without release, p.grad is kept
    for speculative in (False, True):
        got = train(fraction, compute, release=True, speculative=speculative, device=device)
        assert all(got[3]), "p.grad was not None after backward"
        assert got[2] == ref[2]
        assert same_bits(got[0], ref[0]), "parameters differ"
        assert same_bits(got[1], ref[1]), "states differ"
        if device != "cpu":
            torch.cuda.synchronize()
        got[4]._core.prune_held()
        assert got[4]._core.held == []  # every released gradient freed once read
    return ref


@pytest.mark.parametrize("fraction", [0.0, 0.5, 1.0])
@pytest.mark.parametrize("compute", ["host", "gpu", "0.5"])
def test_release_is_bit_identical_to_no_release(fraction, compute):
    release_bits(fraction, compute)


@pytest.mark.parametrize("k", [2, 3])
def test_accumulating_context_is_exact_with_release(k):
    ref = train(1.0, k=k)
    got = train(1.0, release=True, k=k, use_context=True)
    assert all(got[3]) and got[2] == ref[2]
    assert same_bits(got[0], ref[0]) and same_bits(got[1], ref[1])


def expect_same_training(model, opt, ref_model, ref, data):
    """Trains both on `data` and checks that they end with the same bits."""
    for x, y in data:
        for m, o in ((model, opt), (ref_model, ref)):
            o.zero_grad()
            torch.nn.functional.mse_loss(m(x), y).backward()
            o.step()
    assert same_bits(params_bits(model), params_bits(ref_model))
    assert same_bits(state_bits(opt), state_bits(ref))


def test_a_second_gradient_refuses_the_step_and_changes_nothing():
    model, opt = make(release=True)
    ref_model, ref = make()
    data = batches(3, seed=23)
    x, y = data[0]
    torch.nn.functional.mse_loss(model(x), y).backward()
    with pytest.raises(RuntimeError, match=r"^release_grads: parameter '[^']+' \(shape "
                                           r"\(.*?\), torch\.\w+\) got a second gradient in "
                                           r"one step.*accumulating"):
        torch.nn.functional.mse_loss(model(x), y).backward()
    with pytest.raises(RuntimeError, match=r"second gradient.*nothing changed"):
        opt.step()
    assert opt.step_count == 0
    opt.zero_grad()  # drops the step
    expect_same_training(model, opt, ref_model, ref, data[1:])


def test_zero_grad_after_backward_drops_the_released_gradients():
    model, opt = make(release=True, speculative=True)
    ref_model, ref = make()
    data = batches(3, seed=24)
    opt.begin_step()
    torch.nn.functional.mse_loss(model(data[0][0]), data[0][1]).backward()
    opt.zero_grad()  # the batch is dropped: no step, and the speculation undone
    assert not opt._core.step_begun
    expect_same_training(model, opt, ref_model, ref, data[1:])


def test_a_gradient_set_after_the_release_is_refused():
    model, opt = make(release=True)
    x, y = batches(1, seed=25)[0]
    torch.nn.functional.mse_loss(model(x), y).backward()
    weight = model[0].weight
    weight.grad = torch.ones_like(weight)
    with pytest.raises(ValueError, match=r"'0.weight' .*: p.grad was set after its "
                                         r"gradient was released.*nothing changed"):
        opt.step()
    assert opt.step_count == 0
    weight.grad = None
    opt.step()  # what backward handed over
    assert opt.step_count == 1 and opt.last_result.applied


def test_clip_grad_norm_sees_no_gradient_and_max_grad_norm_clips():
    model, opt = make(release=True)
    x, y = batches(1, seed=27)[0]
    (torch.nn.functional.mse_loss(model(x), y) * 1000.0).backward()
    assert float(torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)) == 0.0
    opt.step()
    assert opt.last_result.grad_norm > 2.0  # clipped to max_grad_norm=2 inside the step


def test_unfreezing_under_release_steps_the_new_parameters_exactly():
    def run(release):
        model, opt = make(release=release)
        head = model[4]
        head.requires_grad_(False)
        model, opt = make(release=release, model=model)
        data = batches(4, seed=28)
        for t, (x, y) in enumerate(data):
            if t == 2:
                head.requires_grad_(True)
            opt.zero_grad()
            torch.nn.functional.mse_loss(model(x), y).backward()
            opt.step()
        return params_bits(model), state_bits(opt), opt
    ref, got = run(False), run(True)
    assert same_bits(got[0], ref[0]) and same_bits(got[1], ref[1])
    assert got[2].rebinds == 1
    # The step that unfroze the head read its gradients at step(); the next one released
    # them all again, the head's included.
    assert all(p.grad is None for group in got[2].param_groups for p in group["params"])


def test_released_gradients_are_freed_once_consumed():
    model, opt = make(fraction=1.0, release=True)
    x, y = batches(1, seed=29)[0]
    torch.nn.functional.mse_loss(model(x), y).backward()
    opt.step()
    assert opt._core.held == []  # host mode: consumed by the end of the step
    assert math.isfinite(opt.last_result.grad_norm)


@pytest.mark.parametrize("fraction", [0.0, 0.5, 1.0])
@pytest.mark.parametrize("how", ["state_dict", "checkpoint"])
def test_a_load_between_backward_and_step_keeps_the_released_gradients(fraction, how,
                                                                        tmp_path):
    """load_state_dict / load_checkpoint after backward: the step steps the loaded state
    with the gradients released in that backward, as the same loop without release steps
    it with p.grad."""
    data = batches(4, seed=31)
    runs = []
    for release in (False, True):
        model, opt = make(fraction, release=release)
        for x, y in data[:2]:
            opt.zero_grad()
            torch.nn.functional.mse_loss(model(x), y).backward()
            opt.step()
        saved = opt.state_dict()
        path = str(tmp_path / ("r%d.ckpt" % release))
        opt.save_checkpoint(path)
        weights = [p.detach().clone() for p in model.parameters()]
        opt.zero_grad()
        torch.nn.functional.mse_loss(model(data[2][0]), data[2][1]).backward()
        opt.step()  # moves on; the load brings the state back
        with torch.no_grad():
            for p, w in zip(model.parameters(), weights):
                p.copy_(w)
        opt.zero_grad()
        torch.nn.functional.mse_loss(model(data[3][0]), data[3][1]).backward()
        assert all(p.grad is None for p in model.parameters()) == release
        if how == "state_dict":
            opt.load_state_dict(saved)
        else:
            opt.load_checkpoint(path)
        opt.step()
        assert opt.last_result.stepped_tensors == len(list(model.parameters()))
        runs.append((params_bits(model), state_bits(opt), opt.last_result.grad_norm))
    assert runs[1][2] == runs[0][2]
    assert same_bits(runs[1][0], runs[0][0]), "parameters differ"
    assert same_bits(runs[1][1], runs[0][1]), "states differ"


def test_a_load_between_begin_step_and_step_is_refused_and_changes_nothing():
    model, opt = make(release=True, speculative=True)
    ref_model, ref = make()
    data = batches(3, seed=32)
    for m, o in ((model, opt), (ref_model, ref)):
        o.zero_grad()
        torch.nn.functional.mse_loss(m(data[0][0]), data[0][1]).backward()
        o.step()
    saved = opt.state_dict()
    opt.begin_step()
    torch.nn.functional.mse_loss(model(data[1][0]), data[1][1]).backward()
    with pytest.raises(ValueError, match=r"load_state_dict between begin_step\(\) and step\(\).*"
                                         r"Nothing changed"):
        opt.load_state_dict(saved)
    opt.step()
    ref.zero_grad()
    torch.nn.functional.mse_loss(ref_model(data[1][0]), data[1][1]).backward()
    ref.step()
    assert same_bits(params_bits(model), params_bits(ref_model))


def test_a_parameter_shared_with_another_live_optimizer_is_refused():
    """With release_grads one optimizer takes each gradient and sets p.grad = None: a
    second live tandem optimizer over the same parameter would step without it. Both
    refuse to step, naming the parameter; once the other is gone the step goes on, bit
    for bit as an optimizer that was alone."""
    import gc
    model, opt = make(release=True)
    ref_model, ref = make()
    other = tandem.torch.AdamW(model[0].parameters(), lr=1e-3)  # overlaps, no release
    apart = tandem.torch.AdamW(torch.nn.Linear(3, 3).parameters(), release_grads=True)
    data = batches(3, seed=33)
    torch.nn.functional.mse_loss(model(data[0][0]), data[0][1]).backward()
    for o in (opt, other):
        with pytest.raises(ValueError, match=r"release_grads: parameter '(0\.weight|g0\.p0)' "
                                             r"\(shape \(37, 13\).*is also stepped by another "
                                             r"live tandem optimizer.*Nothing was stepped"):
            o.step()
    assert opt.step_count == 0 and other.step_count == 0
    del other, o
    gc.collect()
    opt.zero_grad()
    expect_same_training(model, opt, ref_model, ref, data)
    # A new optimizer that replaces the old one under the same name is not refused.
    opt = tandem.torch.AdamW(model.parameters(), lr=1e-3, release_grads=True)
    opt = tandem.torch.AdamW(model.parameters(), lr=1e-3, release_grads=True)
    torch.nn.functional.mse_loss(model(data[0][0]), data[0][1]).backward()
    opt.step()
    del apart
