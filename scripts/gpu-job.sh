#!/usr/bin/env bash
# The whole job on a GPU host in one call: build against an offline bundle, run every test
# (the GPU ones run here), then the benchmarks, writing logs and JSON to OUT_DIR and
# printing a short summary last.
#   scripts/gpu-job.sh BUNDLE_DIR OUT_DIR
# PHASES selects what runs (default: "build tests hybrid baseline"); also "kernels",
# "host", "early", "sanitizer", "pcie", "calibrate". HYBRID_ARGS / BASELINE_ARGS pass options through.
# CUDA_ARCHS (default 90) sets the CUDA architectures built.
set -uo pipefail
bundle=$1; out=$2
root=$(cd "$(dirname "$0")/.." && pwd)
build=${BUILD_DIR:-/tmp/tandem-build}
phases=${PHASES:-build tests hybrid baseline}
mkdir -p "$out"; out=$(cd "$out" && pwd)
command -v nvcc >/dev/null 2>&1 || export PATH=/usr/local/cuda/bin:$PATH
t0=$(date +%s)
phase() { echo "== $1 ($(( $(date +%s) - t0 )) s)"; }
has() { [[ " $phases " == *" $1 "* ]]; }
summary=()

phase "machine"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | tee "$out/machine.txt"
lscpu | grep -E '^(Model name|CPU\(s\))' | tee -a "$out/machine.txt"

if has build; then
  phase "build"
  # sm_90 only (H100/H200: what these hosts have), not the users' five architectures.
  if ! bash "$root/scripts/offline-build.sh" "$bundle" "$build" \
       -DCMAKE_CUDA_ARCHITECTURES="${CUDA_ARCHS:-90}" > "$out/build.log" 2>&1; then
    tail -30 "$out/build.log"; echo "gpu-job: build failed"; exit 1
  fi
fi
if has tests; then
  phase "tests"
  ctest --test-dir "$build" -j 8 --timeout 900 > "$out/ctest.log" 2>&1
  summary+=("ctest: $(grep -E 'tests passed|tests failed' "$out/ctest.log")")
  grep -E '\(Failed\)|\(Timeout\)' "$out/ctest.log" | head -20
  summary+=("skipped: $(grep -c 'Skipped' "$out/ctest.log")")
fi
if has sanitizer; then
  phase "compute-sanitizer"
  for tool in memcheck racecheck; do
    timeout 240 compute-sanitizer --tool $tool --error-exitcode 3 \
      "$build/tests/offload/offload_gpu_tests" --gtest_filter='HybridGpu.NonFinite*:CheckpointRoundTrip.*Gpu' \
      > "$out/sanitizer-offload-$tool.log" 2>&1
    summary+=("sanitizer $tool (hybrid GPU step): rc=$? $(grep -E 'SUMMARY' "$out/sanitizer-offload-$tool.log" | tail -1)")
  done
fi
if has kernels; then
  phase "GPU kernel benchmark"
  "$build/bench/gpu/tandem-bench-gpu" --json "$out/gpu_kernels.json" > "$out/gpu_kernels.log" 2>&1
  summary+=("tandem-bench-gpu: rc=$?")
fi
if has host; then
  phase "host kernel benchmark"
  "$build/bench/tandem-bench-host" ${HOST_ARGS:-} --json "$out/host_kernels.json" > "$out/host_kernels.log" 2>&1
  summary+=("tandem-bench-host: rc=$?")
fi
if has pcie; then
  phase "PCIe"
  "$build/tools/bench/tandem-bench" pcie --json "$out/pcie.json" 2>&1 | tee "$out/pcie.log"
fi
if has calibrate; then
  phase "calibrate"
  "$build/tools/bench/tandem-bench" calibrate -o "$out/profile.json" 2>&1 | tee "$out/calibrate.log"
fi
if has hybrid; then
  phase "hybrid benchmark"
  "$build/bench/hybrid/tandem-bench-hybrid" ${HYBRID_ARGS:---models llama3-1b} \
    --json "$out/hybrid.json" 2>&1 | tee "$out/hybrid.log"
fi
if has early; then
  phase "early start"
  "$build/bench/hybrid/tandem-bench-hybrid" ${EARLY_ARGS:---models llama3-1b --fractions 0.5 --early-start} \
    --json "$out/early.json" 2>&1 | tee "$out/early.log"
fi
if has baseline; then
  phase "Megatron-like baseline"
  python3 "$root/bench/megatron_baseline.py" ${BASELINE_ARGS:---models llama3-1b --fractions 0.5} \
    --json "$out/baseline.json" 2>&1 | tee "$out/baseline.log"
fi
phase "summary"
printf '%s\n' "${summary[@]}" | tee "$out/summary.txt"
# Everything in one archive (a result channel may limit the number of files).
tar czf "/tmp/results.tgz" -C "$out" . && mv /tmp/results.tgz "$out/results.tgz"
