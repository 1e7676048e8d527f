#!/usr/bin/env python3
"""Tandem against a Megatron-style hybrid optimizer, both measured in the same run.

The baseline does what Megatron-Core's HybridDeviceOptimizer does, in PyTorch. The hot
tensors keep fp32 master weights and fp32 moments on the GPU and are stepped by
torch.optim.AdamW(fused=True); the offloaded tensors keep fp32 master weights and moments
on the host and are stepped by torch's fused CPU AdamW, with per-tensor copies: each bf16
gradient goes down into a pinned buffer on a side stream, is widened into the fp32
master's .grad, and after the CPU step each updated master goes back up as bf16 into the
GPU parameter. The GPU step is queued first so that it overlaps the host work, as in
Megatron. Placement matches Tandem's backward_order: the last tensors are offloaded until
the fraction (in elements) is met, the cut tensor split at a 32-element boundary.

Tandem is tandem.torch.AdamW over the same bf16 tensors (Llama-3 shapes, as
tandem-bench-hybrid), at the same fraction, in each --formats, with its host-resident
elements computed where --offload-compute says (passed as offload_compute=). Each side's
step is the median wall time of step() plus a device synchronisation, after 2 warm-up
steps, one optimizer at a time (the other's memory freed).

    PYTHONPATH=build/python python3 bench/megatron_baseline.py --models llama3-1b llama3-8b \
        --json bench/results/megatron_baseline_h200.json

Prints a table ending with the target (issue): at offload fraction 0.5 with q8 state,
Tandem at least 5x faster than the baseline measured in the same run. Writes JSON
(--json) with the command, commit and date; --table FILE prints a written JSON's table;
--dry-run prints what would be measured and touches no GPU.
"""
import argparse
import gc
import json
import os
import statistics
import sys
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_args import (command_line, formats_arg, git_commit,  # noqa: E402
                        offload_compute_arg, utc_now)

TARGET_FRACTION = 0.5
TARGET_FORMATS = "bf16+ecc8/q8/q8"
TARGET_SPEEDUP = 5.0
FORMATS = ("bf16+ecc8/q8/q8", "f32/f32/f32")
MODELS = ("llama3-1b", "llama3-3b", "llama3-8b")


def llama_shapes(name):
    cfg = {
        "llama3-1b": (2048, 8192, 16, 32, 8, True),
        "llama3-3b": (3072, 8192, 28, 24, 8, True),
        "llama3-8b": (4096, 14336, 32, 32, 8, False),
    }[name]
    h, inter, layers, heads, kv, tied = cfg
    vocab, hd = 128256, h // heads
    shapes = [("model.embed_tokens.weight", vocab * h)]
    for i in range(layers):
        p = f"model.layers.{i}."
        shapes += [(p + "self_attn.q_proj.weight", h * h),
                   (p + "self_attn.k_proj.weight", kv * hd * h),
                   (p + "self_attn.v_proj.weight", kv * hd * h),
                   (p + "self_attn.o_proj.weight", h * h),
                   (p + "mlp.gate_proj.weight", inter * h),
                   (p + "mlp.up_proj.weight", inter * h),
                   (p + "mlp.down_proj.weight", inter * h),
                   (p + "input_layernorm.weight", h),
                   (p + "post_attention_layernorm.weight", h)]
    shapes.append(("model.norm.weight", h))
    if not tied:
        shapes.append(("lm_head.weight", vocab * h))
    return shapes


def split(shapes, fraction):
    """Per tensor: number of elements kept on the GPU (prefix), backward order offload."""
    total = sum(n for _, n in shapes)
    need = round(fraction * total) if fraction < 1 else total
    keep = [n for _, n in shapes]
    for i in reversed(range(len(shapes))):
        if need == 0:
            break
        n = shapes[i][1]
        if n <= need:
            keep[i] = 0
            need -= n
        else:
            keep[i] = min(n, (n - need + 16) // 32 * 32)
            need = 0
    return keep


class Baseline:
    def __init__(self, shapes, fraction, threads):
        dev = torch.device("cuda")
        self.params, self.grads = [], []
        gpu_master, cpu_master = [], []
        self.gpu_parts, self.cpu_parts = [], []
        keep = split(shapes, fraction)
        for (name, n), k in zip(shapes, keep):
            p = (torch.randn(n, device=dev) * 0.02).to(torch.bfloat16)
            g = (torch.randn(n, device=dev) * 1e-3).to(torch.bfloat16)
            self.params.append(p)
            self.grads.append(g)
            if k > 0:
                m = p[:k].float().requires_grad_(False)
                m.grad = torch.empty_like(m)
                gpu_master.append(m)
                self.gpu_parts.append((p[:k], g[:k], m))
            if k < n:
                m = p[k:].float().cpu().pin_memory()
                m.grad = torch.empty_like(m)
                down = torch.empty(n - k, dtype=torch.bfloat16).pin_memory()
                up = torch.empty(n - k, dtype=torch.bfloat16).pin_memory()
                cpu_master.append(m)
                self.cpu_parts.append((p[k:], g[k:], m, down, up))
        self.gpu_opt = torch.optim.AdamW(gpu_master, lr=1e-5, weight_decay=0.01, fused=True) \
            if gpu_master else None
        self.cpu_opt = torch.optim.AdamW(cpu_master, lr=1e-5, weight_decay=0.01, fused=True) \
            if cpu_master else None
        self.side = torch.cuda.Stream()
        torch.set_num_threads(threads)

    def step(self):
        # GPU part, queued first so it overlaps the host work.
        for p, g, m in self.gpu_parts:
            m.grad.copy_(g)
        if self.gpu_opt:
            self.gpu_opt.step()
        for p, g, m in self.gpu_parts:
            p.copy_(m)
        # Host part: per-tensor D2H, fused CPU AdamW on fp32 state, per-tensor H2D.
        if self.cpu_opt:
            self.side.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(self.side):
                for p, g, m, down, up in self.cpu_parts:
                    down.copy_(g, non_blocking=True)
            self.side.synchronize()
            for p, g, m, down, up in self.cpu_parts:
                m.grad.copy_(down)
            self.cpu_opt.step()
            with torch.cuda.stream(self.side):
                for p, g, m, down, up in self.cpu_parts:
                    up.copy_(m)
                    p.copy_(up, non_blocking=True)
            torch.cuda.current_stream().wait_stream(self.side)
        torch.cuda.synchronize()






def fraction_arg(text):
    f = float(text)
    if not 0.0 <= f <= 1.0:
        raise argparse.ArgumentTypeError("a fraction must be in [0, 1], got %r" % (text,))
    return f


def parse_args(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--models", nargs="+", choices=MODELS, default=list(MODELS))
    ap.add_argument("--fractions", nargs="+", type=fraction_arg, default=[TARGET_FRACTION])
    ap.add_argument("--formats", nargs="+", type=formats_arg, default=list(FORMATS),
                    help="Tandem's state formats, master/momentum/variance (default: %s)"
                    % " ".join(FORMATS))
    ap.add_argument("--offload-compute", type=offload_compute_arg, default="auto",
                    help='where Tandem computes its host-resident elements: "auto" '
                    '(default), "host", "gpu" or a share in [0, 1] on the GPU')
    ap.add_argument("--steps", type=int, default=5, help="timed steps per point (median)")
    ap.add_argument("--threads", type=int, default=None,
                    help="CPU threads of the baseline's torch and Tandem's host kernels "
                    "(default: torch's default)")
    ap.add_argument("--no-tandem", action="store_true", help="measure the baseline only")
    ap.add_argument("--json", help="write the results here")
    ap.add_argument("--table", metavar="FILE", help="print the table of a JSON this wrote")
    ap.add_argument("--dry-run", action="store_true",
                    help="print what would be measured; no GPU is touched")
    return ap.parse_args(argv)






def machine_kind():
    gpu = torch.cuda.get_device_name(0) if torch.cuda.is_available() else "no GPU"
    return "%s, %d CPU threads" % (gpu, os.cpu_count() or 0)




def timed(step, sync, steps, warmup=2):
    """Median wall time (ms) of step() plus sync() over `steps` after `warmup`."""
    times = []
    for i in range(steps + warmup):
        t0 = time.perf_counter()
        step()
        sync()
        if i >= warmup:
            times.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(times)


def measure_baseline(shapes, fraction, threads, steps):
    b = Baseline(shapes, fraction, threads)
    ms = timed(b.step, torch.cuda.synchronize, steps)
    del b
    release()
    return ms


def measure_tandem(shapes, fraction, formats, offload_compute, threads, steps):
    """Median step of tandem.torch.AdamW over the shapes (bf16 parameters and
    gradients), and the share of its host-resident elements computed on the GPU."""
    import tandem.torch  # here: --dry-run and --table need no built extension
    dev = torch.device("cuda")
    named = []
    for name, n in shapes:
        p = torch.nn.Parameter((torch.randn(n, device=dev) * 0.02).to(torch.bfloat16))
        p.grad = (torch.randn(n, device=dev) * 1e-3).to(torch.bfloat16)
        named.append((name, p))
    master, momentum, variance = formats.split("/")
    opt = tandem.torch.AdamW(named, lr=1e-5, weight_decay=0.01, offload_fraction=fraction,
                             master=master, momentum=momentum, variance=variance,
                             offload_compute=offload_compute,
                             host_threads=0 if threads is None else threads)
    params = [p for _, p in named]

    def step():
        # A new gradient each step (tandem.torch steps what got one: the engine's buffer,
        # installed as p.grad by the first step, written in place), outside the timing.
        with torch.no_grad():
            for p in params:
                p.grad.mul_(1.0)
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        opt.step()
        torch.cuda.synchronize()
        step.ms.append((time.perf_counter() - t0) * 1e3)
    step.ms = []
    for _ in range(steps + 2):
        step()
    ms = statistics.median(step.ms[2:])
    split = opt.compute_split()
    share = split.get("share") if isinstance(split, dict) else None
    del opt, params, named
    release()
    return ms, share


def release():
    """Frees what the last optimizer held: device memory and torch's cached pinned host
    blocks (the baseline's), so that the next one measures on an empty machine."""
    gc.collect()
    torch.cuda.empty_cache()
    host_empty_cache = getattr(torch._C, "_host_emptyCache", None)  # torch >= 2.1
    if host_empty_cache is not None:
        host_empty_cache()


def checks(rows):
    """The issue's target: at TARGET_FRACTION with TARGET_FORMATS, Tandem >= 5x."""
    out = []
    for r in rows:
        if r.get("speedup") is None or r["formats"] != TARGET_FORMATS \
                or abs(r["fraction"] - TARGET_FRACTION) > 1e-9:
            continue
        out.append({"check": "%s f=%g %s: baseline / tandem" % (r["model"], r["fraction"],
                                                                 r["formats"]),
                    "value": r["speedup"], "target": ">= %g" % TARGET_SPEEDUP,
                    "met": r["speedup"] >= TARGET_SPEEDUP})
    return out


def table(result):
    """The printed table of a result (the dict written by --json), as lines."""
    fmt = lambda v, spec: "-" if v is None else format(v, spec)  # noqa: E731
    lines = ["%s   (%s, %s, %s)" % (result["command"], result.get("machine_kind", "?"),
                                     result["date"], result["commit"]),
             "Tandem offload_compute %s; baseline: fp32 master and moments, torch fused AdamW "
             "on GPU and host, per-tensor copies" % result["offload_compute"],
             "%-10s %5s  %-17s %10s %12s %9s %7s" % ("model", "frac", "tandem formats",
                                                    "tandem ms", "baseline ms", "speed-up",
                                                    "share")]
    for r in result["results"]:
        lines.append("%-10s %5.3f  %-17s %10s %12s %9s %7s" % (
            r["model"], r["fraction"], r["formats"], fmt(r["tandem_ms"], ".2f"),
            fmt(r["baseline_ms"], ".2f"),
            "-" if r.get("speedup") is None else "%.2fx" % r["speedup"],
            fmt(r.get("compute_share"), ".3f")))
    lines.append("share: of Tandem's host-resident elements, computed on the GPU; "
                 "speed-up: baseline ms / tandem ms")
    lines.append("target (issue): at offload fraction %g with q8 state (%s), Tandem >= %gx "
                 "faster than the baseline measured in the same run"
                 % (TARGET_FRACTION, TARGET_FORMATS, TARGET_SPEEDUP))
    found = result.get("checks", [])
    for c in found:
        lines.append("  %-40s %6.2fx  (target %s: %s)" % (
            c["check"].split(":")[0], c["value"], c["target"],
            "met" if c["met"] else "missed"))
    if not found:
        lines.append("  (no point at fraction %g with %s in this run)"
                     % (TARGET_FRACTION, TARGET_FORMATS))
    return lines


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    a = parse_args(argv)
    if a.table:
        with open(a.table) as fh:
            print("\n".join(table(json.load(fh))))
        return 0
    if a.dry_run:
        print("would run: %s" % command_line("megatron_baseline.py", [x for x in argv if x != "--dry-run"]))
        print("commit %s; Tandem offload_compute %s" % (git_commit(), a.offload_compute))
        for name in a.models:
            for f in a.fractions:
                print("  %s f=%g: baseline (fp32 state)%s" % (
                    name, f, "" if a.no_tandem else "; tandem " + ", ".join(a.formats)))
        return 0

    if a.threads is not None:
        torch.set_num_threads(a.threads)
    threads = torch.get_num_threads()
    result = {"benchmark": "megatron_baseline", "command": command_line("megatron_baseline.py", argv),
              "commit": git_commit(), "date": utc_now(),
              "machine_kind": machine_kind(),
              "torch": torch.__version__, "threads": threads,
              "offload_compute": a.offload_compute, "steps": a.steps, "results": []}
    for name in a.models:
        shapes = llama_shapes(name)
        for f in a.fractions:
            base = measure_baseline(shapes, f, threads, a.steps)
            print("%s f=%g baseline %.2f ms" % (name, f, base), flush=True)
            for fm in ([] if a.no_tandem else a.formats):
                ms, share = measure_tandem(shapes, f, fm, a.offload_compute, a.threads,
                                           a.steps)
                print("%s f=%g tandem %s %.2f ms (share on the GPU %s)"
                      % (name, f, fm, ms, share), flush=True)
                result["results"].append(dict(model=name, fraction=f, formats=fm,
                                              tandem_ms=ms, baseline_ms=base,
                                              speedup=base / ms, compute_share=share))
            if a.no_tandem:
                result["results"].append(dict(model=name, fraction=f, formats="-",
                                              tandem_ms=None, baseline_ms=base,
                                              speedup=None, compute_share=None))
    result["checks"] = checks(result["results"])
    if a.json:
        with open(a.json, "w") as fh:
            json.dump(result, fh, indent=1)
    print("\n".join(table(result)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
