"""The GPU side of tests/python/test_fit.py (skipped without a CUDA device): the engine's
device memory comes from torch's caching allocator, so an optimizer built after a model
was cast from fp32 to bf16 takes the cast's freed memory from torch's cache with the
driver's free memory held low; out of memory is a torch.OutOfMemoryError that says what
fits and leaves nothing allocated; offload_fraction="auto" moves to the fraction that fits
after the first step, with the bits of a run started there."""

import ctypes
import contextlib

import pytest
import torch

import tandem
import tandem.torch
from tandem._core import device_memory as _device_memory
from helpers import params_bits, same_bits

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")

Q8 = dict(master_format="bf16+ecc8", momentum_format="q8", variance_format="q8")


@contextlib.contextmanager
def driver_free(keep_bytes):
    """Holds all of the device's free memory but `keep_bytes` through the driver (outside
    torch), for the duration."""
    torch.cuda.synchronize()
    free, _ = torch.cuda.mem_get_info()
    cuda = ctypes.CDLL("libcuda.so.1")
    ptr = ctypes.c_uint64()
    assert cuda.cuMemAlloc_v2(ctypes.byref(ptr), ctypes.c_size_t(free - keep_bytes)) == 0
    try:
        yield
    finally:
        torch.cuda.synchronize()
        cuda.cuMemFree_v2(ptr)


def cast_model(params, layers=4):
    """`layers` Linear layers of `params` elements in all, built in fp32 on the GPU and
    cast to bf16: what the fp32 copies freed stays in torch's cache (returned too)."""
    torch.manual_seed(0)
    side = int((params // layers) ** 0.5)
    model = torch.nn.Sequential(*[torch.nn.Linear(side, side, bias=False)
                                  for _ in range(layers)])
    model = model.cuda().to(torch.bfloat16)
    torch.cuda.synchronize()
    return model, torch.cuda.memory_reserved() - torch.cuda.memory_allocated()


def host_computed(model, fraction):
    """No stream slots or rate probe (host compute), no gradient buffers (release)."""
    return tandem.torch.AdamW(model.parameters(), lr=1e-3, offload_fraction=fraction,
                              offload_compute="host", release_grads=True, **Q8)


def test_the_optimizer_takes_torchs_cached_memory():
    torch.cuda.empty_cache()
    # One layer: its fp32 weight is one 256 MiB segment of torch's cache after the cast
    # (several layers would leave one segment each, too small for the engine's slab once
    # the gradients took their halves). The gradients come first, as backward's would.
    model, _ = cast_model(64 << 20, layers=1)
    grads = [torch.randn_like(p) for p in model.parameters()]
    torch.cuda.synchronize()
    cached = torch.cuda.memory_reserved() - torch.cuda.memory_allocated()
    # The fraction whose state fits in 80% of what is left cached, computed on the host (no
    # stream slots, no rate probe), takes more than the driver will have free.
    probe = host_computed(model, 1.0)
    specs, cfg = probe._core._specs(), probe._core.engine_config()
    del probe
    fraction = _device_memory.smallest_fitting_fraction(specs, cfg, int(0.8 * cached))
    assert fraction is not None and fraction < 0.9, cached
    before = torch.cuda.memory_allocated()
    with driver_free(32 << 20):  # cudaMalloc would find 32 MiB
        opt = host_computed(model, fraction)
        engine = opt.memory()["device"]["total"]
        assert engine > 64 << 20, engine
        assert torch.cuda.memory_allocated() - before >= engine
        for p, g in zip(model.parameters(), grads):
            p.grad = g
        opt.step()
        torch.cuda.synchronize()
        assert opt.last_result.applied
        del opt
        torch.cuda.synchronize()
    assert torch.cuda.memory_allocated() == before  # every engine buffer went back
    del model, grads
    torch.cuda.empty_cache()


def test_out_of_memory_says_what_fits_and_takes_nothing():
    torch.cuda.empty_cache()
    model, _ = cast_model(64 << 20)
    torch.cuda.empty_cache()  # nothing cached: the driver's 48 MiB are all there is
    before = torch.cuda.memory_allocated()
    with driver_free(48 << 20):
        with pytest.raises(torch.OutOfMemoryError) as info:
            host_computed(model, 0.0)
        assert isinstance(info.value, tandem.OutOfMemoryError)
        text = str(info.value)
        assert "At offload_fraction=0 it needs" in text, text
        assert "fits in the memory free now" in text, text
        assert torch.cuda.memory_allocated() == before
    del model
    torch.cuda.empty_cache()


def make_model():
    torch.manual_seed(1)
    return torch.nn.Sequential(torch.nn.Linear(4096, 4096), torch.nn.GELU(),
                               torch.nn.Linear(4096, 4096)).cuda().to(torch.bfloat16)


def batch(g):
    return torch.randn(256, 4096, generator=g).cuda().to(torch.bfloat16)


def run(fraction, steps=4, cap=None):
    model = make_model()
    torch.cuda.empty_cache()
    if cap is not None:
        torch.cuda.set_per_process_memory_fraction(cap / torch.cuda.mem_get_info()[1])
    try:
        opt = tandem.torch.AdamW(model.parameters(), lr=1e-3, offload_fraction=fraction,
                                 offload_compute="host", release_grads=True, **Q8)
        g = torch.Generator().manual_seed(2)
        for _ in range(steps):
            model(batch(g)).float().pow(2).mean().backward()
            opt.step()
            opt.zero_grad()
        torch.cuda.synchronize()
        return [b.cpu() for b in params_bits(model)], opt
    finally:
        torch.cuda.set_per_process_memory_fraction(1.0)


def test_auto_moves_once_to_a_fraction_that_fits_with_the_bits_of_a_run_there():
    torch.cuda.empty_cache()
    # Without a cap everything fits: fraction 0. A cap between one that leaves the state
    # no room and one that leaves it all of it then moves auto to a fraction between 0 and
    # 1 (Note [Automatic offload fraction]). What auto counts as training's is torch's
    # reserved peak, which is lower under a cap (the allocator frees its cache and retries
    # before it fails) than without one, so no one cap computed from the uncapped run is
    # sure to land between: the cap is bisected until the run under it measures such a
    # fraction.
    _, opt = run("auto")
    assert opt.auto_fraction[0] == 0.0, opt.auto_fraction
    state = opt.memory()["device"]["total"]
    lo = torch.cuda.max_memory_allocated() - state + (256 << 20)  # no room for the state
    hi = opt._auto.others + (256 << 20) + state                   # room for all of it
    del opt
    torch.cuda.empty_cache()
    tried = []
    for _ in range(8):
        cap = int((lo + hi) / 2 / 0.95)
        bits, opt = run("auto", cap=cap)
        fraction, why = opt.auto_fraction
        if 0.0 < fraction < 1.0:
            break
        tried.append("cap %.3f GiB: fraction %g (%s)" % (cap / 2**30, fraction, why))
        lo, hi = (lo, (lo + hi) / 2) if fraction == 0.0 else ((lo + hi) / 2, hi)
        opt = None
        torch.cuda.empty_cache()
    assert 0.0 < fraction < 1.0, tried
    assert abs(opt.placement()["offloaded"] / opt.placement()["total"] - fraction) < 1e-3
    del opt
    torch.cuda.empty_cache()
    ref_bits, ref = run(fraction)
    assert same_bits(bits, ref_bits)
    del ref
    torch.cuda.empty_cache()
