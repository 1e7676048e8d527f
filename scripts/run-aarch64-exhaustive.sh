#!/usr/bin/env bash
# The exhaustive compander check of the aarch64 kernels
# (CodecEveryIsa.CompanderCodesMatchReferenceForEveryInput, tests/cpu_simd/codec_test.cc:
# every one of the 1.07e9 inputs) under QEMU user-mode emulation, on an x86-64 Linux
# machine with nothing installed: in SHARDS parallel processes (default: every CPU), for
# NEON (QEMU_CPU=max,sve=off) and for SVE at 128, 256 and 512 bits (QEMU_CPU=max, one
# vector length per run). scripts/pack-aarch64-exhaustive.sh copies this script as run.sh
# into the folder it packs, beside what it runs:
#   qemu-aarch64-static   Debian's static QEMU
#   cpu_simd_tests        the aarch64 test binary
#   sysroot/              its shared libraries and loader (qemu-aarch64 -L)
# Prints one PASS or FAIL line per ISA and vector length, with the inputs checked (the
# shards' sum must be every input) and the wall time; exits 1 when any fails. The shards'
# logs go to LOGS (default: a new directory under $TMPDIR or /tmp).
#   bash run.sh                     SHARDS=$(nproc)
#   SHARDS=16 bash run.sh sve512    the variants named only (neon sve128 sve256 sve512)
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
qemu=$here/qemu-aarch64-static
bin=$here/cpu_simd_tests
root=$here/sysroot
shards=${SHARDS:-$(nproc)}
test=CodecEveryIsa.CompanderCodesMatchReferenceForEveryInput
total=1065418752  # kCompanderEnd (codec_test.cc): the floats +0 up to 1.0078125
for f in "$qemu" "$bin" "$root/lib/ld-linux-aarch64.so.1"; do
  [ -e "$f" ] || { echo "run.sh: $f is missing"; exit 2; }
done
[ "$(uname -m)" = x86_64 ] || { echo "run.sh: qemu-aarch64-static here is for x86-64"; exit 2; }
logs=${LOGS:-$(mktemp -d "${TMPDIR:-/tmp}/aarch64-exhaustive.XXXXXX")}
mkdir -p "$logs"
variants=("$@")
[ ${#variants[@]} -gt 0 ] || variants=(neon sve128 sve256 sve512)
pin=""
command -v taskset >/dev/null 2>&1 && pin=taskset
ncpu=$(nproc)
echo "run.sh: $shards shards per variant on $ncpu CPUs; logs in $logs"

# now_us: microseconds since the epoch (bash 5's EPOCHREALTIME, else date).
now_us() {
  if [ -n "${EPOCHREALTIME:-}" ]; then echo "${EPOCHREALTIME/[.,]/}"; else echo "$(date +%s)000000"; fi
}

# run_variant NAME: every shard of the check for kernel build NAME; prints its line.
run_variant() {
  local name=$1 cpu=max i pids=() failed=0 checked=0 n t0 t1 log cmd
  [ "$name" = neon ] && cpu=max,sve=off
  t0=$(now_us)
  for ((i = 0; i < shards; i++)); do
    log=$logs/$name-$i.log
    # One thread per shard when it can be pinned (TBB sizes its pool by the affinity).
    cmd=(env -u TANDEM_EMULATED QEMU_CPU=$cpu TANDEM_EXHAUSTIVE_SHARD=$i/$shards
         TANDEM_EXHAUSTIVE_TARGET="$name")
    [ -z "$pin" ] || cmd+=(taskset -c $((i % ncpu)))
    "${cmd[@]}" "$qemu" -L "$root" "$bin" --gtest_filter="$test" >"$log" 2>&1 &
    pids+=($!)
  done
  for ((i = 0; i < shards; i++)); do
    log=$logs/$name-$i.log
    if ! wait "${pids[$i]}" || ! grep -q '^\[  PASSED  \] 1 test' "$log"; then
      failed=$((failed + 1))
      echo "run.sh: $name shard $i/$shards failed ($log):"
      grep -E 'Failure|Which is|: a = |is not|checked|error' "$log" | head -8
      continue
    fi
    n=$(sed -nE "s/^compander inputs checked on 1 ISA builds \\($name\\): ([0-9]+) of .*/\\1/p" "$log")
    checked=$((checked + ${n:-0}))
  done
  t1=$(now_us)
  local secs
  secs=$(( (t1 - t0) / 1000000 )).$(( (t1 - t0) / 100000 % 10 ))
  if [ "$failed" -eq 0 ] && [ "$checked" -eq "$total" ]; then
    echo "PASS $name: $checked of $total inputs in $shards shards, ${secs} s"
    return 0
  fi
  echo "FAIL $name: $failed of $shards shards failed; $checked of $total inputs checked, ${secs} s"
  return 1
}

rc=0
for v in "${variants[@]}"; do
  case $v in
    neon | sve128 | sve256 | sve512) run_variant "$v" || rc=1 ;;
    *) echo "FAIL $v: not one of neon sve128 sve256 sve512"; rc=1 ;;
  esac
done
exit "$rc"
