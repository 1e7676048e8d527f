#!/usr/bin/env bash
# The README's second command: builds (if needed) and runs every test with ctest, then
# prints a one-line summary: how many tests ran, passed and failed, and how many were
# skipped because they need a GPU (each GPU suite is one ctest test; tests/CMakeLists.txt).
#   scripts/test.sh              Release build in build/
#   scripts/test.sh --sanitize   ASan + UBSan build in build-asan/, without the planner's
#                                four long searches (TANDEM_PLANNER_SEARCHES, scripts/env.sh)
#                                and planner_doc_outputs
# Extra arguments after the mode go to CMake (e.g. -DTANDEM_CUDA=OFF for a host-only build).
# A build dir without CUDA architectures (a new one, or scripts/setup.sh's host-only one)
# compiles CUDA for sm_90 only (TANDEM_TEST_CUDA_ARCHITECTURES; the tests run on at most
# one GPU, and the users' default of five architectures takes 5x as long to compile); one
# that has them keeps the architectures it was configured with.
set -euo pipefail
source "$(dirname "$0")/env.sh"
dir="$TANDEM_ROOT/build"
args=(-DCMAKE_BUILD_TYPE=Release -DTANDEM_BUILD_PYTHON=ON)
exclude='^$'
if [ "${1:-}" = "--sanitize" ]; then
  shift
  dir="$TANDEM_ROOT/build-asan"
  # Run by the Release pass: the planner's four searches (scripts/env.sh) and the check
  # of docs/planner.md's transcripts (text, 160 s under ASan; the planner tests take the
  # same code under ASan).
  exclude="$TANDEM_PLANNER_SEARCHES|^planner_doc_outputs\$"
  args=(-DCMAKE_BUILD_TYPE=RelWithDebInfo -DTANDEM_SANITIZE=ON -DTANDEM_BUILD_BENCH=OFF)
  export ASAN_OPTIONS=${ASAN_OPTIONS:-protect_shadow_gap=0:detect_leaks=1}
  export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1}
fi
if ! grep -qs '^CMAKE_CUDA_ARCHITECTURES:' "$dir/CMakeCache.txt"; then
  args+=(-DCMAKE_CUDA_ARCHITECTURES="${TANDEM_TEST_CUDA_ARCHITECTURES:-90}")
fi
configure_and_build "$dir" "${args[@]}" "$@"
log="$dir/ctest-output.log"
rc=0
ctest --test-dir "$dir" --output-on-failure -j "$JOBS" -E "$exclude" 2>&1 | tee "$log" || rc=$?
summarize_tests "$dir" "$log"
exit "$rc"
