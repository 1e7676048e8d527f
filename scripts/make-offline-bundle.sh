#!/usr/bin/env bash
# Prepares an offline bundle of the Debian packages that GPU hosts usually lack (oneTBB,
# hwloc, ISA-L, xsimd, GoogleTest, nlohmann-json, CLI11), for air-gapped clusters. Run it on a
# Debian 12 machine with a package mirror; copy the folder to the GPU host and build there
# with scripts/offline-build.sh, which unpacks the bundle with `dpkg -x` (no root needed).
#   scripts/make-offline-bundle.sh [OUT_DIR]     (default: .bundle)
set -euo pipefail
out=${1:-"$(cd "$(dirname "$0")/.." && pwd)/.bundle"}
PKGS=(libtbb-dev libtbb12 libtbbmalloc2 libtbbbind-2-5 libhwloc15 libhwloc-dev
      libisal-dev libisal2 libxsimd-dev libgtest-dev googletest
      nlohmann-json3-dev libcli11-dev)
mkdir -p "$out"
cd "$out"
rm -f ./*.deb
apt-get download "${PKGS[@]}" >/dev/null
ls -1 ./*.deb > MANIFEST
echo "bundle: $(wc -l < MANIFEST) packages, $(du -sh . | cut -f1) in $out"
