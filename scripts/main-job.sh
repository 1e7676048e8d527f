#!/usr/bin/env bash
# The main job: what Tandem does on this machine, from an existing build/.
#  1. the numerics demo (every format on two toy problems, CPU reference);
#  2. the planner: will Llama-3-8B's optimizer fit a 40 GiB GPU, at which fraction;
#  3. tandem-bench calibrate on this machine's host (and GPU, if any), each figure repeated
#     3 times, then the planner again with the measured profile;
#  4. with a GPU: the hybrid step on Llama-3-1B at fractions 0, 0.5 and 1;
#  5. a summary (scripts/main_job_summary.py): the machine, what was measured, each figure
#     against the yardstick measured in the same run, and what the plans mean.
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
python3 "$TANDEM_ROOT/scripts/main_job_summary.py" "$OUTDIR" ||
  echo "(no summary: python3 missing or a result unreadable; raw outputs in $OUTDIR)"
echo
echo "main job done: outputs in $OUTDIR"
