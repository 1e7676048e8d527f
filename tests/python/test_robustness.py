"""Misuse that used to go wrong quietly now works or fails loudly: replaced gradients,
bad options, concurrent state dicts, format spellings, duplicate tensors, a bad lr,
skipped steps, and importing tandem.torch without PyTorch."""

import gc
import math
import os
import subprocess
import sys
import threading
import warnings
import weakref

import pytest
import torch

import tandem
import tandem.torch
from helpers import batches, make_mlp, params_bits, same_bits, train

FRACTIONS = (0.0, 0.5, 1.0)


def fixed_grads(model, seed):
    g = torch.Generator().manual_seed(seed)
    return [torch.randn(p.shape, generator=g) for p in model.parameters()]


# ---- replaced gradients ------------------------------------------------------------------

@pytest.mark.parametrize("fraction", FRACTIONS)
def test_grad_data_replaced_by_same_shape_is_used(fraction):
    results = []
    for replace in (False, True):
        model = make_mlp()
        opt = tandem.torch.AdamW(model.parameters(), lr=1e-2, offload_fraction=fraction,
                                 chunk_elements=64)
        train(model, opt, batches(1))
        for p, g in zip(model.parameters(), fixed_grads(model, 4)):
            if replace:
                p.grad.data = g  # swaps the storage under the installed p.grad
            else:
                p.grad = g
        opt.step()
        results.append(params_bits(model))
    assert same_bits(results[0], results[1])


def test_grad_data_of_another_shape_or_dtype_is_refused():
    model = make_mlp()
    names = [n for n, _ in model.named_parameters()]
    opt = tandem.torch.AdamW(model.named_parameters(), lr=1e-2)
    train(model, opt, batches(1))
    before = params_bits(model)
    weight = model[2].weight
    weight.grad.data = torch.ones(weight.numel())
    with pytest.raises(ValueError, match=r"'2.weight' \(shape \(29, 37\), torch.float32\).*"
                                         r"shape \(1073,\)"):
        opt.step()
    weight.grad = None
    model[0].bias.grad.data = torch.ones(37, dtype=torch.float64)
    with pytest.raises(ValueError, match=r"'0.bias'.*torch.float64"):
        opt.step()
    model[0].bias.grad = None
    model[4].bias.grad.resize_(2, 2)
    with pytest.raises(ValueError, match=r"'4.bias' \(shape \(5,\).*shape \(2, 2\)"):
        opt.step()
    assert same_bits(params_bits(model), before)
    assert names[0] == "0.weight"


# ---- a dropped optimizer lets go of the model ---------------------------------------------

def test_dropped_optimizer_is_freed_and_its_hooks_removed():
    model = make_mlp()
    opt = tandem.torch.AdamW(model.parameters(), lr=1e-2, early_start=True)
    train(model, opt, batches(1))
    dead = weakref.ref(opt)
    del opt
    gc.collect()
    assert dead() is None
    assert all(len(p._backward_hooks) == 0 for p in model.parameters())
    # A new optimizer for the same model gets backward's gradients in its own buffers.
    opt = tandem.torch.AdamW(model.parameters(), lr=1e-2, early_start=True)
    opt.zero_grad()
    x, y = batches(1)[0]
    torch.nn.functional.mse_loss(model(x), y).backward()
    assert [p.grad.data_ptr() for p in model.parameters()] == [b.data_ptr()
                                                              for b in opt._core.book.grads]
    opt.step()
    assert opt.last_result.stepped_tensors == 6


# ---- option validation -------------------------------------------------------------------

@pytest.mark.parametrize("kwargs, match", [
    (dict(host_threads=10 ** 6), r"host_threads must be an integer in \[0, \d+\].*1000000"),
    (dict(host_threads=-1), r"host_threads.*-1"),
    (dict(host_threads="4"), r"host_threads.*'4'"),
    (dict(host_threads=2.0), r"host_threads.*2\.0"),
    (dict(chunk_elements=0), r"chunk_elements must be a positive multiple of 32, got 0"),
    (dict(chunk_elements=33), r"chunk_elements.*33"),
    (dict(chunk_elements=64.0), r"chunk_elements.*64\.0"),
    (dict(pipeline_slots=1), r"pipeline_slots must be an integer >= 2, got 1"),
    (dict(pipeline_slots="4"), r"pipeline_slots.*'4'"),
    (dict(offload_fraction=1.5), r"offload_fraction must be a number in \[0, 1\], got 1\.5"),
    (dict(offload_fraction=-0.1), r"offload_fraction.*-0\.1"),
    (dict(offload_fraction=float("nan")), r"offload_fraction.*nan"),
    (dict(offload_fraction="0.5"), r"offload_fraction.*'0\.5'"),
    (dict(max_grad_norm=-1.0), r"max_grad_norm.*-1\.0"),
])
def test_bad_options_name_the_argument(kwargs, match):
    with pytest.raises(ValueError, match=match):
        tandem.torch.AdamW(make_mlp().parameters(), **kwargs)


def test_max_host_threads_is_accepted():
    limit = tandem._C.max_host_threads()
    assert limit >= 16
    opt = tandem.torch.AdamW(make_mlp().parameters(), host_threads=limit)
    assert opt.mode == "host"


# ---- thread safety -----------------------------------------------------------------------

def _snapshot_key(sd):
    """The state's bytes, hashable."""
    def raw(t):
        t = t.detach().cpu().contiguous()
        if t.dtype == torch.bfloat16:
            t = t.view(torch.int16)
        return t.numpy().tobytes()
    return tuple(raw(t) for i in sorted(sd["state"]) for _, t in sorted(sd["state"][i].items()))


@pytest.mark.parametrize("fraction", FRACTIONS)
def test_state_dict_from_another_thread_sees_a_state_between_steps(fraction):
    check_concurrent_state_dicts(fraction, "cpu")


def check_concurrent_state_dicts(fraction, device):
    steps = 12

    def build():
        torch.manual_seed(5)  # large enough for steps to overlap the reader
        model = torch.nn.Sequential(torch.nn.Linear(512, 384), torch.nn.Linear(384, 96))
        model = model.to(device)
        opt = tandem.torch.AdamW(model.parameters(), lr=1e-2, offload_fraction=fraction,
                                 chunk_elements=64, master_format="bf16+ecc8",
                                 momentum_format="q8", variance_format="q8")
        return model, opt

    def one_step(model, opt, t):
        opt.zero_grad()
        for p, g in zip(model.parameters(), fixed_grads(model, 100 + t)):
            p.grad = g.to(device)
        opt.step()

    model, opt = build()
    allowed = {_snapshot_key(opt.state_dict())}
    for t in range(steps):
        one_step(model, opt, t)
        allowed.add(_snapshot_key(opt.state_dict()))

    model, opt = build()
    seen = []
    done = threading.Event()

    def reader():
        while not done.is_set():
            seen.append(_snapshot_key(opt.state_dict()))

    thread = threading.Thread(target=reader)
    thread.start()
    try:
        for t in range(steps):
            one_step(model, opt, t)
    finally:
        done.set()
        thread.join()
    seen.append(_snapshot_key(opt.state_dict()))
    assert len(seen) >= 2
    assert all(key in allowed for key in seen)


# ---- format options ----------------------------------------------------------------------

def test_sgd_q8_momentum_through_momentum_format():
    model = make_mlp()
    opt = tandem.torch.SGD(model.parameters(), lr=0.05, momentum=0.9, momentum_format="q8",
                           master_format="bf16+ecc8")
    losses = train(model, opt, batches(1, seed=3) * 30)
    assert losses[-1] < losses[0]
    assert opt.memory()["host"]["scales"] > 0
    with pytest.raises(ValueError, match="momentum_format"):
        tandem.torch.SGD(make_mlp().parameters(), momentum="q8")


@pytest.mark.parametrize("old, new", [("master", "master_format"),
                                      ("momentum", "momentum_format"),
                                      ("variance", "variance_format")])
def test_both_spellings_of_a_format_are_refused(old, new):
    value = "f32"
    with pytest.raises(ValueError, match="pass %s= or %s=, not both" % (new, old)):
        tandem.torch.AdamW(make_mlp().parameters(), **{old: value, new: value})


def test_old_and_new_spellings_give_the_same_bits():
    results = []
    for kwargs in (dict(master="bf16+ecc8", momentum="q8", variance="q8"),
                   dict(master_format="bf16+ecc8", momentum_format="q8",
                        variance_format="q8")):
        model = make_mlp()
        train(model, tandem.torch.AdamW(model.parameters(), lr=1e-2, **kwargs), batches(3))
        results.append(params_bits(model))
    assert same_bits(*results)
    model = make_mlp()
    tandem.torch.Lion(model.parameters(), momentum="q8")
    tandem.torch.Lion(model.parameters(), momentum_format="q8", master="bf16")


# ---- duplicates and learning rates -------------------------------------------------------

def test_same_tensor_twice_is_refused():
    model = make_mlp()
    w = model[0].weight
    with pytest.raises(ValueError, match=r"appears twice"):
        tandem.torch.AdamW([w, model[0].bias, w])
    with pytest.raises(ValueError, match=r"'again' \(shape \(37, 13\), torch.float32\) "
                                         r"appears twice \(first as '0.weight'\)"):
        tandem.torch.AdamW([{"params": list(model.named_parameters())},
                            {"params": [("again", w)], "lr": 1e-4}])


@pytest.mark.parametrize("lr", [math.inf, -1.0, math.nan])
def test_bad_lr_at_construction(lr):
    with pytest.raises(ValueError, match=r"group 0: lr must be finite and >= 0, got %s"
                                         % repr(lr).replace("-", r"\-")):
        tandem.torch.AdamW(make_mlp().parameters(), lr=lr)
    with pytest.raises(ValueError, match=r"group 1: lr must be finite"):
        ps = list(make_mlp().parameters())
        tandem.torch.AdamW([{"params": ps[:2]}, {"params": ps[2:], "lr": lr}])


# ---- skipped steps -----------------------------------------------------------------------

def test_skipped_steps_are_counted_and_warn():
    model = make_mlp()
    opt = tandem.torch.AdamW(model.parameters(), lr=1e-2)
    x, y = batches(1)[0]
    for t in range(3):
        opt.zero_grad()
        loss = torch.nn.functional.mse_loss(model(x), y)
        (loss * (math.nan if t != 1 else 1.0)).backward()
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            opt.step()
        expected = [tandem.torch.SkippedStepWarning] if t != 1 else []
        assert [w.category for w in caught] == expected
        # Attributed to the caller's line, not to a line of tandem's or torch's.
        assert all(w.filename == __file__ for w in caught), [w.filename for w in caught]
    assert opt.skipped_steps == 2
    assert issubclass(tandem.torch.SkippedStepWarning, UserWarning)
    opt.zero_grad()
    (torch.nn.functional.mse_loss(model(x), y) * math.inf).backward()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        warnings.simplefilter("ignore", tandem.torch.SkippedStepWarning)
        opt.step()
    assert caught == [] and opt.skipped_steps == 3


# ---- import without torch ----------------------------------------------------------------

def test_import_without_torch_says_how_to_install():
    code = ("import sys; sys.modules['torch'] = None\n"
            "try:\n"
            "    import tandem.torch\n"
            "except ImportError as e:\n"
            "    print('ImportError:', e)\n")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        [os.path.dirname(os.path.dirname(tandem.__file__))] + sys.path))
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         env=env, check=True).stdout
    assert "ImportError: tandem.torch needs PyTorch" in out
    assert "pip install '.[torch]'" in out and "tandem-optim" in out
