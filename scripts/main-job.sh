#!/usr/bin/env bash
# The main job: what Tandem does on this machine, from an existing build/.
#  1. the numerics demo (every format on two toy problems, CPU reference);
#  2. the planner: will Llama-3-8B's optimizer fit a 40 GiB GPU, at which fraction;
#  3. tandem-bench calibrate on this machine's host (and GPU, if any), each figure repeated
#     3 times, then the planner again with the measured profile;
#  4. with a GPU: the hybrid step on Llama-3-1B at fractions 0, 0.5 and 1;
#  5. a summary: the machine, what was measured, and each figure as a ratio to the limit
#     measured in the same run.
# Raw outputs stay in $OUTDIR (default build/main-job).
set -euo pipefail
source "$(dirname "$0")/env.sh"
B="$TANDEM_ROOT/build"
OUTDIR=${OUTDIR:-$B/main-job}
mkdir -p "$OUTDIR"
echo "== 1. numerics demo"
"$B/tools/tandem-demo"
echo
echo "== 2. plan: Llama-3-8B on a 40 GiB GPU with 512 GiB of host memory (built-in H200 reference profile)"
"$B/tools/plan/tandem-plan" --model llama3-8b --gpu-mem 40GiB --host-mem 512GiB \
  --svg "$OUTDIR/plan-llama3-8b.svg" | tee "$OUTDIR/plan-reference.txt" || true
echo
echo "== 3. calibrate this machine (quick, 3 repeats per figure), then plan with the measured profile"
"$B/tools/bench/tandem-bench" calibrate --host-elements $((16 << 20)) --gpu-elements $((256 << 20)) \
  --reps 3 --repeats 3 -o "$OUTDIR/profile.json" --json "$OUTDIR/calibrate.json"
"$B/tools/plan/tandem-plan" --model llama3-8b --gpu-mem 40GiB --host-mem 512GiB \
  --profile "$OUTDIR/profile.json" > "$OUTDIR/plan-measured.txt" || true
tail -4 "$OUTDIR/plan-measured.txt"
echo
echo "== 4. the hybrid step"
rm -f "$OUTDIR/hybrid.json"
"$B/tools/bench/tandem-bench" hybrid --models llama3-1b --fractions 0 0.5 1 --steps 3 \
  --json "$OUTDIR/hybrid.json" || echo "(hybrid step not run: tandem-bench exit status $?)"
echo
echo "== Summary"
OUTDIR="$OUTDIR" python3 - <<'EOF' || echo "(no summary: python3 missing or a result unreadable; raw outputs in $OUTDIR)"
# The figures of this run, each as a ratio to the limit measured beside it.
import json, os, re
out = os.environ["OUTDIR"]
cal = json.load(open(os.path.join(out, "calibrate.json")))
m = cal["machine"]
mem_gib = 0
for line in open("/proc/meminfo"):
    if line.startswith("MemTotal:"):
        mem_gib = int(line.split()[1]) / 2**20
cores = len(os.sched_getaffinity(0))
print(f"Machine: {m['cpu']}, {cores} cores available ({m['host_threads']} threads used, "
      f"{m['isa']} kernels), {mem_gib:.0f} GiB memory; GPU: {m['gpu'] or 'none'}")
print(f"Measured {cal['date']}, Tandem {cal['version']}; each figure the median of "
      f"{cal['repeats']} repeats, spread = (max - min) / median.")
print("This job: (1) ran every state format against the fp32 reference step on two toy "
      "problems (the demo above);\n(2) asked the planner whether Llama-3-8B's optimizer fits "
      "a 40 GiB GPU; (3) measured this machine's memory\nbandwidth and optimizer step rates "
      "(tandem-bench calibrate); (4) with a GPU, timed the whole hybrid step on Llama-3-1B.")
print()
def kernel_name(key):
    algo, master, m1, m2, grad = key.split("/")
    return (f"{ {'adamw': 'AdamW', 'lion': 'Lion', 'sgd': 'SGD'}.get(algo, algo)} step, "
            f"{master} master, {m1}/{m2} moments")
figs = {f["name"]: f for f in cal["figures"]}
print("What the figures mean:")
for side, limit in (("host", "host copy"), ("GPU", "GPU HBM copy")):
    lim = figs.get(limit)
    if not lim:
        continue
    what = "this host's DRAM" if side == "host" else "the GPU's HBM"
    print(f"  {limit} bandwidth: {lim['median']:.1f} GB/s (spread {100 * lim['spread']:.0f}%): "
          f"the most {what} can move; the {side} kernels below are measured against it.")
    for f in cal["figures"]:
        if f.get("limit") != limit.replace("GPU ", ""):
            continue
        key = f["name"].split(None, 1)[1]
        print(f"  {side} {kernel_name(key)}: {f['median']:.2f} Gparam/s = "
              f"{100 * f['fraction_of_limit']:.0f}% of {what} bandwidth measured in the same "
              f"run ({f['bytes_per_param']:g} bytes moved per parameter; spread "
              f"{100 * f['spread']:.0f}%)")
if "PCIe pinned H2D" in figs:
    print(f"  PCIe host-to-device (pinned): {figs['PCIe pinned H2D']['median']:.1f} GB/s: what "
          "offloaded state and gradients cross per step.")
if cal["too_wide"]:
    print(f"  warning: {len(cal['too_wide'])} figure(s) varied by more than "
          f"{100 * cal['max_spread']:.0f}% between repeats (machine busy?): "
          + ", ".join(cal["too_wide"]))
print()
def verdict(path):
    try:
        for line in open(path):
            if line.startswith(("FITS", "DOES NOT FIT")):
                return line.strip()
    except OSError:
        pass
    return "no verdict (see above)"
print("Planner, Llama-3-8B on a 40 GiB GPU with 512 GiB of host memory:")
print("  with the built-in H200 reference figures: " + verdict(os.path.join(out, "plan-reference.txt")))
print("  with this machine's measured figures:     " + verdict(os.path.join(out, "plan-measured.txt")))
print()
hyb = os.path.join(out, "hybrid.json")
if os.path.exists(hyb):
    data = json.load(open(hyb))
    rows = [r for r in (data if isinstance(data, list) else data.get("results", []))
            if "step_ms" in r]
    base = {(r["model"], r["formats"]): r["step_ms"] for r in rows if r["fraction"] == 0}
    print("Hybrid step (the whole optimizer step; fraction = share of the optimizer state kept "
          "and updated on the host, 0 = all on the GPU):")
    for r in rows:
        b = base.get((r["model"], r["formats"]))
        ratio = f" = {r['step_ms'] / b:.2f}x the all-GPU step of this run" if b else ""
        print(f"  {r['model']} {r['formats']}, fraction {r['fraction']:g}: {r['step_ms']:.1f} ms"
              f"{ratio}; host-GPU overlap {r['overlap_efficiency']:.2f}")
else:
    print("Hybrid step: not measured (it needs a CUDA build and a GPU).")
EOF
echo
echo "main job done: outputs in $OUTDIR"
