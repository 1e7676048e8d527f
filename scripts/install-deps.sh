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
mode=$(echo "${TANDEM_CUDA:-AUTO}" | tr '[:lower:]' '[:upper:]')
if command -v nvcc >/dev/null 2>&1 || [ -x /usr/local/cuda/bin/nvcc ]; then
  gpu="GPU support ON (CUDA compiler found)"
elif [ "$mode" = ON ]; then
  echo "install-deps: TANDEM_CUDA=ON and no nvcc found; trying Debian's" \
       "nvidia-cuda-toolkit (non-free)" >&2
  $SUDO apt-get install -y -qq nvidia-cuda-toolkit || {
    echo "install-deps: could not install a CUDA compiler: enable Debian's non-free" \
         "component or install NVIDIA's CUDA Toolkit (12.x+) in /usr/local/cuda" >&2
    exit 1
  }
  gpu="GPU support ON (Debian's nvidia-cuda-toolkit)"
else
  gpu="GPU support will be OFF: no CUDA compiler (nvcc) found; install NVIDIA's CUDA"
  gpu+=" Toolkit in /usr/local/cuda, or run TANDEM_CUDA=ON $0 for Debian's"
  gpu+=" nvidia-cuda-toolkit (non-free)"
fi
echo "install-deps: all dependencies present; $gpu"
