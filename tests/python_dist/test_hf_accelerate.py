"""Accelerate with tandem.torch.AdamW (docs/huggingface.md), on the CPU.

``accelerator.prepare`` wraps the optimizer in AcceleratedOptimizer, which round-trips
its state dict at once (state_dict, moved to the device, load_state_dict) and forwards
step/zero_grad only when gradients are synchronised. Every run here is compared bit for
bit with the same training loop on the bare optimizer.

On a GPU, ``prepare`` also moves the model (``model.to(device)``), which reallocates the
parameters of an optimizer built before: the issue this file checks. On the CPU
``model.to("cpu")`` moves nothing, so `reallocate_on_to` makes Accelerate's own
``model.to(...)`` call do what a device change does to each parameter: Module.to is
``Module._apply(convert)``, which sets ``param.data = convert(param)``, a tensor with new
storage; here ``convert`` is a copy instead of ``t.to("cuda")``. The order of events
inside ``prepare`` stays Accelerate's.
"""

import os
import subprocess
import sys
import warnings

import pytest
import torch

accelerate = pytest.importorskip("accelerate")
from accelerate.state import AcceleratorState, GradientState  # noqa: E402

import tandem.torch  # noqa: E402

F32 = dict()
QUANTIZED = dict(master_format="bf16+ecc8", momentum_format="q8", variance_format="q8")
FORMATS = [pytest.param(F32, id="f32"), pytest.param(QUANTIZED, id="quantized")]


@pytest.fixture(autouse=True)
def fresh_accelerate_state():
    # Accelerate keeps process-wide singletons; each test builds its own Accelerator.
    AcceleratorState._reset_state(True)
    GradientState._reset_state()
    yield
    AcceleratorState._reset_state(True)
    GradientState._reset_state()


def make_model():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.Tanh(),
                               torch.nn.Linear(32, 4))


def make_optimizer(model, formats):
    return tandem.torch.AdamW(model.named_parameters(), lr=1e-2, weight_decay=0.05,
                              **formats)


def batches(n, seed=0):
    g = torch.Generator().manual_seed(seed)
    return [torch.randn(8, 16, generator=g) for _ in range(n)]


def loss_of(model, x):
    return model(x).pow(2).mean()


def train_plain(model, opt, data):
    for x in data:
        opt.zero_grad()
        loss_of(model, x).backward()
        opt.step()


def train_accelerated(accelerator, model, opt, data):
    for x in data:
        opt.zero_grad()
        accelerator.backward(loss_of(model, x))
        opt.step()


def same_weights(a, b):
    return all(torch.equal(p, q) for p, q in zip(a.parameters(), b.parameters()))


def same_state(a, b):
    sa, sb = a.state_dict()["state"], b.state_dict()["state"]
    return sa.keys() == sb.keys() and all(
        sa[i].keys() == sb[i].keys() and all(torch.equal(sa[i][k], sb[i][k]) for k in sa[i])
        for i in sa)


def reallocate_on_to(model):
    """Makes ``model.to(...)`` reallocate every parameter and buffer, as a real device
    change does (module docstring); returns the list that counts the calls."""
    calls = []

    def to(*args, **kwargs):
        calls.append((args, kwargs))
        return model._apply(lambda t: t.clone())

    model.to = to
    return calls


@pytest.fixture
def engine_calls(monkeypatch):
    """Counts the engines' snapshot and restore calls (full state copies)."""
    counts = {"snapshot": 0, "restore": 0}
    for name in counts:
        original = getattr(tandem._C.HybridOptimizer, name)

        def counted(self, *args, _original=original, _name=name, **kwargs):
            counts[_name] += 1
            return _original(self, *args, **kwargs)
        monkeypatch.setattr(tandem._C.HybridOptimizer, name, counted)
    return counts


def prepare(accelerator, model, opt, order):
    if order == "model_first":
        model, opt = accelerator.prepare(model, opt)
    else:
        opt, model = accelerator.prepare(opt, model)
    assert isinstance(opt, accelerate.optimizer.AcceleratedOptimizer)
    return model, opt


@pytest.mark.parametrize("formats", FORMATS)
@pytest.mark.parametrize("order", ["model_first", "optimizer_first"])
def test_prepare_either_order_trains_as_the_bare_optimizer(order, formats):
    plain = make_model()
    plain_opt = make_optimizer(plain, formats)
    train_plain(plain, plain_opt, batches(4))

    accelerator = accelerate.Accelerator(cpu=True)
    model = make_model()
    with warnings.catch_warnings():
        warnings.simplefilter("error", tandem.torch.TandemWarning)
        model, opt = prepare(accelerator, model, make_optimizer(model, formats), order)
        train_accelerated(accelerator, model, opt, batches(4))
    assert same_weights(plain, model)
    assert same_state(plain_opt, opt.optimizer)
    assert opt.optimizer.rebinds == 0
    assert opt.optimizer.tensor_step_counts() == [4] * 4


@pytest.mark.parametrize("formats", FORMATS)
@pytest.mark.parametrize("order", ["model_first", "optimizer_first"])
def test_model_moved_by_prepare_after_the_optimizer_was_built(order, formats, engine_calls):
    # The issue: the optimizer is built before the model reaches its device, and
    # prepare moves it. One rebind binds the engine to the final parameters: inside
    # prepare when the model comes first (AcceleratedOptimizer's state_dict finds the
    # new storage), at the first step when the optimizer comes first. Training is
    # bit-identical to an optimizer that never saw the old storage.
    plain = make_model()
    plain_opt = make_optimizer(plain, formats)
    train_plain(plain, plain_opt, batches(4))

    accelerator = accelerate.Accelerator(cpu=True)
    model = make_model()
    opt = make_optimizer(model, formats)
    calls = reallocate_on_to(model)
    old_ptrs = [p.data_ptr() for p in model.parameters()]
    engine_calls.update(snapshot=0, restore=0)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        model, wrapped = prepare(accelerator, model, opt, order)
        at_prepare = opt.rebinds
        train_accelerated(accelerator, model, wrapped, batches(4))
    assert len(calls) == 1  # Accelerate's model.to(device)
    # Full state copies: Accelerate's round trip (state_dict, load_state_dict) and the
    # rebind's, one snapshot and one restore each (the rebind of a move restores the old
    # engine's snapshot as it is).
    assert engine_calls == {"snapshot": 2, "restore": 2}
    assert all(p.data_ptr() != old for p, old in zip(model.parameters(), old_ptrs))
    assert at_prepare == (1 if order == "model_first" else 0)
    assert opt.rebinds == 1
    rebind_warnings = [w for w in caught if w.category is tandem.torch.RebindWarning]
    assert len(rebind_warnings) == 1
    assert "4 parameter(s) were reallocated" in str(rebind_warnings[0].message)
    # The engine holds the final storage: nothing keeps the old one.
    assert opt._core._ptrs == [p.data_ptr() for p in model.parameters()]
    assert same_weights(plain, model)
    assert same_state(plain_opt, opt)


@pytest.mark.parametrize("formats", FORMATS)
def test_gradient_accumulation_and_clipping(formats):
    # accelerator.accumulate: AcceleratedOptimizer skips step and zero_grad until the
    # gradients are synchronised; clip_grad_norm_ writes p.grad in place (the engine's
    # buffer). Plain loop: the same two micro-batches, the loss halved as Accelerate does.
    data = batches(8, seed=3)
    plain = make_model()
    plain_opt = make_optimizer(plain, formats)
    for i in range(0, len(data), 2):
        plain_opt.zero_grad()
        for x in data[i:i + 2]:
            (loss_of(plain, x) / 2).backward()
        torch.nn.utils.clip_grad_norm_(plain.parameters(), 0.05)
        plain_opt.step()

    accelerator = accelerate.Accelerator(cpu=True, gradient_accumulation_steps=2)
    model = make_model()
    model, opt = prepare(accelerator, model, make_optimizer(model, formats), "model_first")
    for x in data:
        with accelerator.accumulate(model):
            accelerator.backward(loss_of(model, x))
            if accelerator.sync_gradients:
                accelerator.clip_grad_norm_(model.parameters(), 0.05)
            opt.step()
            opt.zero_grad()
    assert opt.optimizer.tensor_step_counts() == [4] * 4
    assert same_weights(plain, model)
    assert same_state(plain_opt, opt.optimizer)


@pytest.mark.parametrize("formats", FORMATS)
def test_save_state_and_load_state_resume_bit_identically(tmp_path, formats):
    data = batches(6, seed=5)
    accelerator = accelerate.Accelerator(cpu=True)
    model = make_model()
    model, opt = prepare(accelerator, model, make_optimizer(model, formats), "model_first")
    train_accelerated(accelerator, model, opt, data[:3])
    accelerator.save_state(str(tmp_path))
    train_accelerated(accelerator, model, opt, data[3:])

    # A new process would build everything again, prepare, then load_state.
    AcceleratorState._reset_state(True)
    GradientState._reset_state()
    accelerator2 = accelerate.Accelerator(cpu=True)
    torch.manual_seed(123)  # other initial weights: load_state must replace them
    resumed = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.Tanh(),
                                  torch.nn.Linear(32, 4))
    resumed, opt2 = prepare(accelerator2, resumed, make_optimizer(resumed, formats),
                            "model_first")
    accelerator2.load_state(str(tmp_path))
    assert opt2.optimizer.tensor_step_counts() == [3] * 4
    train_accelerated(accelerator2, resumed, opt2, data[3:])
    assert same_weights(model, resumed)
    assert same_state(opt.optimizer, opt2.optimizer)
    assert opt2.optimizer.rebinds == 0


def test_optimizer_without_device_placement_skips_the_round_trip():
    # prepare(..., device_placement=[True, False]) (docs/huggingface.md): Accelerate
    # neither round-trips nor moves the optimizer's state dict (on a GPU it would copy the
    # whole state, the offloaded part included, into device memory); the moved model
    # costs one rebind at the first step, and training is unchanged.
    plain = make_model()
    plain_opt = make_optimizer(plain, QUANTIZED)
    train_plain(plain, plain_opt, batches(3))

    accelerator = accelerate.Accelerator(cpu=True)
    model = make_model()
    opt = make_optimizer(model, QUANTIZED)
    reallocate_on_to(model)
    calls = []
    original = opt.state_dict
    opt.state_dict = lambda: calls.append(1) or original()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", tandem.torch.RebindWarning)
        model, wrapped = accelerator.prepare(model, opt, device_placement=[True, False])
        assert calls == [] and opt.rebinds == 0
        train_accelerated(accelerator, model, wrapped, batches(3))
    assert opt.rebinds == 1
    assert same_weights(plain, model)


def test_the_accelerate_example_runs():
    example = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..",
                           "examples", "hf_accelerate.py")
    out = subprocess.run([sys.executable, example, "--steps", "3"], capture_output=True,
                         text=True, timeout=300, check=True).stdout
    diffs = [float(line.split("difference ")[1].split(",")[0])
             for line in out.splitlines() if "max relative loss difference" in line]
    assert len(diffs) == 2 and max(diffs) < 1e-5, out
