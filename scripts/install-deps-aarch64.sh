#!/usr/bin/env bash
# Installs what the aarch64 cross build and its emulated tests need on an x86-64 Debian 12
# host, besides scripts/install-deps.sh's packages (docs/building.md, "Arm (aarch64)"):
# Debian's cross compiler and qemu-user, and through multiarch (dpkg --add-architecture
# arm64) the arm64 -dev packages of oneTBB, hwloc and GoogleTest. ISA-L's arm64 packages
# cannot be installed beside the amd64 libisal-dev (they are not Multi-Arch: same), so
# they are unpacked into TANDEM_AARCH64_PREFIX (default /opt/tandem-aarch64), where
# cmake/aarch64-linux-gnu.cmake looks. So is Debian's arm64 Python 3.11: its headers,
# which the cross-built extension (tandem._C) needs, and the interpreter with the
# libraries it loads, which scripts/test-aarch64.sh --python runs under qemu-aarch64 -L
# with that prefix (installing them through multiarch would move the build machine's own
# Python 3.11 packages to the arm64 ones' version). xsimd comes with the tree
# (third_party/xsimd); nlohmann-json, CLI11 and pybind11 are header-only and
# architecture-independent (scripts/install-deps.sh). Idempotent; needs root (or sudo).
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
# unpack FILE PACKAGE...: the arm64 PACKAGEs unpacked into the prefix unless FILE is there.
unpack() {
  local file=$1 tmp deb
  shift
  [ ! -e "$prefix/$file" ] || return 0
  tmp=$(mktemp -d)
  chmod 755 "$tmp"  # apt-get download fetches as user _apt
  (cd "$tmp" && apt-get download -qq "${@/%/:arm64}")
  $SUDO mkdir -p "$prefix"
  for deb in "$tmp"/*.deb; do $SUDO dpkg-deb -x "$deb" "$prefix"; done
  rm -rf "$tmp"
}
unpack usr/lib/aarch64-linux-gnu/libisal.so libisal2 libisal-dev
# Python 3.11 and the libraries of its interpreter and standard modules (zlib, expat,
# bz2, lzma, ffi, uuid, OpenSSL); libc and libstdc++ come from the multiarch packages.
unpack usr/bin/python3.11 python3.11 python3.11-minimal libpython3.11 libpython3.11-minimal \
  libpython3.11-stdlib libpython3.11-dev zlib1g libexpat1 libbz2-1.0 liblzma5 libffi8 libuuid1 \
  libssl3
echo "install-deps-aarch64: cross compiler, qemu-user and the arm64 libraries present" \
     "(ISA-L and Python 3.11 in $prefix)"
