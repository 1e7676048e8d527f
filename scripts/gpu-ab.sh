#!/usr/bin/env bash
# A/B of compile-time variants of the CUDA kernels on one GPU host, in one call: builds
# tandem-bench-gpu once per variant (in parallel, /tmp/b-NAME) against the offline bundle
# in .bundle, then runs each on the same GPU, so machine-to-machine variation (a few
# points of copy between lent H200s) does not enter the comparison.
#   VARIANTS="base:;t4:-DTANDEM_GPU_TILES_PER_UNIT=4" KERNELS=adamw_ecc8_q8_q8,lion_ecc8_q8 \
#     BENCH_ARGS="--model none" scripts/gpu-ab.sh OUT_DIR
# The knobs: TANDEM_GPU_BLOCK_THREADS, TANDEM_GPU_TILES_PER_UNIT, TANDEM_GPU_MIN_BLOCKS,
# TANDEM_GPU_L2_PREFETCH(_ADAM) (cuda/step_kernel.cuh). Run from the repository root.
set -uo pipefail
out=$1; shift; mkdir -p "$out"
root=$(pwd)
prefix=/tmp/tandem-deps; mkdir -p $prefix
for f in .bundle/*.deb; do dpkg -x "$f" "$prefix"; done
export PATH=/usr/local/cuda/bin:$PATH
IFS=';' read -ra vs <<< "$VARIANTS"
lscpu | grep -E '^(Model name|CPU\(s\)|Thread|Core|Socket)' > $out/lscpu.txt
pids=()
for v in "${vs[@]}"; do
  name=${v%%:*}; flags=${v#*:}
  ( cmake -S $root -B /tmp/b-$name -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_PREFIX_PATH=$prefix/usr \
      -DGTest_DIR=$prefix/usr/lib/x86_64-linux-gnu/cmake/GTest -DTANDEM_WERROR=OFF \
      "-DCMAKE_CUDA_FLAGS=$flags" > $out/cfg-$name.log 2>&1 &&
    ninja -C /tmp/b-$name -j 6 ${TARGETS:-tandem-bench-gpu} > $out/build-$name.log 2>&1; echo "built $name rc=$?" ) &
  pids+=($!)
done
wait
for v in "${vs[@]}"; do
  name=${v%%:*}
  [ -x /tmp/b-$name/bench/gpu/tandem-bench-gpu ] || { echo "$name: no binary"; tail -5 $out/build-$name.log; continue; }
  /tmp/b-$name/bench/gpu/tandem-bench-gpu --kernels ${KERNELS} ${BENCH_ARGS:-} --json $out/k-$name.json > $out/k-$name.log 2>&1
  echo "== $name"; grep -E "copy|adamw|lion|sgd" $out/k-$name.log | grep -v "^  " | head -12
done
