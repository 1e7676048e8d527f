#!/usr/bin/env bash
# Installs what the aarch64 cross build and its emulated tests need on an x86-64 Debian 12
# host, besides scripts/install-deps.sh's packages (docs/building.md, "Arm (aarch64)"):
# Debian's cross compiler and qemu-user, and through multiarch (dpkg --add-architecture
# arm64) the arm64 -dev packages of oneTBB, hwloc and GoogleTest. ISA-L's arm64 packages
# cannot be installed beside the amd64 libisal-dev (they are not Multi-Arch: same), so
# they are unpacked into TANDEM_AARCH64_PREFIX (default /opt/tandem-aarch64), where
# cmake/aarch64-linux-gnu.cmake looks. xsimd comes with the tree (third_party/xsimd);
# nlohmann-json and CLI11 are header-only and architecture-independent. Idempotent; needs
# root (or sudo).
set -euo pipefail
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"
export DEBIAN_FRONTEND=noninteractive
prefix=${TANDEM_AARCH64_PREFIX:-/opt/tandem-aarch64}
PKGS=(g++-aarch64-linux-gnu qemu-user libtbb-dev:arm64 libhwloc-dev:arm64 libgtest-dev:arm64)
updated=0
if ! dpkg --print-foreign-architectures | grep -qx arm64; then
  $SUDO dpkg --add-architecture arm64
  $SUDO apt-get update -qq
  updated=1
fi
missing=()
for p in "${PKGS[@]}"; do dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p"); done
if [ ${#missing[@]} -gt 0 ]; then
  [ "$updated" = 1 ] || $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi
if [ ! -e "$prefix/usr/lib/aarch64-linux-gnu/libisal.so" ]; then
  tmp=$(mktemp -d)
  chmod 755 "$tmp"
  (cd "$tmp" && apt-get download -qq libisal2:arm64 libisal-dev:arm64)
  $SUDO mkdir -p "$prefix"
  for deb in "$tmp"/*.deb; do $SUDO dpkg-deb -x "$deb" "$prefix"; done
  rm -rf "$tmp"
fi
echo "install-deps-aarch64: cross compiler, qemu-user and the arm64 libraries present" \
     "(ISA-L in $prefix)"
