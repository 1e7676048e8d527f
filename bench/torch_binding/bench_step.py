#!/usr/bin/env python3
"""Overhead of the tandem.torch binding: wall time of opt.step() against the engine's own
step time (last_step_times()['step_ms']), and torch.optim.AdamW on the same tensors.

  PYTHONPATH=build/python python3 bench/torch_binding/bench_step.py --device cuda \\
      --tensors 148 --params 124e6 --fractions 0,0.5,1 --json binding.json

Tensors are equal-sized fp32 parameters with random gradients (no model): the numbers are
the optimizer step alone. Reports medians over --iters steps after --warmup steps.
"""

import argparse
import json
import statistics
import time

import torch

import tandem.torch


def make_params(n_tensors, n_params, device):
    size = max(1, int(n_params) // n_tensors)
    g = torch.Generator().manual_seed(0)
    params = []
    for _ in range(n_tensors):
        p = torch.nn.Parameter(torch.randn(size, generator=g).to(device))
        p.grad = torch.randn(size, generator=g).to(device) * 1e-3
        params.append(p)
    return params


def timed(opt, params, device, warmup, iters):
    sync = torch.cuda.synchronize if device == "cuda" else (lambda: None)
    walls, engine = [], []
    for i in range(warmup + iters):
        with torch.no_grad():
            for p in params:  # a write: tandem.torch steps parameters with a new gradient
                p.grad.mul_(1.0)
        sync()
        t0 = time.perf_counter()
        opt.step()
        sync()
        if i >= warmup:
            walls.append((time.perf_counter() - t0) * 1e3)
            if hasattr(opt, "last_step_times"):
                engine.append(opt.last_step_times()["step_ms"])
    return statistics.median(walls), (statistics.median(engine) if engine else None)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--tensors", type=int, default=148)
    ap.add_argument("--params", type=float, default=20e6)
    ap.add_argument("--fractions", default="0,0.5,1")
    ap.add_argument("--formats", default="bf16+ecc8/q8/q8")
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--iters", type=int, default=10)
    ap.add_argument("--json")
    args = ap.parse_args()

    rows = []
    fractions = [float(f) for f in args.fractions.split(",")]
    if args.device == "cpu":
        fractions = [0.0]  # host mode: every element is stepped by the host anyway
    master, momentum, variance = args.formats.split("/")
    for f in fractions:
        params = make_params(args.tensors, args.params, args.device)
        opt = tandem.torch.AdamW(params, lr=1e-4, offload_fraction=f, master=master,
                                 momentum=momentum, variance=variance)
        wall, engine = timed(opt, params, args.device, args.warmup, args.iters)
        rows.append(dict(run="tandem %s f=%g" % (args.formats, f), wall_ms=wall,
                         engine_ms=engine, overhead_ms=wall - engine))
        del opt, params
    params = make_params(args.tensors, args.params, args.device)
    kwargs = dict(fused=True) if args.device == "cuda" else {}
    try:
        opt = torch.optim.AdamW(params, lr=1e-4, **kwargs)
    except (TypeError, RuntimeError):
        opt = torch.optim.AdamW(params, lr=1e-4)
    wall, _ = timed(opt, params, args.device, args.warmup, args.iters)
    rows.append(dict(run="torch AdamW %s" % ("fused" if kwargs else "default"), wall_ms=wall,
                     engine_ms=None, overhead_ms=None))

    print("%d tensors, %.3g parameters, %s" % (args.tensors, args.params, args.device))
    print("%-36s %10s %10s %12s" % ("run", "wall ms", "engine ms", "overhead ms"))
    for r in rows:
        fmt = lambda v: "-" if v is None else "%.3f" % v  # noqa: E731
        print("%-36s %10s %10s %12s" % (r["run"], fmt(r["wall_ms"]), fmt(r["engine_ms"]),
                                         fmt(r["overhead_ms"])))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(dict(args=vars(args), rows=rows), f, indent=1)


if __name__ == "__main__":
    main()
