#!/usr/bin/env python3
"""Host speculation's work per step, on CPUs: tandem.torch.AdamW at offload fraction 1 with
speculative_early_start, every chunk host-computed, on a stack of square Linear layers fed
a fresh gradient by a real backward each step. Prints the median of
`last_step_times()["speculative_host_ms"]` (the worker's time backing up and updating the
chunks during backward) and of `step()` (what remains after backward).

    PYTHONPATH=build/python python3 bench/host_speculation.py --layers 6 --state q8

With --json the figures, command, commit and date go to a file (bench/results/).
"""
import argparse
import json
import os
import statistics
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from bench_args import command_line, git_commit, utc_now  # noqa: E402

STATES = {"q8": ("bf16+ecc8", "q8", "q8"), "f32": ("f32", "f32", "f32")}


def parse_args(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--layers", type=int, default=6, help="Linear(dim, dim) layers")
    ap.add_argument("--dim", type=int, default=4096)
    ap.add_argument("--state", choices=sorted(STATES), default="q8",
                    help="q8: bf16 parameters, bf16+ecc8/q8/q8; f32: f32 parameters and state")
    ap.add_argument("--steps", type=int, default=7)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--json", default=None)
    a = ap.parse_args(argv)
    if a.layers < 1 or a.dim < 1 or a.steps < 1 or a.warmup < 0:
        ap.error("--layers, --dim and --steps must be >= 1, --warmup >= 0")
    return a


def measure(args):
    import torch
    import tandem.torch

    torch.manual_seed(0)
    dtype = torch.bfloat16 if args.state == "q8" else torch.float32
    model = torch.nn.Sequential(*[torch.nn.Linear(args.dim, args.dim, bias=False)
                                  for _ in range(args.layers)]).to(dtype)
    master, m, v = STATES[args.state]
    opt = tandem.torch.AdamW(model.parameters(), lr=1e-4, offload_fraction=1.0,
                             master_format=master, momentum_format=m, variance_format=v,
                             speculative_early_start=True, speculative_host_bytes=1 << 50,
                             max_grad_norm=1e9)
    spec, step, kept = [], [], []
    for i in range(args.warmup + args.steps):
        x = torch.randn(2, args.dim, dtype=dtype)  # a fresh gradient every step
        opt.begin_step()
        model(x).float().sum().backward()
        t0 = time.perf_counter()
        opt.step()
        opt.zero_grad(set_to_none=False)
        if i >= args.warmup:
            times = opt.last_step_times()
            spec.append(times["speculative_host_ms"])
            step.append((time.perf_counter() - t0) * 1e3)
            kept.append(times["speculated_chunks"] - times["rolled_back_chunks"])
    return dict(elements=sum(p.numel() for p in model.parameters()),
                speculative_host_ms=statistics.median(spec), step_ms=statistics.median(step),
                speculative_host_ms_all=spec, kept_chunks=min(kept))


def main(argv=None):
    args = parse_args(argv)
    r = measure(args)
    text = ("%s state, %d x Linear(%d, %d): %.0f M elements; host speculation %.1f ms per step "
            "(%.2f G elements/s), step() after backward %.1f ms; %d chunks kept"
            % (args.state, args.layers, args.dim, args.dim, r["elements"] / 1e6,
               r["speculative_host_ms"], r["elements"] / r["speculative_host_ms"] / 1e6,
               r["step_ms"], r["kept_chunks"]))
    print(text)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(dict(benchmark="host_speculation",
                           command=command_line("host_speculation.py",
                                                sys.argv[1:] if argv is None else argv),
                           commit=git_commit(), date=utc_now(), state=args.state,
                           layers=args.layers, dim=args.dim, table=text, **r), f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
