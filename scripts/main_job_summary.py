#!/usr/bin/env python3
"""The main job's summary (scripts/main-job.sh): what this machine measured and what it
means for a user, from the raw outputs in OUTDIR (calibrate.json, plan-reference.txt,
plan-measured.txt, hybrid.json if any).

Every number says what it is and what it is compared with. The copy bandwidths are
yardsticks measured in the same run, not ceilings: a kernel can beat a plain copy (its
arrays may sit partly in the caches, and it streams with wider loads than the copy loop),
so each kernel is given as a multiple of the copy ("1.38x the copy"), never as a
percentage of it. Percentages appear only for a spread, (max - min) / median over the
repeats.

    python3 scripts/main_job_summary.py OUTDIR
"""

import json
import os
import re
import sys

ALGORITHMS = {"adamw": "AdamW", "adam": "Adam", "lion": "Lion", "sgd": "SGD"}


def kernel_name(key):
    """'adamw/bf16+ecc8/q8/q8/bf16' -> 'AdamW step, bf16+ecc8 master, q8/q8 moments'."""
    algo, master, m1, m2 = key.split("/")[:4]
    moments = m1 if algo in ("lion", "sgd") else "%s/%s" % (m1, m2)
    return "%s step, %s master, %s moment%s" % (ALGORITHMS.get(algo, algo), master, moments,
                                               "" if "/" not in moments else "s")


def machine_lines(cal):
    m = cal["machine"]
    mem_gib = 0.0
    try:
        for line in open("/proc/meminfo"):
            if line.startswith("MemTotal:"):
                mem_gib = int(line.split()[1]) / 2**20
    except OSError:
        pass
    cores = len(os.sched_getaffinity(0))
    return [
        "Machine: %s, %d cores available (%d threads used, %s kernels), %.0f GiB memory; "
        "GPU: %s" % (m["cpu"], cores, m["host_threads"], m["isa"], mem_gib,
                     m["gpu"] or "none"),
        "Measured %s, Tandem %s; each figure is the median of %d repeats, and its spread is "
        "(max - min) / median over them." % (cal["date"], cal["version"], cal["repeats"]),
    ]


def yardstick_lines(cal):
    """Each copy bandwidth, then the kernels measured against it as multiples of it."""
    figures = {f["name"]: f for f in cal["figures"]}
    out = []
    for copy_name, limit, side, what in (
            ("host copy", "host copy", "Host", "host memory (all threads)"),
            ("GPU HBM copy", "HBM copy", "GPU", "GPU memory (HBM)")):
        copy = figures.get(copy_name)
        if not copy:
            continue
        out.append("%s kernels, measured against a plain copy of %s in the same run:"
                   % (side, what))
        out.append("  %s: %.1f GB/s (bytes read + written; spread %.0f%%): the yardstick, "
                   "not a ceiling" % (copy_name, copy["median"], 100 * copy["spread"]))
        beaten = False
        for f in cal["figures"]:
            if f.get("limit") != limit or "bytes_per_param" not in f:
                continue
            if f["name"].startswith("host under DMA load"):
                continue
            key = f["name"].split(None, 1)[1]
            moved = f["median"] * f["bytes_per_param"]  # GB/s the update moves at least
            ratio = moved / f["limit_gbps"] if f["limit_gbps"] > 0 else float("nan")
            beaten = beaten or ratio > 1
            out.append("  %s: %.2f Gparam/s; at the %g bytes it must move per parameter that "
                       "is %.1f GB/s = %.2fx the copy (spread %.0f%%)"
                       % (kernel_name(key), f["median"], f["bytes_per_param"], moved, ratio,
                          100 * f["spread"]))
        if beaten:
            out.append("  (above 1.00x a kernel moved its bytes faster than the plain copy "
                       "did: the copy is a yardstick of this run, not the most the memory "
                       "can move)")
    if "PCIe pinned H2D" in figures:
        out.append("  PCIe host-to-device, pinned: %.1f GB/s: the link offloaded state and "
                   "gradients cross each step" % figures["PCIe pinned H2D"]["median"])
    if cal.get("too_wide"):
        out.append("  warning: %d figure(s) varied by more than %.0f%% between repeats "
                   "(machine busy?): %s" % (len(cal["too_wide"]), 100 * cal["max_spread"],
                                            ", ".join(cal["too_wide"])))
    return out


PLAN = re.compile(r"^(FITS|DOES NOT FIT)")
STEP = re.compile(r"step ([0-9.]+) ms \(bottleneck: ([a-z0-9]+)\)")
FRACTION = re.compile(r"recommended offload fraction ([0-9.]+)")


def read_verdict(path):
    """(verdict line, fraction or None, step ms or None, bottleneck or None)."""
    try:
        for line in open(path):
            if PLAN.match(line):
                f, s = FRACTION.search(line), STEP.search(line)
                return (line.strip(), f and float(f.group(1)), s and float(s.group(1)),
                        s and s.group(2))
    except OSError:
        pass
    return ("no verdict (see above)", None, None, None)


def plan_lines(out, gpu_measured):
    ref = read_verdict(os.path.join(out, "plan-reference.txt"))
    mine = read_verdict(os.path.join(out, "plan-measured.txt"))
    lines = ["Planner, Llama-3-8B's optimizer on a 40 GiB GPU with 512 GiB of host memory:"]
    for label, (verdict, fraction, step, neck) in (
            ("with the built-in H200 reference figures:", ref),
            ("with this machine's measured figures:", mine)):
        if fraction is None or step is None:
            lines.append("  %-42s %s" % (label, verdict))
        else:
            lines.append("  %-42s fits at offload fraction %g; predicted optimizer step "
                         "%.2f ms (bottleneck: %s)" % (label, fraction, step, neck))
    lines.append("  Memory alone sets the smallest fraction that fits; the figures pick the "
                 "fastest fraction that fits")
    lines.append("  and predict its step time.")
    if not gpu_measured:
        lines.append("  This machine's profile has its own host figures only: without a GPU "
                     "measurement it keeps the")
        lines.append("  H200 reference figures for the GPU and PCIe, and with offload_compute "
                     "auto the planner streams")
        lines.append("  offloaded state through that GPU wherever this host is slower.")
    if ref[1] is not None and ref[1:] == mine[1:]:
        lines.append("  Here both plans agree: this machine's figures do not limit this plan.")
    elif ref[2] is not None and mine[2] is not None:
        lines.append("  Here this machine's figures change the predicted step from %.2f to "
                     "%.2f ms." % (ref[2], mine[2]))
    return lines


def hybrid_lines(out):
    hyb = os.path.join(out, "hybrid.json")
    if not os.path.exists(hyb):
        return ["Hybrid step: not measured (it needs a CUDA build and a GPU)."]
    data = json.load(open(hyb))
    rows = [r for r in (data if isinstance(data, list) else data.get("results", []))
            if "step_ms" in r]
    base = {(r["model"], r["formats"]): r["step_ms"] for r in rows if r["fraction"] == 0}
    lines = ["Hybrid step, the whole optimizer step (fraction = share of the optimizer state "
             "kept and updated",
             "on the host, 0 = all on the GPU; overlap = the slowest stage's busy time / the "
             "step, 1.00 when",
             "every other stage hides behind it):"]
    for r in rows:
        b = base.get((r["model"], r["formats"]))
        ratio = " = %.2fx the all-GPU step of this run" % (r["step_ms"] / b) if b else ""
        lines.append("  %s %s, fraction %g: %.1f ms%s; overlap %.2f"
                     % (r["model"], r["formats"], r["fraction"], r["step_ms"], ratio,
                        r["overlap_efficiency"]))
    return lines


def summary(out):
    """The summary's lines for the outputs in directory `out`."""
    cal = json.load(open(os.path.join(out, "calibrate.json")))
    lines = machine_lines(cal)
    lines.append("This job: (1) ran every state format against the fp32 reference step on two "
                 "toy problems (the demo above);")
    lines.append("(2) asked the planner whether Llama-3-8B's optimizer fits a 40 GiB GPU; (3) "
                 "measured this machine's memory")
    lines.append("bandwidth and optimizer step rates (tandem-bench calibrate); (4) with a GPU, "
                 "timed the whole hybrid step on Llama-3-1B.")
    lines.append("")
    lines += yardstick_lines(cal)
    lines.append("")
    lines += plan_lines(out, bool(cal["machine"]["gpu"]))
    lines.append("")
    lines += hybrid_lines(out)
    return lines


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: main_job_summary.py OUTDIR")
    print("\n".join(summary(sys.argv[1])))
