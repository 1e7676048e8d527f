#!/usr/bin/env bash
# The aarch64 cross build (cmake/aarch64-linux-gnu.cmake; scripts/install-deps-aarch64.sh
# installs what it needs) and its host tests under QEMU user-mode emulation, twice:
#   QEMU_CPU=max           SVE on: the kernel tests run NEON and SVE at 128, 256 and 512
#                          bits (each test thread sets its vector length)
#   QEMU_CPU=max,sve=off   NEON only: what a CPU without SVE detects and runs
# Release, host mode (no CUDA). Only the suites below are built and run (the NEON-only
# pass only cpu_simd_tests, the suite whose results depend on the ISA), and not the
# parity tests that cannot differ on these ISAs (below): emulation is slow, and CI has
# about 10 minutes for this. Left out: the Python binding (no arm64 Python with torch to run it),
# tandem-bench (it measures, which emulation cannot; its --base grace-hopper is tested
# natively) and the offload and node suites (the optimizer and CPU pinning over the
# kernels tested here: long under emulation). docs/building.md, "Arm (aarch64)", says
# what runs and how long it takes.
#   scripts/test-aarch64.sh          build in build-aarch64/, then both passes
set -euo pipefail
source "$(dirname "$0")/env.sh"
dir="$TANDEM_ROOT/build-aarch64"
suites=(engine_tests cpu_simd_tests checkpoint_tests planner_tests tools_tests)
tools=(tandem-plan tandem-ckpt)
# The gtest suites by label; of the tools' command-line tests, one per kind of answer
# (a fit, the Grace-Hopper profile, a verdict that does not fit and what would, JSON).
labels="^($(IFS='|'; echo "${suites[*]}"))\$"
commands='^tandem_plan\.(fits|grace_hopper_profile|llama70b_no_release_text|hsdp_json)$'
# Left out of the kernel parity suite on aarch64 (TANDEM_AARCH64_EXCLUDE): EveryPairingMode
# (only the AVX-512 Ops pair groups; on NEON and SVE every pairing mode runs the loop
# that EveryCombination and ParamAliasesMasterBf16 run) and WithSoftwarePrefetch
# (prefetches are hints, which QEMU ignores; the loop around them is the same template
# code that x86 runs natively). Of the planner's, the four searches that run the whole
# plan hundreds of times (TANDEM_PLANNER_SEARCHES, scripts/env.sh: 440 of the SVE pass's
# 560 s of planner CPU time under QEMU): the other planner tests check its arithmetic.
# ctest names carry "  # GetParam() = ..." after the name.
exclude=${TANDEM_AARCH64_EXCLUDE:-"Parity\\.(EveryPairingMode|WithSoftwarePrefetch)/|$TANDEM_PLANNER_SEARCHES"}
cmake -S "$TANDEM_ROOT" -B "$dir" -G Ninja \
  -DCMAKE_TOOLCHAIN_FILE="$TANDEM_ROOT/cmake/aarch64-linux-gnu.cmake" -DTANDEM_CUDA=OFF \
  -DCMAKE_BUILD_TYPE=Release -DTANDEM_BUILD_PYTHON=OFF -DTANDEM_BUILD_BENCH=OFF "$@" |
  { grep -E '^-- Tandem: ' || true; }
cmake --build "$dir" -j "$JOBS" --target "${suites[@]}" "${tools[@]}"
# The exhaustive compander test takes a sample under emulation (codec_test.cc).
export TANDEM_EMULATED=1
# run_pass CPU LABELS [COMMANDS]: the suites labelled LABELS and the command tests named
# COMMANDS under QEMU_CPU=CPU; fails if either run does.
run_pass() {
  local r=0
  QEMU_CPU=$1 ctest --test-dir "$dir" --output-on-failure -j "$JOBS" -L "$2" -E "$exclude" || r=1
  if [ -n "${3:-}" ]; then
    QEMU_CPU=$1 ctest --test-dir "$dir" --output-on-failure -j "$JOBS" -R "$3" || r=1
  fi
  return "$r"
}
rc=0
for cpu in max max,sve=off; do
  echo "test-aarch64: QEMU_CPU=$cpu"
  log="$dir/ctest-$cpu.log"
  if [ "$cpu" = max ]; then
    run_pass "$cpu" "$labels" "$commands" 2>&1 | tee "$log" || rc=1
  else
    run_pass "$cpu" '^cpu_simd_tests$' 2>&1 | tee "$log" || rc=1
  fi
  grep -E 'tests passed|tests failed' "$log" | sed "s/^/test-aarch64 (QEMU_CPU=$cpu): /"
done
exit "$rc"
