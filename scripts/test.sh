#!/usr/bin/env bash
# The README's second command: builds (if needed) and runs every test with ctest.
#   scripts/test.sh              Release build in build/
#   scripts/test.sh --sanitize   ASan + UBSan build in build-asan/
# Tests that need a GPU skip with a message where none is present.
set -euo pipefail
source "$(dirname "$0")/env.sh"
dir="$TANDEM_ROOT/build"
args=(-DCMAKE_BUILD_TYPE=Release -DTANDEM_BUILD_PYTHON=ON)
if [ "${1:-}" = "--sanitize" ]; then
  dir="$TANDEM_ROOT/build-asan"
  args=(-DCMAKE_BUILD_TYPE=RelWithDebInfo -DTANDEM_SANITIZE=ON -DTANDEM_BUILD_BENCH=OFF)
  export ASAN_OPTIONS=${ASAN_OPTIONS:-protect_shadow_gap=0:detect_leaks=1}
  export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1}
fi
configure_and_build "$dir" "${args[@]}"
ctest --test-dir "$dir" --output-on-failure -j "$JOBS"
