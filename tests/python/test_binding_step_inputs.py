"""tandem._C's step inputs (host mode): per-group learning rates and hyper-parameters
handed with each step, gradient pointers per step (step(grads=...), grad_ready(i, grad)),
wait_grad_consumed, and the rate cache; each new form against the form it adds to, bit
for bit. The forms tandem.torch uses today (step(lr), set_groups, grad_ready(i)) keep
working unchanged (the rest of this suite)."""

import math

import pytest
import torch

import tandem  # noqa: F401
import tandem._C as C


def make(groups, seed=0, sizes=(100, 37, 64), speculative=False):
    """An engine over fp32 tensors of `sizes` (tensor k in group k % len(groups))."""
    g = torch.Generator().manual_seed(seed)
    params = [torch.randn(n, generator=g) for n in sizes]
    grads = [torch.zeros(n) for n in sizes]
    specs = [("w%d" % k, p.numel(), "f32", "f32", p.data_ptr(), gr.data_ptr(), k % len(groups))
             for k, (p, gr) in enumerate(zip(params, grads))]
    engine = C.HybridOptimizer(specs, "adamw", groups, mode="host", offload_fraction=0.5,
                               offload_compute="host", chunk_elements=32,
                               speculative_early_start=speculative)
    return engine, params, grads


def fill(grads, t):
    g = torch.Generator().manual_seed(100 + t)
    for x in grads:
        x.copy_(torch.randn(x.numel(), generator=g))


def bits(params):
    return [p.view(torch.int32).clone() for p in params]


def test_per_group_lrs_equal_lr_scale():
    a, pa, ga = make([dict(weight_decay=0.01), dict(lr_scale=0.5)])
    b, pb, gb = make([dict(weight_decay=0.01), dict()])
    for t in range(3):
        fill(ga, t)
        fill(gb, t)
        lr = 1e-2 * (1 + t)
        a.step(lr)
        b.step([lr, lr * 0.5])
    assert all(torch.equal(x, y) for x, y in zip(bits(pa), bits(pb)))


def test_groups_per_step_equal_set_groups():
    a, pa, ga = make([dict(), dict()])
    b, pb, gb = make([dict(), dict()])
    for t in range(3):
        groups = [dict(weight_decay=0.01 * t, beta1=0.9 - 0.01 * t), dict(eps=1e-8 * (t + 1))]
        fill(ga, t)
        fill(gb, t)
        a.set_groups(groups)
        a.step(1e-2)
        b.step([1e-2, 1e-2], groups=groups)
    assert all(torch.equal(x, y) for x, y in zip(bits(pa), bits(pb)))
    assert b.snapshot()["groups"][0]["weight_decay"] == pytest.approx(0.02)


def test_gradients_handed_per_step():
    a, pa, ga = make([dict()])
    b, pb, gb = make([dict()])
    for x in gb:
        x.fill_(math.nan)  # never read: b is handed other buffers
    kept = []
    for t in range(3):
        fill(ga, t)
        other = [torch.empty_like(x) for x in ga]
        for o, x in zip(other, ga):
            o.copy_(x)
        kept.append(other)
        a.step(1e-2)
        if t == 1:  # early start hands them one by one
            for k in reversed(range(len(other))):
                b.grad_ready(k, other[k].data_ptr())
            b.step(1e-2)
        else:
            b.step(1e-2, grads=[o.data_ptr() for o in other])
        for k in range(len(other)):
            b.wait_grad_consumed(k)
    assert all(torch.equal(x, y) for x, y in zip(bits(pa), bits(pb)))


def test_bad_inputs_are_refused():
    b, _, gb = make([dict(), dict()])
    fill(gb, 0)
    with pytest.raises(ValueError, match="1 learning rates given for 2 groups"):
        b.step([1e-2])
    with pytest.raises(ValueError, match="group 1: learning rate"):
        b.step([1e-2, -1.0])
    with pytest.raises(ValueError, match="lr must be a number or a sequence"):
        b.step("0.1")
    with pytest.raises(ValueError, match=r"group_hyper\[0\]"):
        b.step([1e-2, 1e-2], groups=[dict(beta1=2.0), dict()])
    with pytest.raises(ValueError, match="grads has 1 entries for 3 tensors"):
        b.step(1e-2, grads=[0])
    b.grad_ready(0)
    with pytest.raises(ValueError, match="a step is under way"):
        b.wait_grad_consumed(0)
    assert b.step_count == 0
    assert b.step(1e-2)[0]


def test_begin_step_takes_per_group_lrs():
    b, _, gb = make([dict(), dict()], speculative=True)
    b.begin_step([1e-2, 2e-2])
    fill(gb, 0)
    for k in reversed(range(3)):
        b.grad_ready(k)
    with pytest.raises(ValueError, match="does not match BeginStep"):
        b.step([1e-2, 3e-2])
    b.begin_step([1e-2, 2e-2])
    for k in reversed(range(3)):
        b.grad_ready(k)
    assert b.step([1e-2, 2e-2])[0]


def test_rate_cache_is_visible_and_resettable():
    assert isinstance(C.rate_cache_entries(), list)  # host mode measures nothing
    C.reset_rate_cache()
    assert C.rate_cache_entries() == []


def test_one_version_source():
    import pathlib
    import re
    header = pathlib.Path(__file__).resolve().parents[2] / "include" / "tandem" / "version.h"
    want = re.search(r'TANDEM_VERSION_STRING "([0-9.]+)"', header.read_text()).group(1)
    assert tandem.__version__ == C.__version__ == want
