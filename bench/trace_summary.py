#!/usr/bin/env python3
"""What a torch.profiler trace of one training iteration says about backward beside the
optimizer's work (docs/benchmarks.md, "Speculating streamed chunks with spares"): reads
the Chrome traces `bench/stream_early_start.py --trace DIR` writes and prints, per trace,

  * backward on the compute stream: its span, the time its kernels run and the time the
    stream idles between them, with what the thread that launches them was doing in the
    longest gaps;
  * the other streams' kernels (the engine's) and copies, inside backward's span;
  * the CUDA calls and tandem/benchmark Python functions on that thread;

and, for the first trace against the last, backward's kernels by name: whether they got
slower with the optimizer's copies and kernels beside them.

    python3 bench/trace_summary.py DIR/stream_es_0.json.gz DIR/stream_es_8.json.gz

The compute stream is the stream whose kernels (the engine's FusedStep kernels and
NCCL's collectives left out) take the longest; backward's kernels are those launched
from another thread than the first kernel (forward runs on the Python thread, backward
on autograd's). `bench/fsdp_step.py --trace DIR` writes traces it reads as well.
"""
import argparse
import collections
import gzip
import json

ENGINE_KERNELS = ("FusedStep",)
# Collective kernels last as long as they wait for the other ranks: not compute.
NOT_COMPUTE = ENGINE_KERNELS + ("ncclDevKernel", "ncclKernel")
RUNTIME = ("cuda_runtime", "cuda_driver")


def load(path):
    """The complete ("X") events of a Chrome trace, gzipped or not."""
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rt") as f:
        return [e for e in json.load(f)["traceEvents"] if e.get("ph") == "X"]


def union(intervals):
    """Sorted, merged [start, end] intervals."""
    out = []
    for a, b in sorted(intervals):
        if out and a <= out[-1][1]:
            out[-1][1] = max(out[-1][1], b)
        else:
            out.append([a, b])
    return out


def overlap(a, b):
    """Total length of the intersection of two merged interval lists."""
    i = j = 0
    total = 0.0
    while i < len(a) and j < len(b):
        lo, hi = max(a[i][0], b[j][0]), min(a[i][1], b[j][1])
        total += max(0.0, hi - lo)
        if a[i][1] < b[j][1]:
            i += 1
        else:
            j += 1
    return total


def summarise(events):
    """(lines, backward kernels by name: {name: [us, count]}) of one trace."""
    runtime = {e["args"]["correlation"]: e for e in events
               if e.get("cat") in RUNTIME and "correlation" in e.get("args", {})}
    kernels = [e for e in events if e.get("cat") == "kernel"]
    copies = [e for e in events if e.get("cat") in ("gpu_memcpy", "gpu_memset")]
    per_stream = collections.defaultdict(float)
    for k in kernels:
        if not any(n in k["name"] for n in NOT_COMPUTE):
            per_stream[k["args"]["stream"]] += k["dur"]
    if not per_stream:
        return ["no kernels in this trace"], {}
    compute = max(per_stream, key=per_stream.get)

    def launcher(k):
        return runtime.get(k["args"].get("correlation"), {}).get("tid")

    ck = sorted((k for k in kernels if k["args"]["stream"] == compute), key=lambda k: k["ts"])
    forward_tid = next((launcher(k) for k in ck if launcher(k) is not None), None)
    backward = [k for k in ck if launcher(k) not in (forward_tid, None)] or ck
    backward_tid = next((launcher(k) for k in backward if launcher(k) is not None), None)
    t0, t1 = backward[0]["ts"], max(k["ts"] + k["dur"] for k in backward)
    busy = union([(k["ts"], k["ts"] + k["dur"]) for k in backward])
    busy_us = sum(b - a for a, b in busy)
    gaps = sorted(((busy[i + 1][0] - busy[i][1], busy[i][1]) for i in range(len(busy) - 1)),
                  reverse=True)
    lines = ["compute stream %s, backward launched by thread %s" % (compute, backward_tid),
             "backward: span %.2f ms, kernels %.2f ms, idle %.2f ms (%d gaps over 20 us: "
             "%.2f ms)" % ((t1 - t0) / 1e3, busy_us / 1e3, (t1 - t0 - busy_us) / 1e3,
                          sum(1 for g, _ in gaps if g > 20),
                          sum(g for g, _ in gaps if g > 20) / 1e3)]
    on_thread = [e for e in events if e.get("tid") == backward_tid
                 and e.get("cat") in ("cpu_op", "user_annotation") + RUNTIME]
    for g, at in gaps[:4]:
        doing = [e["name"] for e in on_thread if e["ts"] <= at <= e["ts"] + e["dur"]][:3]
        lines.append("  gap %.3f ms at +%.2f ms, the thread in %s" % (g / 1e3, (at - t0) / 1e3,
                                                                    doing or "(Python)"))
    others = union([(k["ts"], k["ts"] + k["dur"]) for k in kernels
                    if k["args"]["stream"] != compute and k["ts"] < t1
                    and k["ts"] + k["dur"] > t0])
    lines.append("other streams' kernels: %.2f ms inside backward's span, %.2f ms of it "
                 "beside backward's kernels"
                 % (sum(min(b, t1) - max(a, t0) for a, b in others) / 1e3,
                    overlap(busy, others) / 1e3))
    for kind in ("HtoD", "DtoH", "DtoD"):
        cs = [c for c in copies if kind in c["name"]]
        lines.append("copies %s: %d, %.2f GB, %d of them inside backward's span"
                     % (kind, len(cs), sum(c["args"].get("bytes", 0) for c in cs) / 1e9,
                        sum(1 for c in cs if c["ts"] < t1 and c["ts"] + c["dur"] > t0)))
    calls = collections.defaultdict(lambda: [0.0, 0])
    python = collections.defaultdict(lambda: [0.0, 0])
    for e in events:
        if e.get("tid") != backward_tid or not t0 - 5e5 < e["ts"] < t1:
            continue
        if e.get("cat") in RUNTIME:
            calls[e["name"]][0] += e["dur"]
            calls[e["name"]][1] += 1
        elif e.get("cat") == "python_function" and any(
                s in e["name"] for s in ("tandem", "bench_args", "_hooks")):
            python[e["name"]][0] += e["dur"]
            python[e["name"]][1] += 1
    lines.append("CUDA calls on that thread (ms, calls):")
    for n, (d, c) in sorted(calls.items(), key=lambda x: -x[1][0])[:6]:
        lines.append("  %-40s %8.2f %6d" % (n[:40], d / 1e3, c))
    if python:
        lines.append("tandem's Python on that thread (ms with what it calls, calls):")
        for n, (d, c) in sorted(python.items(), key=lambda x: -x[1][0])[:6]:
            lines.append("  %-56s %8.2f %6d" % (n[-56:], d / 1e3, c))
    names = collections.defaultdict(lambda: [0.0, 0])
    for k in backward:
        names[k["name"][:70]][0] += k["dur"]
        names[k["name"][:70]][1] += 1
    return lines, dict(names)


def compare(first, last, top=12):
    """Backward's kernels by name, first trace against last."""
    lines = ["backward's kernels by name (ms, count): first trace, last trace, ratio"]
    keys = sorted(set(first) | set(last),
                  key=lambda n: -max(first.get(n, [0])[0], last.get(n, [0])[0]))
    for n in keys[:top]:
        a, b = first.get(n, [0.0, 0]), last.get(n, [0.0, 0])
        lines.append("  %-70s %8.2f %5d %8.2f %5d %6.2fx"
                     % (n, a[0] / 1e3, a[1], b[0] / 1e3, b[1],
                        b[0] / a[0] if a[0] else float("nan")))
    ta, tb = sum(v[0] for v in first.values()), sum(v[0] for v in last.values())
    lines.append("all of backward's kernels: %.2f ms against %.2f ms (%.2fx)"
                 % (ta / 1e3, tb / 1e3, tb / ta if ta else float("nan")))
    return lines


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("traces", nargs="+", help="Chrome traces (.json or .json.gz)")
    args = ap.parse_args(argv)
    names = []
    for path in args.traces:
        lines, by_name = summarise(load(path))
        print("== %s\n%s" % (path, "\n".join(lines)))
        names.append(by_name)
    if len(names) > 1:
        print("\n".join(compare(names[0], names[-1])))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
