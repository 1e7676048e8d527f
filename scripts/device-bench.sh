#!/usr/bin/env bash
# On a GPU host: builds Tandem from this checkout against an offline bundle (made by
# scripts/make-offline-bundle.sh), runs the CUDA tests, compute-sanitizer memcheck and
# racecheck on a reduced set of parity tests, the kernel benchmark and the torch fused
# AdamW baseline. Logs and JSON go to OUT_DIR; a short table is printed last.
#   scripts/device-bench.sh BUNDLE_DIR OUT_DIR [bench args...]
# Environment: BUILD_DIR (default build-device), SKIP_TORCH=1, SKIP_SANITIZER=1,
# PROFILE=1 (ncu counters of each kernel and the SASS, for tuning), CUDA_ARCHS (default 90).
set -uo pipefail
bundle=$1; out=$2; shift 2
root=$(cd "$(dirname "$0")/.." && pwd)
build=${BUILD_DIR:-$root/build-device}
mkdir -p "$out"
out=$(cd "$out" && pwd)
command -v nvcc >/dev/null 2>&1 || export PATH=/usr/local/cuda/bin:$PATH
t0=$(date +%s)
phase() { echo "== $1 ($(( $(date +%s) - t0 )) s)"; }
status=()

phase "device"
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.mem --format=csv \
  | tee "$out/nvidia-smi.csv"

phase "build"
if ! bash "$root/scripts/offline-build.sh" "$bundle" "$build" -DTANDEM_BUILD_BENCH=ON \
    -DCMAKE_CUDA_ARCHITECTURES="${CUDA_ARCHS:-90}" \
    > "$out/build.log" 2>&1; then
  tail -40 "$out/build.log"; echo "device-bench: build failed (log: $out/build.log)"; exit 1
fi
tail -1 "$out/build.log"

phase "cuda tests"
tests=$build/tests/cuda/cuda_tests
"$tests" --gtest_brief=1 --gtest_output="json:$out/cuda_tests.json" > "$out/cuda_tests.log" 2>&1
rc=$?
tail -5 "$out/cuda_tests.log"
status+=("cuda_tests: $( [ $rc -eq 0 ] && echo passed || echo FAILED ); $(grep -E '^\[  (PASSED|FAILED)  \]' "$out/cuda_tests.log" | tr '\n' ' ')")

phase "engine tests"
"$build/tests/engine_tests" --gtest_brief=1 > "$out/engine_tests.log" 2>&1
rc=$?
status+=("engine_tests: $( [ $rc -eq 0 ] && echo passed || echo FAILED )")

if [ "${SKIP_SANITIZER:-0}" != 1 ]; then
  # A reduced set: one instance per kernel family and format kind, the tiny-tensor plan,
  # the norm pre-pass and the error paths.
  filter='AllFormats/GpuStepParity.MixedSizesThreeSteps/adamw_f32_mf32_vf32'
  filter+=':AllFormats/GpuStepParity.MixedSizesThreeSteps/adamw_bf16_ecc8_mq8_vq8'
  filter+=':AllFormats/GpuStepParity.MixedSizesThreeSteps/adam_l2_bf16_mq8_vf32'
  filter+=':AllFormats/GpuStepParity.MixedSizesThreeSteps/lion_bf16_ecc16_mq8_vf32'
  filter+=':AllFormats/GpuStepParity.MixedSizesThreeSteps/sgd_mixed_bf16_ecc8_mf32_vf32'
  filter+=':AllFormats/GpuStepParity.ThousandsOfTinyTensorsTwoSteps/adamw_bf16_ecc8_mq8_vq8'
  filter+=':AllFormats/GpuStepParity.WholeUnitsEveryGradDtypeTwoSteps/adamw_bf16_ecc8_mq8_vq8'
  filter+=':GradNorm.*:GpuStepPlanErrors.*'
  for tool in memcheck racecheck; do
    phase "compute-sanitizer $tool"
    timeout 300 compute-sanitizer --tool "$tool" --error-exitcode 3 "$tests" \
      --gtest_brief=1 --gtest_filter="$filter" > "$out/sanitizer-$tool.log" 2>&1
    rc=$?
    summary=$(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$out/sanitizer-$tool.log" | tail -1)
    status+=("compute-sanitizer $tool: rc=$rc ${summary:-no summary line}")
    tail -3 "$out/sanitizer-$tool.log"
  done
fi

phase "kernel benchmark"
bench=$build/bench/gpu/tandem-bench-gpu
if [ -x "$bench" ]; then
  "$bench" --json "$out/gpu_kernels.json" "$@" > "$out/gpu_kernels.log" 2>&1
  status+=("tandem-bench-gpu: rc=$?")
else
  status+=("tandem-bench-gpu: not built (bench/CMakeLists.txt needs add_subdirectory(gpu))")
fi

if [ "${PROFILE:-0}" = 1 ] && [ -x "$bench" ]; then
  # Kernel counters on a small flat buffer (one launch per kernel) and the SASS.
  phase "ncu profile"
  metrics=sm__inst_executed.sum,smsp__issue_active.avg.pct_of_peak_sustained_active
  metrics+=,dram__throughput.avg.pct_of_peak_sustained_elapsed,gpu__time_duration.sum
  metrics+=,sm__warps_active.avg.pct_of_peak_sustained_active,launch__registers_per_thread
  metrics+=,smsp__average_warp_latency_issue_stalled_long_scoreboard,smsp__average_warp_latency_issue_stalled_wait
  timeout 240 ncu --clock-control none --kernel-name regex:FusedStepKernel --metrics "$metrics" \
    --csv "$bench" --elements 67108864 --model none --warmup 0 --reps 1 \
    > "$out/ncu.csv" 2> "$out/ncu.err"
  status+=("ncu: rc=$?")
  cuobjdump -sass "$build/cuda/libtandem_cuda.a" | gzip > "$out/sass.txt.gz"
fi

if [ "${SKIP_TORCH:-0}" != 1 ]; then
  phase "torch fused AdamW baseline"
  python3 "$root/bench/torch_adamw.py" --json "$out/torch_adamw.json" \
    > "$out/torch_adamw.log" 2>&1
  status+=("torch_adamw: rc=$?")
fi

phase "summary"
# Few files come back from some hosts: keep the JSON results, pack the logs.
(cd "$out" && tar -czf logs.tgz --remove-files ./*.log ./*.err ./*.csv 2>/dev/null)
printf '%s\n' "${status[@]}"
tar -xzOf "$out/logs.tgz" ./torch_adamw.log 2>/dev/null | tail -1
tar -xzOf "$out/logs.tgz" ./gpu_kernels.log 2>/dev/null | grep -v '^  ' | tail -20
