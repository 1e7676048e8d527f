#!/usr/bin/env bash
# The main job: what Tandem does on this machine, from an existing build/.
set -euo pipefail
source "$(dirname "$0")/env.sh"
B="$TANDEM_ROOT/build"
"$B/tools/tandem-demo"
