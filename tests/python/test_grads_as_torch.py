"""Every gradient that is set is stepped, as torch.optim does: a parameter whose p.grad is
not None at step() is stepped with the tensor p.grad is then, whatever wrote it (a second
step(), p.grad.data, a NumPy view, a raw pointer, swapped gradients), and early start
redoes what it copied when the gradient changed after backward. Side by side with
torch.optim.AdamW in host mode at offload fractions 0, 0.5 and 1; test_gpu.py runs the
check_* functions on a GPU."""

import copy
import ctypes
import threading

import pytest
import torch

import tandem.torch
from helpers import batches, make_mlp, params_bits, same_bits
from test_vs_torch import max_rel_diff

FRACTIONS = (0.0, 0.5, 1.0)
QUANTIZED = dict(master_format="bf16+ecc8", momentum_format="q8", variance_format="q8")


def pair(fraction, device="cpu", **options):
    """(model, tandem AdamW, copy of the model, torch AdamW) with the same weights."""
    ours = make_mlp(seed=21).to(device)
    theirs = copy.deepcopy(ours)
    opt = tandem.torch.AdamW(ours.parameters(), lr=1e-2, weight_decay=0.05,
                             offload_fraction=fraction, chunk_elements=64, **options)
    ref = torch.optim.AdamW(theirs.parameters(), lr=1e-2, weight_decay=0.05)
    return ours, opt, theirs, ref


def backward(model, x, y):
    device = next(model.parameters()).device
    torch.nn.functional.mse_loss(model(x.to(device)), y.to(device)).backward()


def random_grads(model, seed):
    g = torch.Generator().manual_seed(seed)
    return [torch.randn(p.shape, generator=g).to(p.device) for p in model.parameters()]


# ---- a second step with the same gradients steps again ------------------------------------

@pytest.mark.parametrize("fraction", FRACTIONS)
def test_second_step_with_the_same_gradient_steps_again(fraction):
    check_second_step(fraction, "cpu")


def check_second_step(fraction, device):
    ours, opt, theirs, ref = pair(fraction, device)
    for x, y in batches(3, seed=2):
        for model, o in ((ours, opt), (theirs, ref)):
            o.zero_grad()
            backward(model, x, y)
            o.step()
            o.step()  # no new gradient: torch steps again with the same one
            o.step()
    assert max_rel_diff(ours, theirs) < 1e-5
    assert opt.tensor_step_counts() == [9] * 6
    assert opt.last_result.stepped_tensors == 6


# ---- gradients written where no version counter sees them ---------------------------------

def _through_data(p, g):
    p.grad.data.copy_(g)


def _through_numpy(p, g):
    p.grad.numpy()[...] = g.numpy()


def _through_pointer(p, g):
    ctypes.memmove(p.grad.data_ptr(), g.contiguous().data_ptr(), g.numel() * g.element_size())


WRITERS = [_through_data, _through_numpy, _through_pointer]


@pytest.mark.parametrize("fraction", FRACTIONS)
@pytest.mark.parametrize("write", WRITERS, ids=lambda w: w.__name__.strip("_"))
def test_gradient_written_around_the_version_counter_is_stepped(fraction, write):
    check_hidden_writes(fraction, write, "cpu")


def check_hidden_writes(fraction, write, device):
    """Backward once, then every step writes new values into the same p.grad tensors."""
    ours, opt, theirs, ref = pair(fraction, device)
    x, y = batches(1, seed=3)[0]
    backward(ours, x, y)
    backward(theirs, x, y)
    for t in range(4):
        grads = random_grads(ours, 40 + t)
        for model, o in ((ours, opt), (theirs, ref)):
            for p, g in zip(model.parameters(), grads):
                write(p, g)
            o.step()
    assert max_rel_diff(ours, theirs) < 1e-5
    assert opt.tensor_step_counts() == [4] * 6


# ---- swapped gradients ---------------------------------------------------------------------

class Twins(torch.nn.Module):
    """Three square layers of one shape, so gradients can trade places."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(8)
        self.a, self.b, self.c = (torch.nn.Linear(16, 16) for _ in range(3))

    def forward(self, x):
        return self.c(torch.tanh(self.b(torch.tanh(self.a(x)))))


def _swap(m):
    m.a.weight.grad, m.b.weight.grad = m.b.weight.grad, m.a.weight.grad


def _rotate(m):
    m.a.weight.grad, m.b.weight.grad, m.c.weight.grad = (
        m.c.weight.grad, m.a.weight.grad, m.b.weight.grad)


def _transpose(m):
    m.a.weight.grad = m.a.weight.grad.t()  # a view of its own buffer, not contiguous
    m.b.bias.grad, m.c.bias.grad = m.c.bias.grad, m.b.bias.grad


def _transpose_swap(m):
    # a: a transposed view of b's gradient (copied into a's buffer); b: a's gradient, read
    # in place from the buffer that copy writes.
    m.a.weight.grad, m.b.weight.grad = m.b.weight.grad.t(), m.a.weight.grad


@pytest.mark.parametrize("fraction", FRACTIONS)
@pytest.mark.parametrize("move", [_swap, _rotate, _transpose, _transpose_swap],
                         ids=lambda f: f.__name__.strip("_"))
def test_gradients_trading_places_step_each_parameter_with_its_own(fraction, move):
    check_traded_gradients(fraction, move, "cpu")


def check_traded_gradients(fraction, move, device):
    ours = Twins().to(device)
    theirs = copy.deepcopy(ours)
    opt = tandem.torch.AdamW(ours.parameters(), lr=1e-2, offload_fraction=fraction,
                             chunk_elements=64)
    ref = torch.optim.AdamW(theirs.parameters(), lr=1e-2)
    g = torch.Generator().manual_seed(9)
    for _ in range(3):
        x = torch.randn(8, 16, generator=g).to(device)
        for model, o in ((ours, opt), (theirs, ref)):
            o.zero_grad()
            model(x).pow(2).mean().backward()
            move(model)
            o.step()
    assert max_rel_diff(ours, theirs) < 1e-5


# ---- early start is checked at step --------------------------------------------------------

def _clip(model):
    torch.nn.utils.clip_grad_norm_(model.parameters(), 0.05)


def _scale_in_place(model):
    for p in model.parameters():
        p.grad.mul_(0.5)


def _replace(model):
    for p in model.parameters():
        p.grad = p.grad * 0.25


def _data_assign(model):
    for p in model.parameters():
        p.grad.data = p.grad.data * 2.0  # new storage under the same p.grad object


EDITS = [_clip, _scale_in_place, _replace, _data_assign]


def early_run(fraction, early, edit, device="cpu", steps=3):
    """Bits after `steps` steps in which `edit(model)` changes the gradients between
    backward and step."""
    model = make_mlp(seed=5).to(device)
    opt = tandem.torch.AdamW(model.parameters(), lr=1e-2, offload_fraction=fraction,
                             chunk_elements=64, early_start=early == "plain",
                             speculative_early_start=early == "speculative", **QUANTIZED)
    for x, y in batches(steps, seed=6):
        opt.zero_grad()
        if early == "speculative":
            opt.begin_step()
        backward(model, x, y)
        edit(model)
        opt.step()
    return [b.cpu() for b in params_bits(model)]


@pytest.mark.parametrize("fraction", FRACTIONS)
@pytest.mark.parametrize("early", ["plain", "speculative"])
@pytest.mark.parametrize("edit", EDITS, ids=lambda f: f.__name__.strip("_"))
def test_gradient_changed_after_early_start_is_redone(fraction, early, edit):
    check_early_start_redone(fraction, early, edit, "cpu")


def check_early_start_redone(fraction, early, edit, device):
    assert same_bits(early_run(fraction, early, edit, device),
                     early_run(fraction, "off", edit, device))


# ---- zero_grad from another thread ---------------------------------------------------------

@pytest.mark.parametrize("fraction", FRACTIONS)
def test_zero_grad_from_another_thread_never_splits_a_step(fraction):
    check_concurrent_zero_grad(fraction, "cpu")


def check_concurrent_zero_grad(fraction, device):
    """zero_grad holds the optimizer's lock, so it lands between two steps, never inside
    one: each step steps some parameters with their whole gradient and leaves the others
    alone. Replaying the same pattern in one thread gives the same bits."""
    def build():
        torch.manual_seed(4)
        model = torch.nn.Sequential(torch.nn.Linear(256, 192), torch.nn.Linear(192, 64))
        model = model.to(device)
        return model, tandem.torch.AdamW(model.parameters(), lr=1e-3,
                                         offload_fraction=fraction, chunk_elements=64)

    model, opt = build()
    done = threading.Event()

    def zeroer():
        while not done.is_set():
            opt.zero_grad()

    thread = threading.Thread(target=zeroer)
    thread.start()
    masks = []
    try:
        for t in range(30):
            before = opt.tensor_step_counts()
            for p, g in zip(model.parameters(), random_grads(model, 100 + t)):
                p.grad = g  # one assignment each: the other thread may clear it
            opt.step()
            masks.append([a != b for a, b in zip(before, opt.tensor_step_counts())])
    finally:
        done.set()
        thread.join()
    replay, ropt = build()
    for t, mask in enumerate(masks):
        for p, g, on in zip(replay.parameters(), random_grads(replay, 100 + t), mask):
            p.grad = g if on else None
        ropt.step()
    assert same_bits(params_bits(replay), params_bits(model))


# ---- gradients read where they are, each group's values every step -------------------------

def test_an_assigned_gradient_is_read_where_it_is():
    # The engine takes each step's gradient pointers: an assigned p.grad is neither
    # copied nor replaced (p.grad is still the tensor assigned, as with torch).
    model = make_mlp()
    opt = tandem.torch.AdamW(model.parameters(), lr=1e-2)
    grads = random_grads(model, 3)
    for p, g in zip(model.parameters(), grads):
        p.grad = g
    buffers = [b.clone() for b in opt._core.book.grads]
    opt.step()
    assert all(p.grad is g for p, g in zip(model.parameters(), grads))
    assert all(torch.equal(b, c) for b, c in zip(opt._core.book.grads, buffers))
    assert opt.last_result.stepped_tensors == 6


@pytest.mark.parametrize("fraction", FRACTIONS)
def test_each_groups_values_reach_the_engine_every_step(fraction, monkeypatch):
    # Per-group schedules that change the groups' lr ratio and betas at every step: no
    # set_groups (nor its device synchronisation), and the steps torch takes.
    calls = []
    monkeypatch.setattr(tandem._C.HybridOptimizer, "set_groups",
                        lambda self, groups: calls.append(groups))
    ours = make_mlp(seed=31)
    theirs = copy.deepcopy(ours)

    def groups(m):
        params = list(m.parameters())
        return [{"params": params[:2]}, {"params": params[2:], "lr": 3e-3}]

    opt = tandem.torch.AdamW(groups(ours), lr=1e-2, offload_fraction=fraction,
                             chunk_elements=64)
    ref = torch.optim.AdamW(groups(theirs), lr=1e-2)
    lambdas = [lambda s: 1.0 / (1 + s), lambda s: 1.0 + 0.5 * s]
    scheds = [torch.optim.lr_scheduler.LambdaLR(o, lambdas) for o in (opt, ref)]
    for t, (x, y) in enumerate(batches(5, seed=32)):
        for model, o, sched in ((ours, opt, scheds[0]), (theirs, ref, scheds[1])):
            o.param_groups[1]["betas"] = (0.9 - 0.05 * t, 0.999)
            o.zero_grad()
            backward(model, x, y)
            o.step()
            sched.step()
    assert calls == []
    assert max_rel_diff(ours, theirs) < 1e-5
