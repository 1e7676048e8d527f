#!/usr/bin/env bash
# Same-run A/B of the whole optimizer between two source trees on one GPU host, for a
# change that should move no figure (a restructuring). Builds both trees against the
# offline bundle (in parallel), then runs ROUNDS interleaved rounds (base new base new ...)
# on GPU 0 of:
#   kernels    tandem-bench-gpu (every kernel on the flat, llama3-8b and same-count lists)
#   compute    tandem-bench-compute --model llama3-8b --fractions 0.5 (host, gpu and auto)
#   construct  tandem-bench-construct --models llama3-8b --fractions 0.5 --compute auto
#   fsdp       bench/fsdp_step.py --layers 16 --modes tandem (FSDP2, world size 1)
# and prints, per figure, the median over rounds of each tree and new / base (lower is
# better for times). JSON of every run and the table go to OUT_DIR.
#   SRC_base=DIR [SRC_new=DIR] [ROUNDS=2] [DEADLINE_S=N] [PARTS="kernels compute construct fsdp"] \
#     scripts/gpu-ab-step.sh BUNDLE_DIR OUT_DIR
# SRC_new defaults to this checkout; SRC_base is typically `git archive <commit>` unpacked.
# DEADLINE_S: start no new round once this many seconds have passed since the start.
# Build trees: /tmp/ab-base and /tmp/ab-new (kept: a second call on a warm machine reuses them).
set -uo pipefail
bundle=$(cd "$1" && pwd); out=$2
mkdir -p "$out"; out=$(cd "$out" && pwd)
root=$(cd "$(dirname "$0")/.." && pwd)
src_base=${SRC_base:?SRC_base=DIR names the base source tree}
src_new=${SRC_new:-$root}
rounds=${ROUNDS:-2}
parts=${PARTS:-kernels compute construct fsdp}
has() { [[ " $parts " == *" $1 "* ]]; }
command -v nvcc >/dev/null 2>&1 || export PATH=/usr/local/cuda/bin:$PATH
t0=$(date +%s)
phase() { echo "== $1 ($(( $(date +%s) - t0 )) s)"; }

phase "build"
for v in base new; do
  src_var="src_$v"
  # Each tree's own offline-build.sh: it builds the tree it lives in.
  ( TANDEM_DEPS_PREFIX=/tmp/tandem-deps-$v bash "${!src_var}/scripts/offline-build.sh" \
      "$bundle" /tmp/ab-$v -DCMAKE_CUDA_ARCHITECTURES=90 -DTANDEM_BUILD_PYTHON=ON \
      -DTANDEM_BUILD_TESTS=OFF -DPython_EXECUTABLE="$(command -v python3)" \
      > "$out/build-$v.log" 2>&1 || echo "ab: build of $v failed (build-$v.log)" ) &
done
wait
for v in base new; do
  [ -x /tmp/ab-$v/bench/gpu/tandem-bench-gpu ] || { tail -20 "$out/build-$v.log"; exit 1; }
done

run_one() {  # run_one VARIANT ROUND
  local v=$1 r=$2 b=/tmp/ab-$v src
  src_var="src_$v"; src=${!src_var}
  if has kernels; then
    "$b/bench/gpu/tandem-bench-gpu" --json "$out/kernels-$v-$r.json" > "$out/kernels-$v-$r.log" 2>&1
  fi
  if has compute; then
    "$b/bench/hybrid/tandem-bench-compute" --model llama3-8b --fractions 0.5 --steps 3 \
      --json "$out/compute-$v-$r.json" > "$out/compute-$v-$r.log" 2>&1
  fi
  if has construct; then
    "$b/bench/hybrid/tandem-bench-construct" --models llama3-8b --fractions 0.5 \
      --compute auto --json "$out/construct-$v-$r.json" > "$out/construct-$v-$r.log" 2>&1
  fi
  if has fsdp; then
    PYTHONPATH=$b/python python3 "$src/bench/fsdp_step.py" --layers 16 --modes tandem \
      --json "$out/fsdp-$v-$r.json" > "$out/fsdp-$v-$r.log" 2>&1
  fi
}
for r in $(seq 1 "$rounds"); do
  if [ "$r" -gt 1 ] && [ -n "${DEADLINE_S:-}" ] && [ $(( $(date +%s) - t0 )) -gt "$DEADLINE_S" ]; then
    echo "ab: stopping after $((r - 1)) round(s): DEADLINE_S=$DEADLINE_S passed"; rounds=$((r - 1)); break
  fi
  for v in base new; do
    phase "round $r: $v"
    run_one "$v" "$r"
  done
done

phase "table"
python3 - "$out" "$rounds" <<'EOF' | tee "$out/ab-table.txt"
import json, os, statistics, sys
out, rounds = sys.argv[1], int(sys.argv[2])
def load(part, v, r):
    p = os.path.join(out, "%s-%s-%d.json" % (part, v, r))
    return json.load(open(p)) if os.path.exists(p) else None
def figures(part, d):
    f = {}
    if d is None:
        return f
    if part == "kernels":
        for row in d.get("results", []):
            f["%s %s ms" % (row.get("kernel"), row.get("layout"))] = row.get("median_ms")
    elif part == "compute":
        for run in [d] + d.get("runs", []):
            for p in run.get("points", []):
                f["step f=%.2f %s ms" % (p["fraction"], p["offload_compute"])] = p["step_ms"]
    elif part == "construct":
        for p in (d if isinstance(d, list) else d.get("points", [])):
            f["construct f=%.2f %s ms" % (p.get("fraction"), p.get("offload_compute"))] = \
                p.get("construct_ms")
    elif part == "fsdp":
        res = d.get("results", [])
        for m in (res.values() if isinstance(res, dict) else res):
            if m.get("mode") == "tandem":
                f["fsdp ws1 iteration ms"] = m.get("iteration_ms")
                f["fsdp ws1 step ms"] = m.get("step_ms")
    return {k: v for k, v in f.items() if isinstance(v, (int, float))}
print("%-44s %12s %12s %8s" % ("figure (median of %d rounds)" % rounds, "base", "new", "new/base"))
for part in ("kernels", "compute", "construct", "fsdp"):
    per = {"base": {}, "new": {}}
    for v in per:
        for r in range(1, rounds + 1):
            for k, x in figures(part, load(part, v, r)).items():
                per[v].setdefault(k, []).append(x)
    for k in sorted(set(per["base"]) & set(per["new"])):
        b, n = statistics.median(per["base"][k]), statistics.median(per["new"][k])
        print("%-44s %12.2f %12.2f %8.3f" % (k, b, n, n / b if b else float("nan")))
EOF
