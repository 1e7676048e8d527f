"""Rebinding (Note [Rebinding] in python/tandem/_core/engine.py): a parameter frozen when
the optimizer is built and unfrozen later is stepped from then on, as torch.optim does
(progressive unfreezing), and parameters reallocated after construction (p.data = ...,
model.to()) keep their state; the engine is rebuilt over the current parameters with the
state carried over bit for bit. Host mode at offload fractions 0, 0.5 and 1; the GPU
variants at the end skip without a CUDA device."""

import copy
import warnings

import numpy
import pytest
import torch

import tandem.torch
from helpers import batches, make_mlp, params_bits, same_bits
from test_vs_torch import max_rel_diff

FRACTIONS = (0.0, 0.5, 1.0)
F32 = dict(master_format="f32")
QUANTIZED = dict(master_format="bf16+ecc8", momentum_format="q8", variance_format="q8")
needs_cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")


def adamw(params, fraction=0.0, **formats):
    return tandem.torch.AdamW(params, lr=1e-2, weight_decay=0.05, offload_fraction=fraction,
                              chunk_elements=64, **formats)


def backward(model, x, y):
    device = next(model.parameters()).device
    loss = torch.nn.functional.mse_loss(model(x.to(device)).float(), y.to(device).float())
    loss.backward()


def train(model, opt, data, between=None):
    """One step per batch; between(t) runs after backward, before step."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", tandem.torch.RebindWarning)
        for t, (x, y) in enumerate(data):
            opt.zero_grad()
            backward(model, x, y)
            if between is not None:
                between(t)
            opt.step()


def snapshot_of(opt):
    """The engine's per-tensor state by name: step and arrays (as NumPy arrays)."""
    return {t["name"]: t for t in opt._core.engine.snapshot()["tensors"]}


def same_state(a, b):
    """Whether two per-tensor snapshot entries hold the same step and arrays, bitwise."""
    keys = [k for k in a if isinstance(a[k], numpy.ndarray)]
    return (a["step"] == b["step"] and sorted(keys) == sorted(
        k for k in b if isinstance(b[k], numpy.ndarray))
        and all(numpy.array_equal(a[k], b[k]) for k in keys))


# ---------------------------------------------------------------------------------------
# (a) Progressive unfreezing


@pytest.mark.parametrize("fraction", FRACTIONS)
def test_progressive_unfreezing_matches_torch(fraction):
    ours = make_mlp()
    theirs = copy.deepcopy(ours)
    for model in (ours, theirs):
        model[0].requires_grad_(False)  # the "backbone", frozen for the first epoch
    opt = adamw(ours.parameters(), fraction, **F32)
    ref = torch.optim.AdamW(theirs.parameters(), lr=1e-2, weight_decay=0.05)
    assert opt.param_names == ["g0.p2", "g0.p3", "g0.p4", "g0.p5"]
    data = batches(6, seed=5)
    train(ours, opt, data[:3])
    train(theirs, ref, data[:3])
    assert opt.tensor_step_counts() == [3, 3, 3, 3] and opt.rebinds == 0
    for model in (ours, theirs):
        model[0].requires_grad_(True)
    train(ours, opt, data[3:])
    train(theirs, ref, data[3:])
    assert max_rel_diff(ours, theirs) < 1e-5
    assert opt.param_names == ["g0.p%d" % k for k in range(6)]
    assert opt.tensor_step_counts() == [3, 3, 6, 6, 6, 6]
    assert [ref.state[p]["step"].item() for p in theirs.parameters()] == [3, 3, 6, 6, 6, 6]
    assert opt.rebinds == 1 and opt.step_count == 6


def run_unfreeze_with_fresh_layer(fraction, formats):
    """Trains a model with layer 0 frozen for 3 steps, then unfrozen for 3; a second
    optimizer built at the unfreeze over a copy of layer 0 gets the same gradients."""
    model = make_mlp()
    model[0].requires_grad_(False)
    opt = adamw(model.named_parameters(), fraction, **formats)
    data = batches(6, seed=6)
    train(model, opt, data[:3])
    model[0].requires_grad_(True)
    layer = copy.deepcopy(model[0])
    fresh = adamw(layer.named_parameters(prefix="0"), fraction, **formats)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", tandem.torch.RebindWarning)
        for x, y in data[3:]:
            opt.zero_grad()
            fresh.zero_grad()
            backward(model, x, y)
            layer.weight.grad = model[0].weight.grad.clone()
            layer.bias.grad = model[0].bias.grad.clone()
            opt.step()
            fresh.step()
    return model, opt, layer, fresh


@pytest.mark.parametrize("fraction", FRACTIONS)
@pytest.mark.parametrize("formats", [F32, QUANTIZED])
def test_unfrozen_layer_steps_as_a_new_optimizer_would(fraction, formats):
    model, opt, layer, fresh = run_unfreeze_with_fresh_layer(fraction, formats)
    assert same_bits(params_bits(layer), params_bits(model[0]))
    ours, new = snapshot_of(opt), snapshot_of(fresh)
    for name in ("0.weight", "0.bias"):
        assert same_state(ours[name], new[name]), name
    assert opt.tensor_step_counts() == [3, 3, 6, 6, 6, 6]


@pytest.mark.parametrize("formats", [F32, QUANTIZED])
def test_rebind_leaves_the_other_layers_bit_identical(formats):
    # Layers 2 and 4 train all along; unfreezing layer 0 (the first layer: its gradient
    # does not change theirs) must not change their state or weights by a bit in the
    # step of the rebind (later steps see layer 0's new weights).
    a, b = make_mlp(), make_mlp()
    for model in (a, b):
        model[0].requires_grad_(False)
    opt_a = adamw(a.named_parameters(), 0.5, **formats)
    opt_b = adamw(b.named_parameters(), 0.5, **formats)
    data = batches(6, seed=7)
    train(a, opt_a, data[:3])
    train(b, opt_b, data[:3])
    a[0].requires_grad_(True)  # b keeps layer 0 frozen
    train(a, opt_a, data[3:4])
    train(b, opt_b, data[3:4])
    assert opt_a.rebinds == 1
    assert same_bits(params_bits(a)[2:], params_bits(b)[2:])
    sa, sb = snapshot_of(opt_a), snapshot_of(opt_b)
    for name in sb:
        assert same_state(sa[name], sb[name]), name


def test_frozen_parameter_costs_nothing_until_it_gets_a_gradient():
    model = make_mlp()
    model[0].requires_grad_(False)
    opt = adamw(model.parameters(), 0.5, **QUANTIZED)
    trained = adamw(list(model.parameters())[2:], 0.5, **QUANTIZED)
    assert opt.memory() == trained.memory()
    train(model, opt, batches(2))
    model[0].requires_grad_(True)
    assert opt.memory() == trained.memory()  # requires grad, but no gradient yet
    opt.zero_grad()
    assert opt.state_dict()["tandem"]["tensors"][0]["name"] == "g0.p2"  # no rebind
    assert opt.rebinds == 0
    train(model, opt, batches(1))
    full = adamw(model.parameters(), 0.5, **QUANTIZED)
    assert opt.memory() == full.memory()
    assert opt.memory()["host"]["total"] > trained.memory()["host"]["total"]


def test_unfreeze_warns_once():
    model = make_mlp()
    model[0].requires_grad_(False)
    model[2].requires_grad_(False)
    opt = adamw(model.parameters())
    data = batches(4)
    model[0].requires_grad_(True)
    opt.zero_grad()
    backward(model, *data[0])
    with pytest.warns(tandem.torch.RebindWarning, match="2 parameter.*frozen at constr"):
        opt.step()
    with warnings.catch_warnings():
        warnings.simplefilter("error", tandem.torch.RebindWarning)
        for t, (x, y) in enumerate(data[1:]):
            model[2].requires_grad_(t == 2)  # a second rebind, two steps later: silent
            opt.zero_grad()
            backward(model, x, y)
            opt.step()
    assert opt.rebinds == 2 and opt.tensor_step_counts() == [4, 4, 1, 1, 4, 4]


@pytest.mark.parametrize("early", ["early_start", "speculative_early_start"])
def test_unfreezing_with_early_start(early):
    # The gradient hooks move to the new engine's indices; begin_step rebinds for
    # parameters that require grad (their gradient comes in the backward that follows).
    # Results equal those without early start, bit for bit.
    def run(speculative):
        model = make_mlp()
        model[0].requires_grad_(False)
        opt = adamw(model.parameters(), 0.5, **{early: speculative}, **QUANTIZED)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", tandem.torch.RebindWarning)
            # A hook left on the old indices would report gradients twice.
            warnings.simplefilter("error", tandem.torch.EarlyStartAccumulationWarning)
            for t, (x, y) in enumerate(batches(6, seed=9)):
                model[0].requires_grad_(t >= 3)
                opt.zero_grad()
                if speculative and early == "speculative_early_start":
                    opt.begin_step()
                backward(model, x, y)
                opt.step()
        return params_bits(model), opt.tensor_step_counts()

    bits, counts = run(True)
    plain_bits, plain_counts = run(False)
    assert same_bits(bits, plain_bits)
    assert counts == plain_counts == [3, 3, 6, 6, 6, 6]


def test_no_rebind_between_begin_step_and_step():
    # The engine's step is begun: unfreezing or reallocating then raises at step().
    model = make_mlp()
    model[0].requires_grad_(False)
    opt = adamw(model.parameters(), 0.5, speculative_early_start=True)
    opt.begin_step()
    model[0].requires_grad_(True)
    backward(model, *batches(1)[0])
    with pytest.raises(ValueError, match="unfrozen between begin_step"):
        opt.step()
    model = make_mlp()
    opt = adamw(model.parameters(), 0.5, speculative_early_start=True)
    opt.begin_step()
    backward(model, *batches(1)[0])
    reallocate(model)
    with pytest.raises(RuntimeError, match="reallocated.*between begin_step"):
        opt.step()


# ---------------------------------------------------------------------------------------
# (b) Reallocated parameters


def reallocate(model):
    for p in model.parameters():
        p.data = p.data.clone()


@pytest.mark.parametrize("fraction", FRACTIONS)
@pytest.mark.parametrize("formats", [F32, QUANTIZED])
def test_reallocation_every_step_is_bit_identical(fraction, formats):
    plain, moved = make_mlp(), make_mlp()
    opt_plain = adamw(plain.parameters(), fraction, **formats)
    opt_moved = adamw(moved.parameters(), fraction, **formats)
    data = batches(6, seed=3)
    train(plain, opt_plain, data)
    # Between backward and step (the gradient buffers move too), then after a step.
    train(moved, opt_moved, data, between=lambda t: reallocate(moved) if t % 2 else None)
    assert same_bits(params_bits(plain), params_bits(moved))
    sa, sb = snapshot_of(opt_plain), snapshot_of(opt_moved)
    assert all(same_state(sa[n], sb[n]) for n in sa)
    assert opt_moved.rebinds == 3
    reallocate(moved)
    train(plain, opt_plain, batches(1, seed=4))
    train(moved, opt_moved, batches(1, seed=4))
    assert same_bits(params_bits(plain), params_bits(moved))
    assert opt_moved.rebinds == 4
    assert opt_moved.tensor_step_counts() == [7] * 6


@pytest.mark.parametrize("fraction", FRACTIONS)
def test_reallocation_before_the_first_step_leaves_the_weights_alone(fraction):
    # Accelerate's prepare(model, optimizer) order: moved right after building, and a
    # state_dict (the rebind) before any step. The rebind writes no weight: a never
    # stepped parameter keeps its own value, not its decoded bf16+ecc8 master.
    plain, moved = make_mlp(), make_mlp()
    opt_plain = adamw(plain.parameters(), fraction, **QUANTIZED)
    opt_moved = adamw(moved.parameters(), fraction, **QUANTIZED)
    reallocate(moved)
    with pytest.warns(tandem.torch.RebindWarning):
        opt_moved.state_dict()
    assert same_bits(params_bits(plain), params_bits(moved))
    data = batches(3, seed=13)
    train(plain, opt_plain, data)
    train(moved, opt_moved, data)
    assert same_bits(params_bits(plain), params_bits(moved))
    assert opt_moved.rebinds == 1


@pytest.mark.parametrize("options", [dict(), dict(early_start=True),
                                     dict(speculative_early_start=True)])
@pytest.mark.parametrize("set_to_none", [True, False])
def test_reallocation_before_backward(options, set_to_none):
    # Reallocated before zero_grad and backward: the gradient hooks leave the moved
    # parameters to autograd (no early work for them) and the step rebinds and steps.
    def run(move):
        model = make_mlp()
        opt = adamw(model.parameters(), 0.5, **options, **QUANTIZED)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", tandem.torch.RebindWarning)
            for t, (x, y) in enumerate(batches(4, seed=14)):
                if move and t % 2:
                    reallocate(model)
                opt.zero_grad(set_to_none=set_to_none)
                if options.get("speculative_early_start"):
                    opt.begin_step()
                backward(model, x, y)
                opt.step()
        return params_bits(model), opt

    plain, _ = run(False)
    moved, opt = run(True)
    assert same_bits(plain, moved)
    assert opt.rebinds == 2 and opt.tensor_step_counts() == [4] * 6


def test_reallocation_warns_and_again_when_it_repeats():
    model = make_mlp()
    opt = adamw(model.parameters())
    data = batches(4)
    caught = []
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for x, y in data:
            reallocate(model)
            opt.zero_grad()
            backward(model, x, y)
            opt.step()
    messages = [str(w.message) for w in caught
                if issubclass(w.category, tandem.torch.RebindWarning)]
    assert len(messages) == 2 and opt.rebinds == 4
    assert "6 parameter(s) were reallocated" in messages[0]
    assert "whole state" in messages[0]
    assert "consecutive steps" in messages[1]


def test_reallocation_then_in_place_write_is_reloaded():
    # A weight reallocated and then written by a torch op: the write is the truth.
    plain, moved = make_mlp(), make_mlp()
    opt_plain, opt_moved = adamw(plain.parameters()), adamw(moved.parameters())
    data = batches(2, seed=2)
    train(plain, opt_plain, data[:1])
    train(moved, opt_moved, data[:1])
    reallocate(moved)
    with torch.no_grad():
        plain[0].weight.mul_(0.5)
        moved[0].weight.mul_(0.5)
    train(plain, opt_plain, data[1:])
    train(moved, opt_moved, data[1:])
    assert same_bits(params_bits(plain), params_bits(moved))
    assert opt_moved.rebinds == 1


def test_state_dict_after_reallocation_rebinds_first():
    plain, moved = make_mlp(), make_mlp()
    opt_plain, opt_moved = adamw(plain.parameters(), 0.5, **QUANTIZED), adamw(
        moved.parameters(), 0.5, **QUANTIZED)
    train(plain, opt_plain, batches(2))
    train(moved, opt_moved, batches(2))
    reallocate(moved)
    with pytest.warns(tandem.torch.RebindWarning):
        sd = opt_moved.state_dict()
    assert opt_moved.rebinds == 1
    ref = opt_plain.state_dict()
    for i, entry in ref["state"].items():
        for key, value in entry.items():
            assert torch.equal(value, sd["state"][i][key]), (i, key)
    # The old storage is no longer referenced by the optimizer.
    assert all(s.data_ptr() == p.data_ptr()
               for s, p in zip(opt_moved._core._storages, moved.parameters()))


def test_reallocated_and_unfrozen_in_one_rebind():
    ours = make_mlp()
    theirs = copy.deepcopy(ours)
    for model in (ours, theirs):
        model[0].requires_grad_(False)
    opt = adamw(ours.parameters(), 0.5, **F32)
    ref = torch.optim.AdamW(theirs.parameters(), lr=1e-2, weight_decay=0.05)
    data = batches(4, seed=12)
    train(ours, opt, data[:2])
    train(theirs, ref, data[:2])
    for model in (ours, theirs):
        model[0].requires_grad_(True)
    train(ours, opt, data[2:], between=lambda t: reallocate(ours) if t == 0 else None)
    train(theirs, ref, data[2:])
    assert max_rel_diff(ours, theirs) < 1e-5
    assert opt.rebinds == 1 and opt.tensor_step_counts() == [2, 2, 4, 4, 4, 4]


@pytest.mark.parametrize("formats", [F32, QUANTIZED])
def test_resume_after_unfreezing_from_a_state_dict(formats):
    # The training script builds the optimizer with the backbone frozen, then loads a
    # state dict written after the unfreeze: the optimizer takes the unfrozen
    # parameters in first, and training resumes bit-identically.
    model = make_mlp()
    model[0].requires_grad_(False)
    opt = adamw(model.parameters(), 0.5, **formats)
    data = batches(6, seed=16)
    train(model, opt, data[:2])
    model[0].requires_grad_(True)
    train(model, opt, data[2:4])
    saved = opt.state_dict()
    resumed = copy.deepcopy(model)
    resumed[0].requires_grad_(False)
    opt_resumed = adamw(resumed.parameters(), 0.5, **formats)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", tandem.torch.RebindWarning)
        opt_resumed.load_state_dict(saved)
    assert opt_resumed.tensor_step_counts() == [2, 2, 4, 4, 4, 4]
    assert opt_resumed.tensor_step_counts() == opt.tensor_step_counts()
    resumed[0].requires_grad_(True)
    train(model, opt, data[4:])
    train(resumed, opt_resumed, data[4:])
    assert same_bits(params_bits(model), params_bits(resumed))
    # Hooked once it required grad: backward writes into the engine's buffer again.
    assert resumed[0].weight.grad.data_ptr() == opt_resumed._core.book.grads[0].data_ptr()


def test_load_state_dict_after_reallocation_writes_the_new_weights():
    model = make_mlp()
    opt = adamw(model.parameters(), 0.5, **QUANTIZED)
    train(model, opt, batches(2))
    saved = opt.state_dict()
    expected = params_bits(model)
    train(model, opt, batches(2, seed=9))
    reallocate(model)
    with pytest.warns(tandem.torch.RebindWarning):
        opt.load_state_dict(saved)
    assert same_bits(params_bits(model), expected)
    assert opt.rebinds == 1


def test_failed_rebind_changes_nothing():
    # A new parameter on another device (here: one whose dtype tandem cannot hold) makes
    # the rebind fail; the optimizer keeps working with its old engine.
    model = make_mlp()
    extra = torch.nn.Parameter(torch.zeros(3, dtype=torch.float64), requires_grad=False)
    opt = adamw([{"params": list(model.parameters())}, {"params": [extra]}])
    train(model, opt, batches(1))
    engine = opt._core.engine
    extra.requires_grad_(True)
    extra.grad = torch.ones(3, dtype=torch.float64)
    opt.zero_grad()
    backward(model, *batches(1)[0])
    extra.grad = torch.ones(3, dtype=torch.float64)
    with pytest.raises(ValueError, match="unsupported dtype"):
        opt.step()
    assert opt._core.engine is engine and opt.rebinds == 0
    extra.grad = None
    extra.requires_grad_(False)
    opt.step()
    assert opt.tensor_step_counts() == [2] * 6


# ---------------------------------------------------------------------------------------
# GPU variants


@needs_cuda
@pytest.mark.parametrize("formats", [F32, QUANTIZED])
def test_model_moved_to_cuda_after_building(formats):
    # Built on the CPU (host mode), moved with model.to("cuda") after two steps: the
    # optimizer follows into GPU mode; GPU and host mode are bit-identical, so the result
    # equals a run that stays on the CPU.
    cpu, moved = make_mlp(), make_mlp()
    opt_cpu = adamw(cpu.parameters(), 0.5, **formats)
    opt_moved = adamw(moved.parameters(), 0.5, **formats)
    assert opt_moved.mode == "host"
    g = torch.Generator().manual_seed(21)
    grads = [[torch.randn(p.shape, generator=g) for p in cpu.parameters()]
             for _ in range(4)]
    for t in range(4):
        if t == 2:
            moved.to("cuda")
        for model, opt in ((cpu, opt_cpu), (moved, opt_moved)):
            opt.zero_grad()
            for p, grad in zip(model.parameters(), grads[t]):
                p.grad = grad.to(p.device)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", tandem.torch.RebindWarning)
                opt.step()
    torch.cuda.synchronize()
    assert opt_moved.mode == "gpu" and opt_moved.rebinds == 1
    assert same_bits(params_bits(cpu), [b.cpu() for b in params_bits(moved)])
    assert opt_moved.tensor_step_counts() == [4] * 6


@needs_cuda
@pytest.mark.parametrize("options", [dict(), dict(early_start=True)])
def test_model_moved_to_cuda_between_steps_with_backward(options):
    # model.to("cuda") between steps, then a real backward (the gradient hooks must not
    # install the old CPU buffers): equals a model on CUDA from the start.
    ref = make_mlp().cuda()
    ref_opt = adamw(ref.parameters(), 0.5, **options, **F32)
    model = make_mlp()
    opt = adamw(model.parameters(), 0.5, **options, **F32)
    data = batches(4, seed=15)
    train(ref, ref_opt, data[:1])
    train(model, opt, data[:1])
    model.to("cuda")
    train(ref, ref_opt, data[1:])
    train(model, opt, data[1:])
    torch.cuda.synchronize()
    assert opt.mode == "gpu" and opt.rebinds == 1
    assert max_rel_diff(model, ref) < 1e-5
    assert opt.tensor_step_counts() == [4] * 6


@needs_cuda
def test_progressive_unfreezing_on_cuda_matches_torch():
    ours = make_mlp().cuda()
    theirs = copy.deepcopy(ours)
    for model in (ours, theirs):
        model[0].requires_grad_(False)
    opt = adamw(ours.parameters(), 0.5, **F32)
    ref = torch.optim.AdamW(theirs.parameters(), lr=1e-2, weight_decay=0.05)
    data = batches(6, seed=5)
    train(ours, opt, data[:3])
    train(theirs, ref, data[:3])
    for model in (ours, theirs):
        model[0].requires_grad_(True)
    train(ours, opt, data[3:])
    train(theirs, ref, data[3:])
    torch.cuda.synchronize()
    assert max_rel_diff(ours, theirs) < 1e-5
    assert opt.tensor_step_counts() == [3, 3, 6, 6, 6, 6] and opt.mode == "gpu"


@needs_cuda
def test_reallocation_on_cuda_is_bit_identical():
    plain, moved = make_mlp().cuda(), make_mlp().cuda()
    opt_plain = adamw(plain.parameters(), 0.5, **QUANTIZED)
    opt_moved = adamw(moved.parameters(), 0.5, **QUANTIZED)
    data = batches(4, seed=3)
    train(plain, opt_plain, data)
    train(moved, opt_moved, data, between=lambda t: reallocate(moved))
    torch.cuda.synchronize()
    assert same_bits(params_bits(plain), params_bits(moved))
    assert opt_moved.rebinds == 4
