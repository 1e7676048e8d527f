#!/usr/bin/env bash
# The README's first command: installs dependencies, builds Release into build/, and runs
# the main job on the hardware present. Tests of a current PyTorch (tests/python_dist):
# scripts/make-torch-venv.sh once, then scripts/test.sh runs them (docs/building.md).
set -euo pipefail
source "$(dirname "$0")/env.sh"
"$TANDEM_ROOT/scripts/install-deps.sh"
configure_and_build "$TANDEM_ROOT/build" -DCMAKE_BUILD_TYPE=Release -DTANDEM_BUILD_PYTHON=ON
"$TANDEM_ROOT/scripts/main-job.sh"
