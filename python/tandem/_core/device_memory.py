"""The engine's GPU memory under PyTorch: one pool with torch's caching allocator (Note
[One GPU memory pool] in include/tandem/device_allocator.h), and the out-of-memory error
that says what would fit.

Every device buffer the engine owns comes from ``torch.cuda.caching_allocator_alloc`` on
the engine's stream, so torch's statistics and caps see the engine. When an allocation
fails, torch returns its cached blocks and retries; the engine then empties torch's cache
and tries once more before it gives up. The engine frees its buffers only once nothing
it queued uses them, so torch may reuse them at once.
"""

import torch

import tandem
from tandem import _C

# torch.OutOfMemoryError since torch 2.1; torch.cuda.OutOfMemoryError before.
TorchOutOfMemoryError = getattr(torch, "OutOfMemoryError", None) or getattr(
    torch.cuda, "OutOfMemoryError", RuntimeError)


class OutOfMemoryError(_C.OutOfMemoryError, TorchOutOfMemoryError):
    """The GPU (or the pinned host memory, or a memory budget) cannot hold what the
    optimizer needs: a tandem.Error and a MemoryError, and torch.OutOfMemoryError too, so
    a training loop's handler of torch's out-of-memory errors sees the optimizer's."""


OutOfMemoryError.__module__ = "tandem"
_C._set_error_class("out of memory", OutOfMemoryError)
tandem.OutOfMemoryError = _C.OutOfMemoryError = OutOfMemoryError


def torch_allocator(device, stream):
    """A tandem._C.DeviceAllocator over torch's caching allocator on `device` (a
    torch.device) and `stream` (a CUDA stream handle, an int: the engine's)."""
    index = device.index

    def allocate(nbytes, what):
        del what  # the engine names it in its error
        for attempt in range(2):
            try:
                return torch.cuda.caching_allocator_alloc(nbytes, index, stream)
            except TorchOutOfMemoryError:
                if attempt == 0:
                    torch.cuda.empty_cache()  # torch's retry kept blocks of other streams
        return 0

    def free(address, nbytes):
        del nbytes
        torch.cuda.caching_allocator_delete(address)

    return _C.DeviceAllocator(allocate, free)


def build_engine(specs, config, device):
    """tandem._C.HybridOptimizer(specs, config) on `device` (a torch.device; CUDA: on the
    current device, config.cuda_stream set), its device memory from torch's caching
    allocator; when the GPU cannot hold it, tandem.OutOfMemoryError says what fits
    (explain_oom; nothing of it stays allocated)."""
    if device.type != "cuda":
        return _C.HybridOptimizer(specs, config)
    config = with_options(config, device_allocator=torch_allocator(device, config.cuda_stream))
    try:
        return _C.HybridOptimizer(specs, config)
    except _C.OutOfMemoryError as e:
        if "device" not in str(e):
            raise  # pinned or host memory, a budget: the engine's message says it
        raise explain_oom(e, specs, config, device) from None


GIB = float(1 << 30)


def _gib(n):
    return "%.2f GiB" % (n / GIB)


def with_options(config, **changes):
    """A copy of the engine's `config` with `changes` set."""
    cfg = config.__copy__()
    for key, value in changes.items():
        setattr(cfg, key, value)
    return cfg


def with_measured_rates(specs, config):
    """`config` with machine_rates set to the rates offload_compute "auto" measured for it,
    when it has none: the rate cache's key depends on the fraction, so predictions at
    other fractions (and the engine a move builds) decide with the same rates."""
    if config.machine_rates is not None or config.offload_compute != "auto":
        return config
    rates = _C.rates_for(specs, config)
    return config if rates is None else with_options(config, machine_rates=rates)


def device_bytes(specs, config):
    """The device bytes an engine over `specs` with `config` holds, from the engine's own
    model (what its memory() reports); None when it cannot be said (offload_compute auto
    before the rates were measured)."""
    try:
        return _C.predict_memory(specs, config)["device"]["total"]
    except ValueError:
        return None


def smallest_fitting_fraction(specs, config, budget):
    """The smallest offload fraction (a multiple of 1e-4) at which the engine's device
    bytes fit `budget`, or None when not even fraction 1 fits. The bytes fall as the
    fraction grows (the GPU-resident state shrinks), so a bisection finds it."""
    def fits(units):
        need = device_bytes(specs, with_options(config, offload_fraction=units / 1e4))
        return need is not None and need <= budget
    if not fits(10000):
        return None
    if fits(0):
        return 0.0
    lo, hi = 0, 10000  # lo does not fit, hi does
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if fits(mid):
            hi = mid
        else:
            lo = mid
    return hi / 1e4


def explain_oom(error, specs, config, device):
    """The OutOfMemoryError to raise when building an engine over `specs` with `config` on
    `device` failed with `error` (nothing of it is left allocated): the engine's need at
    the configured point, the memory free now, and the fraction and budgets that fit."""
    torch.cuda.empty_cache()
    # What the driver has free plus what torch has cached and not allocated.
    free = (torch.cuda.mem_get_info(device)[0] + torch.cuda.memory_reserved(device)
            - torch.cuda.memory_allocated(device))
    lines = ["the optimizer could not take its GPU memory: %s" % (error,)]
    config = with_measured_rates(specs, config)
    need = device_bytes(specs, config)
    if need is None:  # offload_compute "auto" failed before it measured its rates
        config = with_options(config, offload_compute=1.0)
        need = device_bytes(specs, config)
        lines.append("(Figures for offload_compute=\"gpu\", which \"auto\" picks on "
                     "PCIe-bound machines.)")
    if need is not None:
        lines.append("At offload_fraction=%g it needs %s on %s; %s are free there now "
                     "(torch's cached blocks included)." % (config.offload_fraction, _gib(need),
                                                            device, _gib(free)))
    fits = smallest_fitting_fraction(specs, config, free)
    if fits is not None and fits > config.offload_fraction:
        lines.append("offload_fraction=%g fits in the memory free now, leaving nothing for "
                     "activations and gradients; offload_fraction=\"auto\" chooses the fraction "
                     "from what training measures." % fits)
    elif fits is None:
        lean = with_options(config, speculative_stream_bytes=0, in_place_grad_bytes=0)
        at = smallest_fitting_fraction(specs, lean, free)
        if at is not None and (config.speculative_early_start or config.in_place_grad_bytes):
            lines.append("Even offload_fraction=1 does not fit with these speculation budgets; "
                         "with speculative_stream_bytes=0 and in_place_grad_bytes=0 "
                         "offload_fraction=%g fits." % at)
        else:
            lines.append("Not even offload_fraction=1 fits: the GPU holds too little beside "
                         "the model (tandem.plan(model, ...) says what would: a smaller batch "
                         "or sequence, activation checkpointing, release_grads=True).")
    return OutOfMemoryError(" ".join(lines))
