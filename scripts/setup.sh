#!/usr/bin/env bash
# The README's first command: installs dependencies, builds Release into build/, and runs
# the main job on the hardware present. The build fits the machine (gpu_build_args in
# env.sh): the CUDA code for the GPU present, its architecture only, or host mode only
# where there is no GPU (TANDEM_CUDA=ON builds the CUDA code anyway). Tests of a current
# PyTorch (tests/python_dist): scripts/make-torch-venv.sh once, then scripts/test.sh runs
# them (docs/building.md).
set -euo pipefail
source "$(dirname "$0")/env.sh"
mapfile -t cuda_args < <(gpu_build_args)
# Host mode only: install-deps then says so too, and CMake never looks for nvcc.
if [[ " ${cuda_args[*]-} " == *" -DTANDEM_CUDA=OFF "* ]]; then export TANDEM_CUDA=OFF; fi
"$TANDEM_ROOT/scripts/install-deps.sh"
configure_and_build "$TANDEM_ROOT/build" -DCMAKE_BUILD_TYPE=Release -DTANDEM_BUILD_PYTHON=ON \
  "${cuda_args[@]}"
"$TANDEM_ROOT/scripts/main-job.sh"
