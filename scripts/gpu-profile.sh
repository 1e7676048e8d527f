#!/usr/bin/env bash
# Profiles one fused-step kernel with Nsight Compute on a GPU host: the speed-of-light,
# scheduler and warp-state sections, and per-SASS-instruction stall samples (SourceCounters)
# exported as CSV, for reading off where the warps wait.
#   scripts/gpu-profile.sh BENCH_BINARY KERNEL OUT_DIR [ELEMENTS]
# e.g. scripts/gpu-profile.sh /tmp/b-new/bench/gpu/tandem-bench-gpu adamw_ecc8_q8_q8 out 67108864
# Writes OUT_DIR/prof-KERNEL.ncu-rep, details-KERNEL.txt and sass-KERNEL.csv. Clocks are left
# as they are (--clock-control none): this repository never changes the GPU's clocks.
set -euo pipefail
bin=$1; kernel=$2; out=$3; elements=${4:-67108864}
mkdir -p "$out"
ncu=$(command -v ncu || echo /usr/local/cuda/bin/ncu)
"$ncu" --clock-control none --kernel-name regex:FusedStepKernel --launch-skip 1 --launch-count 1 \
  --section SpeedOfLight --section SchedulerStats --section WarpStateStats --section SourceCounters \
  --section ComputeWorkloadAnalysis --section Occupancy -f -o "$out/prof-$kernel" \
  "$bin" --kernels "$kernel" --elements "$elements" --model none --warmup 1 --reps 1 > "$out/ncu-$kernel.log" 2>&1
"$ncu" --import "$out/prof-$kernel.ncu-rep" --page details > "$out/details-$kernel.txt"
"$ncu" --import "$out/prof-$kernel.ncu-rep" --page source --csv --print-source sass > "$out/sass-$kernel.csv"
echo "gpu-profile: $kernel -> $out"
