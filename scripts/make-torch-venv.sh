#!/usr/bin/env bash
# Makes the Python environment of the tests that need a current PyTorch (tests/python_dist,
# ctest test `python_current_torch`): a venv made from Debian's /usr/bin/python3, so the
# extension built for that interpreter imports there too, holding the pinned versions
# below of PyTorch (FSDP2, DTensor, DCP; the PyPI wheel, which runs on the CPU and on
# NVIDIA GPUs), transformers, accelerate, pytest, numpy, megatron-core with psutil
# (its checkpoint code needs it; tandem.megatron's CPU tests), and the standalone
# megatron-fsdp package with einops (tests/python_mfsdp; its workers hide megatron-core
# from it, docs/megatron_fsdp.md).
#   scripts/make-torch-venv.sh [DIR]     default DIR: $TANDEM_ROOT/.venv-torch (gitignored)
# CMake uses $TANDEM_ROOT/.venv-torch/bin/python when it exists (cache variable
# TANDEM_TORCH_PYTHON picks another; docs/building.md). Idempotent: a venv that already
# holds the pinned versions is left alone. Needs python3-venv and access to PyPI (or a
# mirror: pip reads PIP_INDEX_URL); about 5 GB, most of it torch's CUDA libraries (the
# torch wheel on PyPI needs them to import, GPU or not). pip keeps no cache
# (--no-cache-dir); the script stops before pip, naming the directory, when the disk
# holding DIR or pip's temporary files ($TMPDIR) has less room than the install needs.
set -euo pipefail
source "$(dirname "$0")/env.sh"
dir=${1:-$TANDEM_ROOT/.venv-torch}
base=/usr/bin/python3
PINS=(torch==2.11.0 transformers==5.23.0 accelerate==1.15.0 pytest==9.2.0 numpy==2.4.6
      psutil==7.2.2 megatron-core==0.16.1 megatron-fsdp==0.6.1 einops==0.8.2)

# Exit 0 when python ($1) runs on the same X.Y as $base and has every pin installed.
has_pins() {
  "$1" - "$base" "${PINS[@]}" <<'EOF' 2>/dev/null
import importlib.metadata as md, subprocess, sys
base, pins = sys.argv[1], sys.argv[2:]
want = subprocess.run([base, "-c", "import sys; print(sys.version_info[:2])"],
                      capture_output=True, text=True, check=True).stdout.strip()
if str(sys.version_info[:2]) != want:
    sys.exit(1)
for pin in pins:
    name, version = pin.split("==")
    try:
        if md.version(name) != version:
            sys.exit(1)
    except md.PackageNotFoundError:
        sys.exit(1)
EOF
}

if [ -x "$dir/bin/python" ] && has_pins "$dir/bin/python"; then
  echo "make-torch-venv: $dir already holds ${PINS[*]}"
  exit 0
fi
[ -x "$base" ] || { echo "make-torch-venv: $base not found (Debian's python3)" >&2; exit 1; }
start=$SECONDS
if [ ! -x "$dir/bin/python" ]; then
  "$base" -m venv "$dir" || {
    echo "make-torch-venv: '$base -m venv $dir' failed; install python3-venv" >&2
    exit 1
  }
fi
# The venv plus the downloaded wheels at once, in MiB (measured: 4.9 GB + 2.6 GB).
need=8000
for d in "$(dirname "$dir")" "${TMPDIR:-/tmp}"; do
  have=$(df -Pm "$d" | awk 'NR == 2 { print $4 }')
  if [ "$have" -lt "$need" ]; then
    echo "make-torch-venv: $d has $have MiB free; installing ${PINS[*]} needs about" \
         "$need MiB there (free some room, or point TMPDIR / DIR at a larger disk)" >&2
    exit 1
  fi
done
"$dir/bin/python" -m pip install --quiet --disable-pip-version-check --no-cache-dir \
  "${PINS[@]}"
has_pins "$dir/bin/python" || {
  echo "make-torch-venv: $dir does not hold ${PINS[*]} after pip install (made from" \
       "another Python than $base? remove it and run again)" >&2
  exit 1
}
if [ "$dir" -ef "$TANDEM_ROOT/.venv-torch" ]; then
  next="CMake uses it from its next configure (scripts/test.sh configures)"
else
  next="configure with -DTANDEM_TORCH_PYTHON=$dir/bin/python to use it"
fi
echo "make-torch-venv: $dir holds ${PINS[*]} ($((SECONDS - start)) s); $next"
