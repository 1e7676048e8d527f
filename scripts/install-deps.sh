#!/usr/bin/env bash
# Installs everything Tandem needs to build and test on Debian 12, from Debian packages.
# Idempotent; needs root (or sudo). CUDA is optional (docs/building.md): a CUDA compiler on
# PATH or in /usr/local/cuda (NVIDIA's toolkit) is used; without one the build has no GPU
# support, unless TANDEM_CUDA=ON, which installs Debian's nvidia-cuda-toolkit (non-free)
# and fails when it cannot.
set -euo pipefail
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"
export DEBIAN_FRONTEND=noninteractive
PKGS=(cmake ninja-build g++ pkg-config git ca-certificates
      libtbb-dev libxsimd-dev libisal-dev libhwloc-dev libgtest-dev
      nlohmann-json3-dev libcli11-dev python3
      python3-dev python3-torch python3-pytest python3-pybind11 pybind11-dev
      python3-venv)
missing=()
for p in "${PKGS[@]}"; do dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p"); done
if [ ${#missing[@]} -gt 0 ]; then
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi
# What this script knows about CUDA, said once; whether the build has GPU support is
# CMake's to say (its "-- Tandem: GPU support ..." line), since only its test compile knows
# whether the compiler found works.
mode=$(echo "${TANDEM_CUDA:-AUTO}" | tr '[:lower:]' '[:upper:]')
nvcc=${CUDACXX:-$(command -v nvcc 2>/dev/null || true)}
[ -n "$nvcc" ] || [ ! -x /usr/local/cuda/bin/nvcc ] || nvcc=/usr/local/cuda/bin/nvcc
if [ "$mode" = OFF ]; then
  cuda="CUDA not used (TANDEM_CUDA=OFF)"
elif [ -n "$nvcc" ]; then
  cuda="CUDA compiler $nvcc found (CMake's configure step says whether it builds GPU support)"
elif [ "$mode" = ON ]; then
  echo "install-deps: TANDEM_CUDA=ON and no nvcc found; trying Debian's" \
       "nvidia-cuda-toolkit (non-free)" >&2
  $SUDO apt-get install -y -qq nvidia-cuda-toolkit || {
    echo "install-deps: could not install a CUDA compiler: enable Debian's non-free" \
         "component or install NVIDIA's CUDA Toolkit (12.x+) in /usr/local/cuda" >&2
    exit 1
  }
  cuda="CUDA compiler installed (Debian's nvidia-cuda-toolkit)"
else
  cuda="no CUDA compiler (nvcc) found, so the build will be host mode only; for GPU support"
  cuda+=" install NVIDIA's CUDA Toolkit in /usr/local/cuda, or run TANDEM_CUDA=ON $0 for"
  cuda+=" Debian's nvidia-cuda-toolkit (non-free)"
fi
echo "install-deps: all dependencies present; $cuda"
