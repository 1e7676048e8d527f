#!/usr/bin/env bash
# Packs the exhaustive compander check of the aarch64 kernels into one folder that runs on
# any x86-64 Linux machine with nothing installed (docs/building.md, "The exhaustive
# compander check in shards"): Debian's static qemu-aarch64 (qemu-user-static, fetched
# with apt-get download), cpu_simd_tests from the aarch64 cross build (built here in
# build-aarch64/, configured as scripts/test-aarch64.sh does when it is not there yet),
# its shared libraries and loader from the arm64 multiarch packages
# (scripts/install-deps-aarch64.sh) in sysroot/, and scripts/run-aarch64-exhaustive.sh as
# run.sh. About 20 MB.
#   scripts/pack-aarch64-exhaustive.sh [DIR]    default DIR: build-aarch64/exhaustive
# then, on the machine that runs it: bash DIR/run.sh
set -euo pipefail
source "$(dirname "$0")/env.sh"
build="$TANDEM_ROOT/build-aarch64"
out=${1:-$build/exhaustive}
if [ ! -f "$build/build.ninja" ]; then
  cmake -S "$TANDEM_ROOT" -B "$build" -G Ninja \
    -DCMAKE_TOOLCHAIN_FILE="$TANDEM_ROOT/cmake/aarch64-linux-gnu.cmake" -DTANDEM_CUDA=OFF \
    -DCMAKE_BUILD_TYPE=Release -DTANDEM_BUILD_BENCH=OFF >/dev/null
fi
cmake --build "$build" -j "$JOBS" --target cpu_simd_tests
rm -rf "$out/sysroot"
mkdir -p "$out/sysroot/lib/aarch64-linux-gnu"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
chmod 755 "$tmp"  # apt-get download fetches as user _apt
(cd "$tmp" && apt-get download -qq qemu-user-static 2>/dev/null)
dpkg-deb -x "$tmp"/qemu-user-static_*.deb "$tmp/qemu"
install -m 755 "$tmp/qemu/usr/bin/qemu-aarch64-static" "$out/qemu-aarch64-static"
aarch64-linux-gnu-strip -o "$out/cpu_simd_tests" "$build/tests/cpu_simd/cpu_simd_tests"
# The test's shared libraries and theirs, from the arm64 multiarch directories.
libdirs=(/lib/aarch64-linux-gnu /usr/lib/aarch64-linux-gnu)
queue=("$out/cpu_simd_tests")
while [ ${#queue[@]} -gt 0 ]; do
  f=${queue[0]}
  queue=("${queue[@]:1}")
  for lib in $(aarch64-linux-gnu-readelf -d "$f" | sed -nE 's/.*\(NEEDED\).*\[(.*)\]/\1/p'); do
    dest="$out/sysroot/lib/aarch64-linux-gnu/$lib"
    [ -e "$dest" ] && continue
    src=""
    for d in "${libdirs[@]}"; do [ -e "$d/$lib" ] && { src=$d/$lib; break; }; done
    [ -n "$src" ] || { echo "pack-aarch64-exhaustive: no arm64 $lib" >&2; exit 1; }
    cp -L "$src" "$dest"
    queue+=("$dest")
  done
done
# The loader where the binary names it (a copy, not a link: the folder may travel
# through tools that drop links).
cp "$out/sysroot/lib/aarch64-linux-gnu/ld-linux-aarch64.so.1" "$out/sysroot/lib/"
install -m 755 "$TANDEM_ROOT/scripts/run-aarch64-exhaustive.sh" "$out/run.sh"
echo "pack-aarch64-exhaustive: $out ($(du -sh "$out" | cut -f1)); run it with: bash $out/run.sh"
