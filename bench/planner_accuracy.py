#!/usr/bin/env python3
"""Planner accuracy: the planner's predicted step time against the step measured in the
same run, point by point.

At each (model, state formats, offload fraction) the script asks tandem.plan (the code of
tandem-plan) for the predicted step with a calibration profile, then builds
tandem.torch.AdamW over the same Llama-3 tensors (bf16 parameters and gradients, as
tandem-bench-hybrid) on the GPU and times its step: the median wall time of step() plus
a device synchronisation, after 2 warm-up steps. Both get the same --offload-compute
(tandem.plan(offload_compute=...) and the optimizer's offload_compute=), and, unless
--optimizer-rates measured, the optimizer gets the profile's rates (tandem.machine_rates),
so that "auto" picks its split from the same figures as the plan.

Target (issue): within 10% of the measured step at fractions 0.25, 0.5 and 1 on Llama-3
1B and 8B with a calibrated profile: the defaults. On the GPU machine, calibrate first:

    build/tools/bench/tandem-bench calibrate -o profile.json
    PYTHONPATH=build/python python3 bench/planner_accuracy.py --profile profile.json \\
        --json bench/results/planner_accuracy_h200.json

The predicted step includes the fixed per-step cost (Note [Fixed step cost] in
tandem/planner/profile.h): the engine's part comes from tandem-bench calibrate; the binding's
(tandem.torch's step() around the engine) can only be measured from Python, so when the
profile has none, this script measures it first on the GPU (tandem.calibrate_binding)
into a copy of the profile that the plans read, saying so (--save-binding: into the
profile file itself; --no-calibrate-binding, or no GPU: not measured, counted as 0).

Prints a table whose last lines give each point's predicted / measured ratio against the
10% limit, after where each measured step went (medians: step() until it returned, the
engine's Step, the pre-pass and the stream's span from the engine's CUDA events, also in
the JSON as measured_stages); writes JSON (--json) with the command, commit and date. --plan-only prints the
predictions without measuring (no GPU needed; the profile is never written);
--table FILE prints a written JSON's table.
"""
import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from bench_args import (command_line, formats_arg, git_commit,  # noqa: E402
                        offload_compute_arg, utc_now)

LIMIT = 0.10
MODELS = ("llama3-1b", "llama3-3b", "llama3-8b")
PROFILE = os.path.join("bench", "results", "calibrate_h200.json")






def fraction_arg(text):
    """A fraction the planner's sweep holds: a multiple of 1/16 in [0, 1]."""
    f = float(text)
    if not 0.0 <= f <= 1.0 or abs(f * 16 - round(f * 16)) > 1e-9:
        raise argparse.ArgumentTypeError(
            "a fraction must be a multiple of 1/16 in [0, 1] (the planner's sweep), got %r"
            % (text,))
    return f


def parse_args(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--models", nargs="+", choices=MODELS, default=["llama3-1b", "llama3-8b"])
    ap.add_argument("--fractions", nargs="+", type=fraction_arg, default=[0.25, 0.5, 1.0])
    ap.add_argument("--formats", nargs="+", type=formats_arg, default=["bf16+ecc8/q8/q8"],
                    help="state formats, master/momentum/variance (default bf16+ecc8/q8/q8)")
    ap.add_argument("--profile", default=PROFILE,
                    help="calibration profile (tandem-bench calibrate -o FILE; default %s)"
                    % PROFILE)
    ap.add_argument("--offload-compute", type=offload_compute_arg, default="auto",
                    help='passed to the plan and the optimizer: "auto" (default), "host", '
                    '"gpu" or a share in [0, 1] on the GPU')
    ap.add_argument("--optimizer-rates", choices=("profile", "measured"), default="profile",
                    help="the optimizer's machine_rates: the profile's (default) or "
                    "measured at construction")
    ap.add_argument("--gpu-mem", default="141GB", help="the plan's GPU memory (default 141GB)")
    ap.add_argument("--host-mem", default="128GiB",
                    help="the plan's host memory (default 128GiB)")
    ap.add_argument("--steps", type=int, default=5, help="timed steps per point (median)")
    ap.add_argument("--json", help="write the results here")
    ap.add_argument("--plan-only", action="store_true",
                    help="print the predictions only; no GPU is touched")
    ap.add_argument("--table", metavar="FILE", help="print the table of a JSON this wrote")
    ap.add_argument("--no-calibrate-binding", action="store_true",
                    help="do not measure the binding's fixed step cost for a profile that "
                    "lacks it (the plan then counts it as 0)")
    ap.add_argument("--save-binding", action="store_true",
                    help="write the binding's fixed step cost, when measured, into the "
                    "profile file (default: into a copy for this run)")
    return ap.parse_args(argv)


def binding_overhead(a, tmp):
    """The profile's step_overhead.binding and the profile the plans read. A profile
    without it, in a run that measures on a GPU: measured (tandem.calibrate_binding) into
    a copy in `tmp` that the plans read, or into the profile itself with --save-binding.
    (None, a.profile) when it stays without."""
    with open(a.profile) as fh:
        overhead = json.load(fh).get("step_overhead") or {}
    if "binding" in overhead:
        return overhead["binding"], a.profile
    if a.plan_only or a.no_calibrate_binding:
        return None, a.profile
    import torch
    import tandem
    if not torch.cuda.is_available():
        print("%s has no step_overhead.binding and there is no GPU to measure it on: "
              "counted as 0" % a.profile, flush=True)
        return None, a.profile
    path = a.profile
    if not a.save_binding:
        path = os.path.join(tmp, os.path.basename(a.profile))
        shutil.copyfile(a.profile, path)
    figures = tandem.calibrate_binding(path, device="cuda")
    print("%s has no step_overhead.binding: measured %.3f ms + %.2f us x tensors, %s"
          % (a.profile, figures["per_step_ms"], figures["per_tensor_us"],
             "added to it" if a.save_binding else "for this run's plans (--save-binding "
             "adds it to the profile)"), flush=True)
    return figures, path








def predict(model, formats, a, profile=None):
    """fraction -> the plan's sweep point (step_ms, compute_split, bytes), and the plan's
    parameter count; the plan from `profile` (default a.profile)."""
    import tandem
    master, m, v = formats.split("/")
    p = tandem.plan(model, gpu_mem=a.gpu_mem, host_mem=a.host_mem,
                    offload_compute=a.offload_compute, profile=profile or a.profile,
                    master=master, m=m, v=v, grad_release=False)  # measured without
    return {round(pt["fraction"] * 16): pt for pt in p.data["sweep"]}, p.data["model"]["params"]


def measure(shapes, fraction, formats, a):
    """The measured step of tandem.torch.AdamW (ms), its compute share, memory(), and
    the medians of where the step went (stages(): for the residual's make-up)."""
    import torch
    import tandem
    import tandem.torch
    from megatron_baseline import release
    dev = torch.device("cuda")
    named = []
    for name, n in shapes:
        p = torch.nn.Parameter((torch.randn(n, device=dev) * 0.02).to(torch.bfloat16))
        p.grad = (torch.randn(n, device=dev) * 1e-3).to(torch.bfloat16)
        named.append((name, p))
    master, m, v = formats.split("/")
    rates = None
    if a.optimizer_rates == "profile":
        rates = tandem.machine_rates(a.profile, master=master, m=m, v=v)
    opt = tandem.torch.AdamW(named, lr=1e-5, weight_decay=0.01, offload_fraction=fraction,
                             master=master, momentum=m, variance=v,
                             offload_compute=a.offload_compute, machine_rates=rates)
    params = [p for _, p in named]

    def new_grads():
        # tandem.torch steps what got a new gradient: the engine's buffer (p.grad after
        # the first step) written in place, outside the timing.
        with torch.no_grad():
            for p in params:
                p.grad.mul_(1.0)
        torch.cuda.synchronize()

    times, parts = [], []
    for i in range(a.steps + 2):
        new_grads()
        t0 = time.perf_counter()
        opt.step()
        t1 = time.perf_counter()
        torch.cuda.synchronize()
        t2 = time.perf_counter()
        if i >= 2:
            times.append((t2 - t0) * 1e3)
            st = opt.last_step_times()  # after the timing: it waits for the step's events
            parts.append({"step_returns_ms": (t1 - t0) * 1e3, "engine_step_ms": st["step_ms"],
                          "prepass_ms": st["prepass_ms"], "stream_ms": st["stream_ms"],
                          "gpu_update_ms": st["gpu_update_ms"]})
    split, mem = opt.compute_split(), opt.memory()
    del opt, params, named
    release()
    return statistics.median(times), split.get("share"), mem, stages(parts)


def stages(parts):
    """Per field, the median over the timed steps (step_returns_ms: step() until it
    returned; engine_step_ms: the engine's Step call, StageTimes::step_ms; prepass_ms,
    stream_ms (first state upload to last download), gpu_update_ms: its CUDA events)."""
    return {k: statistics.median(p[k] for p in parts) for k in parts[0]} if parts else {}


def row(model, formats, pt, measured=None):
    """One point: the prediction, and the measurement when there is one."""
    g, h = pt["gpu_bytes"], pt["host_bytes_per_rank"]
    r = dict(model=model, formats=formats, fraction=pt["fraction"],
             predicted_ms=pt["step_ms"]["step"], bottleneck=pt["bottleneck"],
             # Note [Fixed step cost]: the engine's and the binding's parts of predicted_ms.
             predicted_fixed_ms=pt["step_ms"].get("engine_overhead", 0.0)
             + pt["step_ms"].get("binding_overhead", 0.0),
             predicted_prepass_ms=pt["step_ms"].get("prepass"),
             predicted_fill_ms=pt["step_ms"].get("fill"),
             plan_share=pt["compute_split"]["share"],
             # The engine's own memory: everything but the caller's weights, gradients
             # and activations.
             predicted_device_bytes=g["total"] - g["weights"] - g["gradients"]
             - g["activations"],
             predicted_host_bytes=h["total"] - h["weights"] - h["gradients"]
             - h["activations"],
             measured_ms=None, measured_share=None, ratio=None, error=None, met=None,
             engine_device_bytes=None, engine_host_bytes=None)
    if measured is not None:
        ms, share, mem = measured[:3]
        ratio = r["predicted_ms"] / ms
        r.update(measured_ms=ms, measured_share=share, ratio=ratio, error=ratio - 1,
                 met=abs(ratio - 1) <= LIMIT,
                 engine_device_bytes=mem["device"]["total"],
                 engine_host_bytes=mem["host"]["total"])
        if len(measured) > 3 and measured[3]:
            # Where the measured step went (medians), beside the prediction's terms.
            r["measured_stages"] = measured[3]
    return r


def table(result):
    """The printed table of a result (the dict written by --json), as lines."""
    fmt = lambda v, spec: "-" if v is None else format(v, spec)  # noqa: E731
    rows = [dict(r) for r in result["results"]]
    for r in rows:  # files of the script's earlier form have no ratio
        if r.get("ratio") is None and r.get("measured_ms"):
            r["ratio"] = r["predicted_ms"] / r["measured_ms"]
            r["error"] = r["ratio"] - 1
            r["met"] = abs(r["error"]) <= LIMIT
    lines = ["%s   (%s, %s, %s)" % (result["command"], result.get("machine_kind", "?"),
                                     result["date"], result["commit"]),
             "profile %s; offload_compute %s (plan and optimizer); optimizer rates: %s"
             % (result.get("profile", "?"), result.get("offload_compute", "?"),
                result.get("optimizer_rates", "?")),
             "%-10s %-16s %5s %7s %7s %10s %7s %10s %7s  %s" % (
                 "model", "formats", "frac", "share P", "share M", "predicted", "fixed",
                 "measured", "ratio", "bottleneck")]
    for r in rows:
        lines.append("%-10s %-16s %5.3f %7s %7s %10s %7s %10s %7s  %s" % (
            r["model"], r["formats"], r["fraction"], fmt(r.get("plan_share"), ".3f"),
            fmt(r.get("measured_share"), ".3f"), fmt(r["predicted_ms"], ".2f"),
            fmt(r.get("predicted_fixed_ms"), ".2f"), fmt(r.get("measured_ms"), ".2f"),
            fmt(r.get("ratio"), ".3f"), r.get("bottleneck", "-")))
    lines.append("share P / M: of the host-resident elements, computed on the GPU, in the "
                 "plan / the optimizer; fixed: the predicted step's fixed per-step cost "
                 "(engine + binding); ratio: predicted / measured step")
    b = result.get("binding_overhead", "?")
    lines.append("fixed step cost (binding part): %s" % (
        "not in the profile: counted as 0" if b is None else b if isinstance(b, str) else
        "%.3f ms + %.2f us x tensors" % (b["per_step_ms"], b["per_tensor_us"])))
    staged = [r for r in rows if r.get("measured_stages")]
    if staged:
        lines.append("where the measured step went (medians, ms): step() returned / engine "
                     "Step / pre-pass (predicted) / stream, first upload to last download")
    for r in staged:
        st = r["measured_stages"]
        lines.append("  %-10s f=%-5g %7.2f / %7.2f / %6.2f (%6s) / %7.2f" % (
            r["model"], r["fraction"], st["step_returns_ms"], st["engine_step_ms"],
            st["prepass_ms"], fmt(r.get("predicted_prepass_ms"), ".2f"), st["stream_ms"]))
    lines.append("target (issue): predicted step within %d%% of the measured step "
                 "(ratio in [%.2f, %.2f]) at fractions 0.25, 0.5, 1 on 1B and 8B, "
                 "calibrated profile" % (100 * LIMIT, 1 - LIMIT, 1 + LIMIT))
    measured = [r for r in rows if r.get("measured_ms") is not None]
    for r in measured:
        lines.append("  %-10s %-16s f=%-5g ratio %.3f  error %+6.1f%%  (limit %d%%: %s)" % (
            r["model"], r["formats"], r["fraction"], r["ratio"], 100 * r["error"],
            100 * LIMIT, "met" if r["met"] else "missed"))
    if measured:
        n = sum(1 for r in measured if r["met"])
        lines.append("  %d of %d points within %d%%" % (n, len(measured), 100 * LIMIT))
    else:
        lines.append("  (predictions only: nothing measured)")
    return lines


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    a = parse_args(argv)
    if a.table:
        with open(a.table) as fh:
            print("\n".join(table(json.load(fh))))
        return 0
    result = {"benchmark": "planner_accuracy", "command": command_line("planner_accuracy.py", argv),
              "commit": git_commit(), "date": utc_now(), "profile": a.profile,
              "offload_compute": a.offload_compute,
              "optimizer_rates": None if a.plan_only else a.optimizer_rates,
              "steps": a.steps, "results": []}
    tmp = tempfile.mkdtemp(prefix="planner-accuracy-")
    try:
        return run(a, argv, result, tmp)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def run(a, argv, result, tmp):
    """main's measurements and table, with `tmp` for a profile copy."""
    result["binding_overhead"], profile = binding_overhead(a, tmp)
    if a.plan_only:
        result["machine_kind"] = "plan only (nothing measured)"
    else:
        import torch
        from megatron_baseline import machine_kind
        result["machine_kind"] = machine_kind()
        result["torch"] = torch.__version__
    for model in a.models:
        for formats in a.formats:
            points, plan_params = predict(model, formats, a, profile)
            shapes = None
            if not a.plan_only:
                from megatron_baseline import llama_shapes
                shapes = llama_shapes(model)
                if sum(n for _, n in shapes) != plan_params:
                    raise SystemExit("%s: the plan counts %d parameters, the measured "
                                     "shapes %d" % (model, plan_params,
                                                    sum(n for _, n in shapes)))
            for f in a.fractions:
                pt = points[round(f * 16)]
                measured = None if a.plan_only else measure(shapes, f, formats, a)
                r = row(model, formats, pt, measured)
                result["results"].append(r)
                print("%s %s f=%g predicted %.2f ms%s" % (
                    model, formats, f, r["predicted_ms"],
                    "" if measured is None else ", measured %.2f ms" % r["measured_ms"]),
                    flush=True)
    if a.json:
        with open(a.json, "w") as fh:
            json.dump(result, fh, indent=1)
    print("\n".join(table(result)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
