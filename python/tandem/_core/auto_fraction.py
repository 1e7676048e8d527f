"""offload_fraction="auto": the offload fraction chosen from what training leaves of the GPU.

Note [Automatic offload fraction] (docs/python.md, "offload_fraction="auto"", has the
terms): the optimizer is built at fraction 1 and torch's peak statistics of the device
are reset; after the first ``step()`` the fraction is re-planned once from the engine's
own memory model (``tandem._C.predict_memory``): the smallest multiple of 1e-4 whose
device bytes fit capacity - others - headroom (others: the reserved peak less the
engine's bytes). When it is lower by MIN_MOVE or more, the engine is rebuilt there (the
old one freed first) with its state bit for bit. Host mode: "auto" is fraction 0.
"""

import sys

import torch

from tandem._core import device_memory as _device_memory

HEADROOM_FRACTION = 0.05
HEADROOM_BYTES = 256 << 20
# A move saves less than this share of the elements: not worth rebuilding the engine.
MIN_MOVE = 0.01


def starting_fraction(device):
    """The fraction an "auto" optimizer on `device` is built at: 1 on a GPU, 0 on the CPU."""
    return 1.0 if device is not None and device.type == "cuda" else 0.0


def capacity_bytes(device):
    """The capacity of Note [Automatic offload fraction] on `device`."""
    free, total = torch.cuda.mem_get_info(device)
    capacity = free + torch.cuda.memory_reserved(device)
    getter = getattr(torch.cuda, "get_per_process_memory_fraction", None)
    if getter is not None:
        capacity = min(capacity, int(getter(device) * total))
    return capacity


def choose(specs, config, capacity, others, current):
    """(fraction, budget) for an engine over `specs` with `config` when training takes
    `others` bytes of `capacity` besides it (Note [Automatic offload fraction]); the
    fraction is `current` when no lower one fits or the move would be too small."""
    budget = capacity - others - int(HEADROOM_FRACTION * capacity) - HEADROOM_BYTES
    fraction = _device_memory.smallest_fitting_fraction(specs, config, budget)
    if fraction is None or fraction > current - MIN_MOVE:
        return current, budget
    return fraction, budget


class AutoFraction:
    """The re-plan of an optimizer built with offload_fraction="auto", over its
    front-end core (engine.py)."""

    def __init__(self, core, log=None):
        self.core = core
        self.pending = core.cuda
        self.log = log or (lambda line: print(line, file=sys.stderr, flush=True))
        self.chosen = None  # (fraction, why) once decided
        self.others = self.budget = None  # the re-plan's terms, in bytes
        if core.cuda:
            torch.cuda.reset_peak_memory_stats(core.device)
            self.log("tandem: offload_fraction=\"auto\" on %s: starting at 1 (all optimizer "
                     "state in pinned host memory) until the first step measures what "
                     "training needs on the GPU" % core.device)
        else:
            self.chosen = (0.0, "host mode: no GPU memory to save")

    def after_step(self):
        """After the first step: re-plans and moves the state once."""
        if not self.pending:
            return
        self.pending = False
        core = self.core
        device = core.device
        with core.guard():
            core.synchronize()
            engine_bytes = core.engine.memory()["device"]["total"]
            peak = torch.cuda.max_memory_reserved(device)
            capacity = capacity_bytes(device)
        others = max(0, peak - engine_bytes)
        current = core.config.offload_fraction
        specs = core._specs()
        config = _device_memory.with_measured_rates(specs, core.engine_config())
        fraction, budget = choose(specs, config, capacity, others, current)
        self.others, self.budget = others, budget
        gib = _device_memory.GIB
        why = ("training took %.2f GiB of %.2f GiB besides the optimizer at its peak; the "
               "optimizer may use %.2f GiB" % (others / gib, capacity / gib, max(budget, 0) / gib))
        if fraction < current:  # the new engine decides with the rates the plan used
            core.move_state(offload_fraction=fraction, machine_rates=config.machine_rates)
            need = core.engine.memory()["device"]["total"]
            self.log("tandem: offload_fraction=\"auto\" on %s: moved to %.4g (%s; it takes "
                     "%.2f GiB there)" % (device, fraction, why, need / gib))
        else:
            self.log("tandem: offload_fraction=\"auto\" on %s: stays at %.4g (%s)"
                     % (device, current, why))
        self.chosen = (fraction, why)


class _Off:
    """What an optimizer without "auto" holds in its place: nothing to do."""

    pending, chosen = False, None

    def after_step(self):
        pass


OFF = _Off()
