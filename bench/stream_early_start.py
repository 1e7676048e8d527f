#!/usr/bin/env python3
"""Speculative early start of streamed chunks: one training iteration (forward, backward,
step) of a Llama-style model on one GPU, tandem.torch.AdamW with its state streamed
through the GPU kernel, without and with speculative early start, in one run.

With speculative_early_start, begin_step() comes before the forward and the streamed
chunks whose gradients are final are updated during backward, on a PCIe link that is
otherwise idle then (Note [Speculating streamed chunks], offload/speculation/stream_speculation.h).
Each --budgets entry (GiB of streamed state that may be speculated; 0: the plain step)
is one mode. Every mode starts from the same weights and data, so their parameters after
the last iteration must be bit-identical: the script checks it.

    PYTHONPATH=build/python python3 bench/stream_early_start.py \\
        --json bench/results/stream_early_start_h200.json

Prints each mode's median iteration, forward+backward and step, the chunks kept from the
speculation, each speculative mode's iteration against the plain one of the same run, and
the host time of the gradient hooks. --trace DIR adds one iteration per mode under
torch.profiler (DIR/stream_es_<budget>.json.gz; bench/trace_summary.py reads them).
"""
import argparse
import gc
import gzip
import json
import os
import statistics
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "examples"))
from bench_args import HookTimer, command_line, git_commit, utc_now  # noqa: E402

LLAMA3_1B = dict(vocab=128256, dim=2048, layers=16, heads=32, kv_heads=8, hidden=8192)


def parse_args(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--layers", type=int, default=LLAMA3_1B["layers"])
    ap.add_argument("--seq", type=int, default=2048)
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--iters", type=int, default=5)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--fraction", type=float, default=1.0)
    ap.add_argument("--budgets", type=float, nargs="+", default=[0.0, 1.0, 2.0, 8.0],
                    help="GiB of streamed state speculated per mode (0: no early start)")
    ap.add_argument("--json", default=None)
    ap.add_argument("--trace", default=None, metavar="DIR",
                    help="after the timed iterations, run one more under torch.profiler and "
                         "write its Chrome trace to DIR/stream_es_<budget>.json.gz")
    a = ap.parse_args(argv)
    if any(b < 0 for b in a.budgets):
        ap.error("--budgets must be >= 0")
    return a


def run_mode(args, budget_gib, ids):
    import torch
    import tandem.torch
    from fsdp_train import Llama

    torch.manual_seed(0)
    shape = dict(LLAMA3_1B, layers=args.layers)
    model = Llama(**shape).to(device="cuda", dtype=torch.bfloat16)
    spec = budget_gib > 0
    opt = tandem.torch.AdamW(model.named_parameters(), lr=1e-4, weight_decay=0.1,
                             offload_fraction=args.fraction, offload_compute="gpu",
                             master="bf16+ecc8", momentum="q8", variance="q8",
                             speculative_early_start=spec,
                             speculative_stream_bytes=int(budget_gib * 2**30))
    fb, st, it, kept, compute, losses, handover, hooks = [], [], [], [], [], [], [], []
    hook_timer = HookTimer(opt)
    e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    for i in range(args.warmup + args.iters):
        x, y = ids[i % len(ids)]
        torch.cuda.synchronize()
        a = time.perf_counter()
        e0.record()
        losses.append(forward_backward(opt, model, x, y, spec))
        e1.record()
        # As a training loop sees it: backward done on the compute stream; the
        # speculation's copies may still run, and the step waits for what it needs.
        e1.synchronize()
        b = time.perf_counter()
        hooks_ms = hook_timer.take()
        step(opt)
        c = time.perf_counter()
        if i >= args.warmup:
            fb.append((b - a) * 1e3)
            st.append((c - b) * 1e3)
            it.append((c - a) * 1e3)
            times = opt.last_step_times()
            kept.append(times["speculated_stream_chunks"])
            handover.append(times["handover_ms"])
            hooks.append(hooks_ms)
            compute.append(e0.elapsed_time(e1))
    if args.trace:
        trace_iteration(args, budget_gib, opt, model, ids[0], spec)
    times = opt.last_step_times()
    mem = opt.memory()
    bits = [(n, p.detach().view(torch.int16).cpu()) for n, p in model.named_parameters()]
    row = dict(budget_gib=budget_gib, iteration_ms=statistics.median(it),
               forward_backward_ms=statistics.median(fb), step_ms=statistics.median(st),
               compute_stream_ms=statistics.median(compute),
               handover_ms=statistics.median(handover), hooks_ms=statistics.median(hooks),
               iterations_ms=it, speculated_stream_chunks=statistics.median(kept),
               stream_chunks=times["stream_chunks"] + times["speculated_stream_chunks"],
               speculation_host_bytes=mem["host"]["speculation"],
               speculation_device_bytes=mem["device"]["speculation"],
               losses=[float(v) for v in losses],
               params=sum(p.numel() for p in model.parameters()))
    del opt, model
    gc.collect()  # the next mode starts with this one's pinned and device memory freed
    torch.cuda.empty_cache()
    return row, bits


def forward_backward(opt, model, x, y, spec):
    """One iteration's begin_step (with speculation), forward and backward; the loss."""
    import torch.nn.functional as F
    if spec:
        opt.begin_step()
    loss = F.cross_entropy(model(x).float().flatten(0, 1), y.flatten())
    loss.backward()
    return loss.detach()


def step(opt):
    """The step after backward, until the parameters are final."""
    import torch
    opt.step()
    opt.zero_grad(set_to_none=False)
    torch.cuda.synchronize()


def trace_iteration(args, budget_gib, opt, model, batch, spec):
    """One more iteration under torch.profiler (CPU and CUDA activity, Python stacks): its
    trace shows backward's kernels on the compute stream beside the engine's copies and
    kernels, and what the thread that launches them does in between."""
    import torch
    from torch.profiler import ProfilerActivity, profile

    os.makedirs(args.trace, exist_ok=True)
    x, y = batch
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA],
                 with_stack=True) as prof:
        forward_backward(opt, model, x, y, spec)
        step(opt)
    path = os.path.join(args.trace, "stream_es_%g.json" % budget_gib)
    prof.export_chrome_trace(path)
    with open(path, "rb") as f, gzip.open(path + ".gz", "wb") as g:
        g.write(f.read())
    os.remove(path)


def table(result):
    lines = ["Llama-style, %d layers (%.2f Gparam), seq %d, batch %d, bf16 parameters, "
             "bf16+ecc8/q8/q8, offload_fraction %g, offload_compute gpu"
             % (result["layers"], result["params"] / 1e9, result["seq"], result["batch"],
                result["fraction"])]
    lines.append("%-10s %10s %10s %10s %14s %10s %10s %10s" % (
        "budget", "iteration", "fwd+bwd", "step", "kept/streamed", "vs plain", "hooks",
        "hand-over"))
    plain = next((r for r in result["results"] if r["budget_gib"] == 0), None)
    for r in result["results"]:
        ratio = (r["iteration_ms"] / plain["iteration_ms"]) if plain else float("nan")
        lines.append("%-10s %7.1f ms %7.1f ms %7.1f ms %8d/%-5d %9.3fx %7.1f ms %7.1f ms" % (
            "plain" if r["budget_gib"] == 0 else "%g GiB" % r["budget_gib"],
            r["iteration_ms"], r["forward_backward_ms"], r["step_ms"],
            r["speculated_stream_chunks"], r["stream_chunks"], ratio,
            r.get("hooks_ms", float("nan")), r.get("handover_ms", float("nan"))))
    lines.append("fwd+bwd: until backward's last kernel on the compute stream (speculative "
                 "copies may still run); step: from there until the parameters are final; "
                 "hooks: host time in tandem.torch's gradient hooks during backward, on the "
                 "thread that launches backward's kernels; hand-over: the engine's part "
                 "(begin_step and GradReady)")
    lines.append("parameters after %d iterations bit-identical across modes: %s"
                 % (result["warmup"] + result["iters"],
                    "yes" if result["bit_identical"] else "NO"))
    return "\n".join(lines)


def main(argv=None):
    import torch
    args = parse_args(argv)
    # The modes must see the same gradients for their parameters to be compared bit for
    # bit: deterministic kernels (cuBLAS workspace, no atomics in attention's backward).
    os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
    torch.use_deterministic_algorithms(True)
    g = torch.Generator().manual_seed(0)
    ids = []
    for _ in range(4):
        t = torch.randint(0, LLAMA3_1B["vocab"], (args.batch, args.seq + 1), generator=g).cuda()
        ids.append((t[:, :-1], t[:, 1:]))
    rows, first = [], None
    same = True
    for b in args.budgets:
        print("stream_early_start: budget %g GiB ..." % b, file=sys.stderr, flush=True)
        row, bits = run_mode(args, b, ids)
        rows.append(row)
        if first is None:
            first = bits
            first_losses = row["losses"]
        else:
            differ = [n for (n, x), (_, y) in zip(first, bits) if not torch.equal(x, y)]
            row["differing_parameters"] = differ
            row["losses_equal"] = row["losses"] == first_losses
            if differ:
                same = False
                print("stream_early_start: budget %g GiB: %d parameters differ from the first mode "
                      "(first: %s); losses equal: %s" % (b, len(differ), differ[0],
                                                         row["losses_equal"]), file=sys.stderr)
    result = dict(command=command_line("stream_early_start.py", sys.argv[1:] if argv is None else argv),
                  commit=git_commit(), date=utc_now(), device=torch.cuda.get_device_name(),
                  layers=args.layers, seq=args.seq, batch=args.batch, iters=args.iters,
                  warmup=args.warmup, fraction=args.fraction, params=rows[0]["params"],
                  results=rows, bit_identical=same)
    text = table(result)
    print(text)
    if args.json:
        result["table"] = text
        with open(args.json, "w") as f:
            json.dump(result, f, indent=1)
        with open(os.path.splitext(args.json)[0] + ".txt", "w") as f:
            f.write(result["command"] + "   (" + result["device"] + ", " + result["date"] +
                    ", " + result["commit"] + ")\n" + text + "\n")
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
