#!/usr/bin/env bash
# A/B of variants of the CUDA kernels (source trees or compile flags) on one GPU host, in
# one call: builds tandem-bench-gpu once per variant (in parallel, /tmp/b-NAME) against the
# offline bundle in .bundle, then runs the variants in turn on the same GPU, ROUNDS times
# (interleaved: a b c a b c ...), so machine-to-machine variation (a few points of copy
# between lent H200s) and drift within the run do not enter the comparison.
#   VARIANTS="base:;new:" SRC_base=/tmp/base-src KERNELS=adamw_ecc8_q8_q8,lion_ecc8_q8 \
#     BENCH_ARGS="--model none" ROUNDS=2 scripts/gpu-ab.sh OUT_DIR
# A variant is NAME:FLAGS; FLAGS (may be empty) become that build's CMAKE_CUDA_FLAGS.
# SRC_NAME=DIR builds variant NAME from another source tree (e.g. the previous commit,
# unpacked from `git archive`), so that code changes, not only flags, can be compared.
# TARGETS (default tandem-bench-gpu) sets the build targets, e.g. "tandem-bench-gpu cuda_tests";
# TARGETS_NAME sets them for variant NAME alone. CUDA_ARCHS (default 90) the architectures.
# The kernels have no compile-time tuning switches: their tuning values are constants
# (docs/gpu_kernels.md, "Tuning decisions"), so an alternative is a code variant built with
# SRC_NAME. Run from the repository root. Prints "variant kernel round of_copy" rows last.
set -uo pipefail
out=$1; shift; mkdir -p "$out"
root=$(pwd)
prefix=/tmp/tandem-deps; mkdir -p $prefix
for f in .bundle/*.deb; do dpkg -x "$f" "$prefix"; done
export PATH=/usr/local/cuda/bin:$PATH
IFS=';' read -ra vs <<< "$VARIANTS"
lscpu | grep -E '^(Model name|CPU\(s\)|Thread|Core|Socket)' > $out/lscpu.txt
jobs=$(( $(nproc) / ${#vs[@]} )); [ "$jobs" -ge 2 ] || jobs=2
for v in "${vs[@]}"; do
  name=${v%%:*}; flags=${v#*:}
  src_var="SRC_$name"; src=${!src_var:-$root}
  tgt_var="TARGETS_$name"; targets=${!tgt_var:-${TARGETS:-tandem-bench-gpu}}
  ( cmake -S $src -B /tmp/b-$name -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_PREFIX_PATH=$prefix/usr \
      -DGTest_DIR=$prefix/usr/lib/x86_64-linux-gnu/cmake/GTest -DTANDEM_WERROR=OFF \
      -DCMAKE_CUDA_ARCHITECTURES="${CUDA_ARCHS:-90}" \
      "-DCMAKE_CUDA_FLAGS=$flags" > $out/cfg-$name.log 2>&1 &&
    ninja -C /tmp/b-$name -j $jobs $targets > $out/build-$name.log 2>&1; echo "built $name rc=$?" ) &
done
wait
rows=()
for r in $(seq 1 ${ROUNDS:-1}); do
  for v in "${vs[@]}"; do
    name=${v%%:*}
    bin=/tmp/b-$name/bench/gpu/tandem-bench-gpu
    [ -x $bin ] || { [ $r -eq 1 ] && { echo "$name: no binary"; tail -5 $out/build-$name.log; }; continue; }
    $bin --kernels ${KERNELS} ${BENCH_ARGS:-} --json $out/k-$name-r$r.json > $out/k-$name-r$r.log 2>&1
    while read -r kernel layout pct; do
      rows+=("$(printf '%-10s %-20s %-16s r%d %s' $name $kernel $layout $r $pct)")
    done < <(awk 'NF >= 8 && $1 ~ /^(adamw|lion|sgd)/ {print $1, $2, $7}' $out/k-$name-r$r.log)
  done
done
grep -h "device-to-device" $out/k-*-r1.log | head -1
printf '%s\n' "${rows[@]}" | sort -k2,2 -k3,3 -k1,1 -k4,4 | tee $out/ab-table.txt
