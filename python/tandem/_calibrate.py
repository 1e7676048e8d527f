"""The binding's part of the fixed step cost (Note [Fixed step cost] in tandem/planner.h),
measured in Python and written into a calibration profile.

``tandem-bench calibrate`` measures the engine's part (HybridOptimizer::Step over tiny
tensors) from C++; what tandem.torch's ``step()`` adds around it (per tensor: the
gradient checks, ``data_ptr`` and version counters; per step: the lr and hyper-parameter
checks, stream ordering) can only be measured from Python, so this module does it and
adds ``step_overhead.binding`` to the profile, where tandem-plan and tandem.plan read it::

    import tandem
    tandem.calibrate_binding("profile.json")   # on the machine that trains

bench/planner_accuracy.py runs it when its profile has no binding figures.
"""

import json
import os
import statistics
import time

__all__ = ["measure_binding_overhead", "calibrate_binding"]

# As tandem-bench calibrate (tools/bench/calibrate.cc): tiny tensors of 256 bf16
# elements, AdamW bf16+ecc8/q8/q8, every element offloaded and streamed.
_NUMEL = 256
TENSORS = (16, 512)


def _step_ms(n, device, steps):
    """Median over `steps` of step()'s host time less the engine's Step (ms), over `n`
    tiny tensors; GPU work is waited for between steps, outside the timing."""
    import torch
    import tandem.torch
    named = []
    for i in range(n):
        p = torch.nn.Parameter(torch.full((_NUMEL,), 0.01, dtype=torch.bfloat16,
                                          device=device))
        p.grad = torch.full_like(p, 1e-3)
        named.append(("t%d" % i, p))
    opt = tandem.torch.AdamW(named, lr=1e-5, weight_decay=0.01, offload_fraction=1.0,
                             master="bf16+ecc8", momentum="q8", variance="q8",
                             offload_compute=1.0)
    params = [p for _, p in named]
    cuda = device.type == "cuda"
    times = []
    for i in range(steps + 2):
        with torch.no_grad():
            for p in params:
                p.grad.mul_(1.0)  # a new gradient, in the engine's buffer
        if cuda:
            torch.cuda.synchronize(device)
        t0 = time.perf_counter()
        opt.step()
        wall = (time.perf_counter() - t0) * 1e3
        engine = opt.last_step_times()["step_ms"]
        if cuda:
            torch.cuda.synchronize(device)
        if i >= 2:
            times.append(wall - engine)
    del opt, params, named
    return statistics.median(times)


def measure_binding_overhead(device=None, tensors=TENSORS, steps=50):
    """The binding's fixed step cost on `device` (None: CUDA when available, else the
    CPU): ``{"per_step_ms", "per_tensor_us"}``, the line through the median costs at the
    two tensor counts (negative parts clamp to 0, as tandem-bench calibrate's)."""
    import torch
    if device is None:
        device = "cuda" if torch.cuda.is_available() else "cpu"
    device = torch.device(device)
    few, many = tensors
    if not 0 < few < many:
        raise ValueError("tensors must be two counts, fewer first, got %r" % (tensors,))
    few_ms = _step_ms(few, device, steps)
    many_ms = _step_ms(many, device, steps)
    per_tensor_us = max(0.0, 1e3 * (many_ms - few_ms) / (many - few))
    per_step_ms = max(0.0, few_ms - per_tensor_us * 1e-3 * few)
    return {"per_step_ms": per_step_ms, "per_tensor_us": per_tensor_us}


def calibrate_binding(profile, device=None, tensors=TENSORS, steps=50):
    """Measures the binding's fixed step cost (measure_binding_overhead) and writes it
    into the calibration profile file `profile` as ``step_overhead.binding`` (replacing
    one already there; every other field kept; the file replaced atomically). Returns
    the figures. Raises ValueError naming the file when it is not a profile's JSON
    object, OSError when it cannot be read or written."""
    path = os.fspath(profile)
    with open(path) as fh:
        try:
            data = json.load(fh)
        except ValueError as e:
            raise ValueError("%s: not valid JSON (%s)" % (path, e)) from e
    if not isinstance(data, dict) or "schema" not in data:
        raise ValueError("%s: not a calibration profile (no 'schema' field)" % path)
    figures = measure_binding_overhead(device, tensors, steps)
    overhead = data.get("step_overhead")
    if not isinstance(overhead, dict):
        overhead = {}
    overhead["binding"] = figures
    data["step_overhead"] = overhead
    tmp = path + ".tmp"
    with open(tmp, "w") as fh:
        json.dump(data, fh, indent=2)
        fh.write("\n")
    os.replace(tmp, path)
    return figures
