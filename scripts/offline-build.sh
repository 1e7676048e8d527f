#!/usr/bin/env bash
# Builds Tandem on a host without a package registry, from a bundle made by
# scripts/make-offline-bundle.sh: unpacks the .deb files into a private prefix with
# `dpkg -x` and points CMake at it.
#   scripts/offline-build.sh BUNDLE_DIR BUILD_DIR [extra cmake args...]
# Warnings do not fail this build (TANDEM_WERROR=ON to make them): the host's compiler is
# usually not the reference toolchain. Prints the prefix it used; later commands need LD_LIBRARY_PATH=$PREFIX/usr/lib/x86_64-linux-gnu
# only for programs not built by CMake (CMake's build tree carries an RPATH).
set -euo pipefail
bundle=$(cd "$1" && pwd); build=$2; shift 2
root=$(cd "$(dirname "$0")/.." && pwd)
prefix=${TANDEM_DEPS_PREFIX:-/tmp/tandem-deps}
mkdir -p "$prefix"
for f in "$bundle"/*.deb; do dpkg -x "$f" "$prefix"; done
command -v nvcc >/dev/null 2>&1 || export PATH=/usr/local/cuda/bin:$PATH
gen=(); command -v ninja >/dev/null 2>&1 && gen=(-G Ninja)
cmake -S "$root" -B "$build" "${gen[@]}" -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_PREFIX_PATH="$prefix/usr" \
  -DGTest_DIR="$prefix/usr/lib/x86_64-linux-gnu/cmake/GTest" \
  -DTANDEM_WERROR="${TANDEM_WERROR:-OFF}" "$@" >/dev/null
cmake --build "$build" -j "$(nproc)"
echo "offline-build: built $build against $prefix"
