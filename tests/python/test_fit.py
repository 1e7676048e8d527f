"""What makes a model fit (docs/python.md, "GPU memory: one pool with torch" and
"offload_fraction='auto'"), without a GPU: the device allocator option, the engine's
memory model from Python, the fraction that fits a budget, the re-plan's arithmetic,
moving the state to another fraction bit for bit, "auto" in host mode, and the bound
on the released gradients in flight (host mode, CPU; tests/python/test_gpu_fit.py runs
the GPU side)."""

import pytest
import torch

import tandem
import tandem._C as C
import tandem.torch
from tandem._core import auto_fraction as _auto_fraction
from tandem._core import device_memory as _device_memory
from helpers import batches, make_mlp, params_bits, same_bits
from test_release import state_bits, train as release_train

Q8 = dict(master_format="bf16+ecc8", momentum_format="q8", variance_format="q8")


def gpu_specs():
    """Tensor specs of a small model for the engine's memory model in GPU mode (pure: no
    GPU needed, the pointers are never read)."""
    sizes = [4096 * 14336] * 8 + [4096, 37, 0, 1000]  # 470M elements: state >> stream slots
    return [("t%d" % i, n, "bf16", "bf16", 0, 0, 0) for i, n in enumerate(sizes)]


def gpu_config(**fields):
    fields.setdefault("offload_compute", "gpu")
    return C.OptimizerConfig(algorithm="adamw", mode="gpu", master="bf16+ecc8", momentum="q8",
                             variance="q8", **fields)


def test_the_device_allocator_option_takes_an_allocator_or_none():
    calls = []
    alloc = C.DeviceAllocator(lambda n, what: calls.append(n) or 0, lambda p, n: None)
    cfg = C.OptimizerConfig(device_allocator=alloc)
    assert cfg.device_allocator is alloc
    cfg.device_allocator = None
    assert cfg.device_allocator is None
    with pytest.raises(ValueError, match="device_allocator must be None or a tandem._C."
                                         "DeviceAllocator"):
        C.OptimizerConfig(device_allocator=lambda n: 0)
    with pytest.raises(TypeError, match="device_allocator.*the optimizer sets it"):
        tandem.torch.AdamW(make_mlp().parameters(), device_allocator=alloc)


def test_out_of_memory_is_torchs_too():
    assert issubclass(tandem.OutOfMemoryError, _device_memory.TorchOutOfMemoryError)
    assert issubclass(tandem.OutOfMemoryError, MemoryError)
    assert issubclass(tandem.OutOfMemoryError, C.OutOfMemoryError)
    # The engine's own out-of-memory errors are raised as it (here: a host budget).
    with pytest.raises(tandem.OutOfMemoryError, match="pinned_budget_bytes"):
        tandem.torch.AdamW(make_mlp().parameters(), offload_fraction=1.0, pinned_budget=64)
    with pytest.raises(TypeError):
        C._set_error_class("out of memory", ValueError)  # must subclass the kind's class


def test_predict_memory_is_what_the_engine_reports():
    model = make_mlp(seed=4)
    opt = tandem.torch.AdamW(model.named_parameters(), offload_fraction=0.5,
                             chunk_elements=64, **Q8)
    specs = opt._core._specs()
    assert C.predict_memory(specs, opt._core.engine_config()) == opt.memory()


def test_predictions_at_other_fractions_take_the_measured_rates():
    specs = gpu_specs()
    rates = dict(h2d_gbps=50.0, d2h_gbps=50.0, host_gparams=5.0, gpu_gparams=100.0)
    cfg = gpu_config(offload_compute="auto", offload_fraction=0.5)
    assert C.rates_for(specs, cfg) is None  # host-only CI: nothing was measured
    assert _device_memory.with_measured_rates(specs, cfg) is cfg
    given = _device_memory.with_options(cfg, machine_rates=rates)
    assert C.rates_for(specs, given) == rates
    assert _device_memory.device_bytes(specs, given) is not None
    assert _device_memory.device_bytes(specs, cfg) is None  # auto without rates


def test_the_smallest_fitting_fraction_fits_and_the_next_lower_does_not():
    specs, cfg = gpu_specs(), gpu_config()
    at = {f: _device_memory.device_bytes(specs, _device_memory.with_options(
        cfg, offload_fraction=f)) for f in (0.0, 1.0)}
    assert at[0.0] > at[1.0] > 0
    budget = (at[0.0] + at[1.0]) // 2
    f = _device_memory.smallest_fitting_fraction(specs, cfg, budget)
    assert 0 < f < 1
    need = lambda x: _device_memory.device_bytes(  # noqa: E731
        specs, _device_memory.with_options(cfg, offload_fraction=x))
    assert need(f) <= budget < need(round(f - 1e-4, 4))
    assert _device_memory.smallest_fitting_fraction(specs, cfg, at[0.0]) == 0.0
    assert _device_memory.smallest_fitting_fraction(specs, cfg, at[1.0] - 1) is None


def test_the_replan_leaves_training_its_peak_and_a_headroom():
    specs, cfg = gpu_specs(), gpu_config()
    full = _device_memory.device_bytes(specs, _device_memory.with_options(cfg,
                                                                           offload_fraction=0.0))
    capacity = 40 << 30
    # Room for everything: fraction 0.
    fraction, budget = _auto_fraction.choose(specs, cfg, capacity, 1 << 30, current=1.0)
    assert fraction == 0.0 and budget >= full
    # Training takes all but the headroom and a little: the state stays offloaded.
    others = capacity - int(0.05 * capacity) - (256 << 20) - (1 << 20)
    fraction, budget = _auto_fraction.choose(specs, cfg, capacity, others, current=1.0)
    assert fraction == 1.0 and budget == 1 << 20
    # In between: the smallest fraction that fits what is left.
    others = capacity - int(0.05 * capacity) - (256 << 20) - full // 2
    fraction, budget = _auto_fraction.choose(specs, cfg, capacity, others, current=1.0)
    assert 0 < fraction < 1
    assert _device_memory.device_bytes(specs, _device_memory.with_options(
        cfg, offload_fraction=fraction)) <= budget
    # A move of less than 0.01 is not worth a rebuild.
    same, _ = _auto_fraction.choose(specs, cfg, capacity, others, current=fraction + 0.005)
    assert same == fraction + 0.005


def run_moved(move_at, start, end, steps=6, **options):
    model = make_mlp(seed=9)
    opt = tandem.torch.AdamW(model.named_parameters(), lr=3e-3, weight_decay=0.1,
                             offload_fraction=start, chunk_elements=64,
                             stream_chunk_bytes=4096, max_grad_norm=1.0, **Q8, **options)
    for t, (x, y) in enumerate(batches(steps, seed=10)):
        if t == move_at:
            opt._core.move_state(offload_fraction=end)
        opt.zero_grad()
        torch.nn.functional.mse_loss(model(x), y).backward()
        opt.step()
    return params_bits(model), state_bits(opt), opt


@pytest.mark.parametrize("compute", ["host", "gpu"])
def test_moving_the_state_gives_the_bits_of_a_run_at_the_new_fraction(compute):
    ref = run_moved(None, 0.3, 0.3, offload_compute=compute)
    got = run_moved(2, 1.0, 0.3, offload_compute=compute)
    assert got[2].placement()["offloaded"] == ref[2].placement()["offloaded"]
    assert same_bits(got[0], ref[0]) and same_bits(got[1], ref[1])
    assert got[2].tensor_step_counts() == ref[2].tensor_step_counts()


def test_moving_keeps_what_was_never_stepped():
    model = make_mlp(seed=12)
    head = model[4]
    head.requires_grad_(False)
    opt = tandem.torch.AdamW(model.named_parameters(), offload_fraction=1.0, **Q8)
    before = [p.detach().clone() for p in model.parameters()]
    opt._core.move_state(offload_fraction=0.0)
    assert all(torch.equal(a, b) for a, b in zip(before, model.parameters()))
    assert opt.placement()["offloaded"] == 0


def test_auto_in_host_mode_is_fraction_zero():
    model = make_mlp(seed=13)
    opt = tandem.torch.AdamW(model.named_parameters(), offload_fraction="auto", **Q8)
    assert opt.placement()["offloaded"] == 0
    assert opt.auto_fraction == (0.0, "host mode: no GPU memory to save")
    x, y = batches(1, seed=14)[0]
    torch.nn.functional.mse_loss(model(x), y).backward()
    opt.step()
    assert opt.last_result.applied
    with pytest.raises(ValueError, match=r'offload_fraction must be a number in \[0, 1\] or '
                                         r'"auto", got \'half\''):
        tandem.torch.AdamW(model.parameters(), offload_fraction="half")
    assert tandem.torch.AdamW(model.parameters()).auto_fraction is None


def test_auto_survives_a_deep_copy():
    import copy
    model = make_mlp(seed=15)
    opt = tandem.torch.AdamW(model.named_parameters(), offload_fraction="auto", **Q8)
    model2, opt2 = copy.deepcopy((model, opt))
    assert opt2.auto_fraction == opt.auto_fraction


@pytest.mark.parametrize("bound", [0, 4096])
def test_bounded_gradients_in_flight_stay_exact(bound, monkeypatch):
    """Note [Gradients in flight]: a bound that makes every hand-over wait changes no
    bit (the release tests' loop, clipping and a skipped step included)."""
    ref = release_train(0.5, "gpu")
    orig = tandem.torch.AdamW.__init__

    def bounded(self, *a, **kw):
        orig(self, *a, grads_in_flight_bytes=bound, **kw)
    monkeypatch.setattr(tandem.torch.AdamW, "__init__", bounded)
    got = release_train(0.5, "gpu", release=True)
    assert got[2] == ref[2]
    assert same_bits(got[0], ref[0]) and same_bits(got[1], ref[1])
    assert len(got[4]._core.held) <= 1


def test_grads_in_flight_bytes_is_checked():
    with pytest.raises(ValueError, match=r"grads_in_flight_bytes must be an integer >= 0"):
        tandem.torch.AdamW(make_mlp().parameters(), grads_in_flight_bytes=-1)
