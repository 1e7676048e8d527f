"""tandem._C's gradient-release forms (host mode): OptimizerConfig.release_grads and
speculative_host_bytes, grad_ready(i, grad, ready_stream), grad_consumed(i),
wait_grad_consumed between grad_ready and step. With release each gradient is
overwritten as soon as the engine says it is consumed (as a freed and reused gradient
would be), and the steps give the bits of plain steps that read the gradients at step():
at fractions 0, 0.5 and 1, through steps that clip and a step with a NaN. The C++ engine
is tested the same way (tests/offload/release_host_test.cc); tandem.torch does not use
release yet."""

import math

import pytest
import torch

import tandem
import tandem._C as C

SIZES = (100, 37, 64, 5)
MAX_NORM = 30.0


def make(fraction, release=False, speculative=False, **extra):
    g = torch.Generator().manual_seed(1)
    params = [torch.randn(n, generator=g) for n in SIZES]
    grads = [torch.zeros(n) for n in SIZES]
    specs = [("w%d" % k, p.numel(), "f32", "f32", p.data_ptr(), gr.data_ptr(), k % 2)
             for k, (p, gr) in enumerate(zip(params, grads))]
    config = C.OptimizerConfig(algorithm="adamw", mode="host", offload_fraction=fraction,
                               offload_compute="host", chunk_elements=32,
                               release_grads=release, speculative_early_start=speculative,
                               groups=[dict(weight_decay=0.01), dict()], **extra)
    engine = C.HybridOptimizer(specs, config)
    return engine, params, grads


def train(fraction, release, speculative=False, steps=8):
    engine, params, grads = make(fraction, release, speculative)
    results = []
    for t in range(1, steps + 1):
        lr = 1e-3 * (1 + 0.01 * t)
        if speculative:
            engine.begin_step(lr, max_grad_norm=MAX_NORM)
        g = torch.Generator().manual_seed(100 + t)
        scale = 10.0 if t % 3 == 2 else 1.0  # steps 2, 5, 8 clip
        for x in grads:
            x.copy_(torch.randn(x.numel(), generator=g) * scale)
        if t == 4:
            grads[-1][2] = math.nan  # skipped everywhere
        if release:
            for k in reversed(range(len(grads))):  # backward order
                engine.grad_ready(k, grads[k].data_ptr(), 0)
                engine.wait_grad_consumed(k)  # host mode: blocks until the reads completed
                assert engine.grad_consumed(k), (t, k)
                grads[k].fill_(3e38)  # the memory is reused
        results.append(engine.step(lr, max_grad_norm=MAX_NORM)[:2])
    return [p.view(torch.int32).clone() for p in params], results, engine


@pytest.mark.parametrize("fraction", [0.0, 0.5, 1.0])
@pytest.mark.parametrize("speculative", [False, True])
def test_release_gives_the_bits_of_plain_steps(fraction, speculative):
    want_params, want_results, _ = train(fraction, release=False)
    assert [a for a, _ in want_results].count(False) == 1, "the NaN step is skipped"
    assert any(a and n > MAX_NORM for a, n in want_results), "clipping never triggered"
    got_params, got_results, _ = train(fraction, release=True, speculative=speculative)
    assert got_results == want_results
    assert all(torch.equal(a, b) for a, b in zip(got_params, want_params))


def test_release_counts_the_kept_gradients():
    with_release = make(0.5, release=True)[0].memory()
    without = make(0.5)[0].memory()
    assert with_release["host"]["grads"] > 0 and without["host"]["grads"] == 0


def test_a_second_gradient_in_one_step_is_refused_and_changes_nothing():
    engine, params, grads = make(0.5, release=True)
    before = [p.clone() for p in params]
    engine.grad_ready(0, grads[0].data_ptr())
    with pytest.raises(tandem.InvalidArgumentError, match="tensor 0"):
        engine.grad_ready(0, grads[0].data_ptr())
    assert all(torch.equal(a, b) for a, b in zip(params, before))
    engine.step(1e-3)  # the step still runs, with the first gradient


def test_the_options_are_checked_and_shown():
    with pytest.raises(tandem.InvalidArgumentError, match="release_grads must be a bool"):
        C.OptimizerConfig(release_grads=1)
    with pytest.raises(tandem.InvalidArgumentError, match="speculative_host_bytes"):
        C.OptimizerConfig(speculative_host_bytes=-1)
    with pytest.raises(tandem.InvalidArgumentError, match="in_place_grad_bytes"):
        C.OptimizerConfig(in_place_grad_bytes=-1)
    c = C.OptimizerConfig(release_grads=True, speculative_host_bytes=1 << 20,
                          in_place_grad_bytes=1 << 30)
    assert c.release_grads is True and c.speculative_host_bytes == 1 << 20
    assert c.in_place_grad_bytes == 1 << 30 and C.OptimizerConfig().in_place_grad_bytes == 0
    assert "release_grads=True" in repr(c)


def test_grad_consumed_without_release_is_an_error():
    engine, _, _ = make(0.5)
    with pytest.raises(tandem.Error):
        engine.grad_consumed(0)
