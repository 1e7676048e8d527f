#!/usr/bin/env bash
# The aarch64 cross build (cmake/aarch64-linux-gnu.cmake; scripts/install-deps-aarch64.sh
# installs what it needs) and its host tests under QEMU user-mode emulation, twice:
#   QEMU_CPU=max           SVE on: the kernel tests run NEON and SVE at 128, 256 and 512
#                          bits (each test thread sets its vector length)
#   QEMU_CPU=max,sve=off   NEON only: what a CPU without SVE detects and runs
# Release, host mode (no CUDA). Only the suites below are built and run (the NEON-only
# pass only cpu_simd_tests, the suite whose results depend on the ISA), and not the
# parity tests that cannot differ on these ISAs (below): emulation is slow, and CI has
# about 10 minutes for this. The Python extension (tandem._C, against the arm64 Python
# headers in TANDEM_AARCH64_PREFIX) is built, so that it cannot rot; its tests run only
# with --python (below: about 10 minutes more on two cores, emulated torch). Left out:
# tandem-bench (it measures, which emulation cannot; its --base grace-hopper is tested
# natively) and the offload and node suites (the optimizer and CPU pinning over the
# kernels tested here: long under emulation). docs/building.md, "Arm (aarch64)", says
# what runs and how long it takes.
#   scripts/test-aarch64.sh [--python | --python-only] [cmake args...]
#     (nothing)      build in build-aarch64/, then both passes
#     --python       then also tests/python's host-mode subset (PYTHON_TESTS, below) on
#                    Debian's arm64 Python 3.11 from TANDEM_AARCH64_PREFIX, under
#                    qemu-aarch64 -L that prefix (QEMU_CPU=max), with PyPI's aarch64 wheels
#                    of torch (CPU) and what it and pytest need (PYTHON_WHEELS): downloaded
#                    once into build-aarch64/python-wheels (pip download), unpacked into
#                    build-aarch64/python-site
#     --python-only  build, then only that
set -euo pipefail
source "$(dirname "$0")/env.sh"
dir="$TANDEM_ROOT/build-aarch64"
python=none
case "${1:-}" in
  --python) python=also; shift ;;
  --python-only) python=only; shift ;;
esac
prefix=${TANDEM_AARCH64_PREFIX:-/opt/tandem-aarch64}
suites=(engine_tests cpu_simd_tests checkpoint_tests planner_tests tools_tests)
tools=(tandem-plan tandem-ckpt)
# The gtest suites by label; of the tools' command-line tests, one per kind of answer
# (a fit, the Grace-Hopper profile, a verdict that does not fit and what would, JSON).
labels="^($(IFS='|'; echo "${suites[*]}"))\$"
commands='^tandem_plan\.(fits|grace_hopper_profile|llama70b_no_release_text|hsdp_json)$'
# Left out of the kernel parity suite on aarch64 (TANDEM_AARCH64_EXCLUDE): EveryPairingMode
# (only the AVX-512 Ops pair groups; on NEON and SVE every pairing mode runs the loop
# that EveryCombination and ParamAliasesMasterBf16 run) and WithSoftwarePrefetch
# (prefetches are hints, which QEMU ignores; the loop around them is the same template
# code that x86 runs natively). Of the planner's, the four searches that run the whole
# plan hundreds of times (TANDEM_PLANNER_SEARCHES, scripts/env.sh: 440 of the SVE pass's
# 560 s of planner CPU time under QEMU): the other planner tests check its arithmetic.
# ctest names carry "  # GetParam() = ..." after the name.
exclude=${TANDEM_AARCH64_EXCLUDE:-"Parity\\.(EveryPairingMode|WithSoftwarePrefetch)/|$TANDEM_PLANNER_SEARCHES"}
cmake -S "$TANDEM_ROOT" -B "$dir" -G Ninja \
  -DCMAKE_TOOLCHAIN_FILE="$TANDEM_ROOT/cmake/aarch64-linux-gnu.cmake" -DTANDEM_CUDA=OFF \
  -DCMAKE_BUILD_TYPE=Release -DTANDEM_BUILD_PYTHON=ON -DTANDEM_BUILD_BENCH=OFF \
  -DTANDEM_AARCH64_PREFIX="$prefix" "$@" | { grep -E '^-- Tandem: ' || true; }
if [ "$python" = only ]; then
  cmake --build "$dir" -j "$JOBS" --target tandem_python
else
  cmake --build "$dir" -j "$JOBS" --target "${suites[@]}" "${tools[@]}" tandem_python
fi
# The exhaustive compander test takes a sample under emulation (codec_test.cc).
export TANDEM_EMULATED=1
# run_pass CPU LABELS [COMMANDS]: the suites labelled LABELS and the command tests named
# COMMANDS under QEMU_CPU=CPU; fails if either run does.
run_pass() {
  local r=0
  QEMU_CPU=$1 ctest --test-dir "$dir" --output-on-failure -j "$JOBS" -L "$2" -E "$exclude" || r=1
  if [ -n "${3:-}" ]; then
    QEMU_CPU=$1 ctest --test-dir "$dir" --output-on-failure -j "$JOBS" -R "$3" || r=1
  fi
  return "$r"
}
# The wheels of the emulated Python run: torch's aarch64 wheel on PyPI runs on the CPU
# only (its CUDA dependencies are for x86-64), and pip cannot resolve another machine's
# dependencies (their markers are evaluated for this one), so all are named here.
PYTHON_WHEELS=(torch==2.6.0 numpy==2.4.6 filelock==4.3.1 typing-extensions==4.16.0
               networkx==3.6.1 jinja2==3.1.6 MarkupSafe==3.0.4 fsspec==2026.9.0
               sympy==1.13.1 mpmath==1.4.1 pytest==9.2.0 iniconfig==2.3.1 packaging==26.4
               pluggy==1.7.0 pygments==2.21.0)
# tests/python's files that run under emulation, host mode (the whole suite would take
# about an hour of CPU there): the binding's API and step inputs, exactness, torch.optim,
# state_dict, per-tensor formats, schedulers and checkpoint groups. Not test_plan.py:
# its searches and calibration take minutes there, and planner_tests runs the planner
# under emulation. None starts a subprocess (QEMU user mode does not follow an exec
# without binfmt_misc).
PYTHON_TESTS=(test_binding_api.py test_binding_step_inputs.py test_exact.py test_vs_torch.py
              test_state_dict.py test_tensor_formats.py test_schedulers.py
              test_checkpoint_groups.py)
# run_python: the arm64 interpreter runs PYTHON_TESTS with the wheels and build-aarch64/python.
run_python() {
  local wheels=$dir/python-wheels site=$dir/python-site py=$prefix/usr/bin/python3.11 t0
  [ -x "$py" ] || { echo "test-aarch64: no $py (scripts/install-deps-aarch64.sh)"; return 1; }
  local pip_python=python3  # Debian's python3-pip, else the venv's (scripts/make-torch-venv.sh)
  python3 -m pip --version >/dev/null 2>&1 || pip_python=$TANDEM_ROOT/.venv-torch/bin/python
  t0=$SECONDS
  # (again when the list changes: the site's stamp holds the list it was made from)
  if [ "$(cat "$site/.wheels" 2>/dev/null)" != "${PYTHON_WHEELS[*]}" ]; then
    rm -rf "$wheels"
    mkdir -p "$wheels"
    "$pip_python" -m pip download -q --no-deps --only-binary=:all: --platform manylinux_2_28_aarch64 \
      --platform manylinux2014_aarch64 --python-version 3.11 --implementation cp \
      --abi cp311 --abi none -d "$wheels" "${PYTHON_WHEELS[@]}" || return 1
    rm -rf "$site"
    mkdir -p "$site"
    local w
    for w in "$wheels"/*.whl; do python3 -m zipfile -e "$w" "$site" || return 1; done
    echo "${PYTHON_WHEELS[*]}" >"$site/.wheels"
  fi
  echo "test-aarch64: Python wheels ready in $((SECONDS - t0)) s"
  t0=$SECONDS
  (cd "$TANDEM_ROOT/tests/python" &&
   QEMU_CPU=max PYTHONPATH="$site:$dir/python" PYTHONDONTWRITEBYTECODE=1 \
   qemu-aarch64 -L "$prefix" "$py" -m pytest -q -rs -p no:cacheprovider "${PYTHON_TESTS[@]}")
  local r=$?
  echo "test-aarch64: Python tests under QEMU in $((SECONDS - t0)) s (exit $r)"
  return "$r"
}
rc=0
if [ "$python" = only ]; then
  run_python || rc=1
  exit "$rc"
fi
for cpu in max max,sve=off; do
  echo "test-aarch64: QEMU_CPU=$cpu"
  log="$dir/ctest-$cpu.log"
  if [ "$cpu" = max ]; then
    run_pass "$cpu" "$labels" "$commands" 2>&1 | tee "$log" || rc=1
  else
    run_pass "$cpu" '^cpu_simd_tests$' 2>&1 | tee "$log" || rc=1
  fi
  grep -E 'tests passed|tests failed' "$log" | sed "s/^/test-aarch64 (QEMU_CPU=$cpu): /"
done
if [ "$python" = also ]; then
  run_python || rc=1
fi
exit "$rc"
