#!/usr/bin/env bash
# Builds the checkpoint fuzzers with clang (ASan + UBSan + libFuzzer) in build-fuzz/ and
# runs the loader fuzzer for N seconds (default 300) on a copy of the seed corpus.
#   scripts/fuzz-checkpoint.sh [SECONDS] [FUZZER]   FUZZER: checkpoint_load (default) or
#                                                    safetensors_import
# Exit status 0 when no crash, leak or sanitizer report was found.
set -euo pipefail
source "$(dirname "$0")/env.sh"
secs=${1:-300}
name=${2:-checkpoint_load}
dir="$TANDEM_ROOT/build-fuzz"
CLANG=${CLANG:-clang++-14}
san="-fsanitize=fuzzer-no-link,address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer -g"
cmake -S "$TANDEM_ROOT" -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DCMAKE_CXX_COMPILER="$CLANG" -DCMAKE_CXX_FLAGS="$san" \
  -DTANDEM_BUILD_FUZZERS=ON -DTANDEM_BUILD_TESTS=OFF -DTANDEM_BUILD_BENCH=OFF \
  -DTANDEM_CUDA=OFF >/dev/null
cmake --build "$dir" -j "$JOBS" --target "${name}_fuzzer"
work="$dir/corpus-$name"
mkdir -p "$work"
cp -n "$TANDEM_ROOT/fuzz/corpus/$name/"* "$work/" 2>/dev/null || true
dict=()
[ "$name" = checkpoint_load ] && dict=(-dict="$TANDEM_ROOT/fuzz/checkpoint.dict")
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1}
"$dir/fuzz/${name}_fuzzer" "${dict[@]}" -max_total_time="$secs" -max_len=8192 \
  -rss_limit_mb=2048 -print_final_stats=1 -artifact_prefix="$dir/" "$work"
