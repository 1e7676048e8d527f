#!/usr/bin/env bash
# The main job: what Tandem does on this machine, from an existing build/.
#  1. the numerics demo (every format on two toy problems, CPU reference);
#  2. the planner: will Llama-3-8B's optimizer fit a 40 GiB GPU, at which fraction;
#  3. tandem-bench calibrate on this machine's host (and GPU, if any), then the planner
#     again with the measured profile;
#  4. with a GPU: the hybrid step on Llama-3-1B at fractions 0, 0.5 and 1.
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
  --svg "$OUTDIR/plan-llama3-8b.svg" || true
echo
echo "== 3. calibrate this machine (quick), then plan with the measured profile"
"$B/tools/bench/tandem-bench" calibrate --host-elements $((16 << 20)) --gpu-elements $((256 << 20)) \
  --reps 3 -o "$OUTDIR/profile.json"
"$B/tools/plan/tandem-plan" --model llama3-8b --gpu-mem 40GiB --host-mem 512GiB \
  --profile "$OUTDIR/profile.json" | tail -4 || true
echo
echo "== 4. the hybrid step"
"$B/tools/bench/tandem-bench" hybrid --models llama3-1b --fractions 0 0.5 1 --steps 3
echo
echo "main job done: outputs in $OUTDIR"
