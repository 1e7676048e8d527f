# Sourced by the other scripts: puts nvcc on PATH and picks the build directory.
if ! command -v nvcc >/dev/null 2>&1 && [ -x /usr/local/cuda/bin/nvcc ]; then
  export PATH=/usr/local/cuda/bin:$PATH
fi
TANDEM_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
JOBS=${JOBS:-$(nproc)}
# The planner's four searches that run the whole plan hundreds of times over models of
# tens of thousands of tensors: about three quarters of planner_tests' time natively, more
# under ASan or QEMU. The sanitizer pass and the emulated aarch64 pass leave them out (ctest -E):
# the Release pass runs them, and the other planner tests take the same code under
# ASan and on aarch64 (docs/building.md, "CI").
TANDEM_PLANNER_SEARCHES='^(PlanJson\.WrapperFields|PlanModels\.MixtureOfExpertsConfigPlans|Largest\.FindsTheMostLayersThatFit|PlanSvg\.LabelsDoNotOverlap)$'
# configure_and_build DIR [cmake args...]; TANDEM_CUDA=AUTO|ON|OFF in the environment
# becomes -DTANDEM_CUDA (docs/building.md). Only CMake's "Tandem:" status lines are shown
# (whether the build has GPU support, and why).
configure_and_build() {
  local dir=$1; shift
  cmake -S "$TANDEM_ROOT" -B "$dir" -G Ninja ${TANDEM_CUDA:+-DTANDEM_CUDA=$TANDEM_CUDA} "$@" |
    { grep -E '^-- Tandem: ' || true; }
  cmake --build "$dir" -j "$JOBS"
}
# summarize_tests DIR CTEST_LOG: one line from a ctest run (its stdout in CTEST_LOG): how
# many tests ran, passed and failed, and how many were skipped because they need a GPU
# (label "gpu"; their "SKIPPED: ... its N tests need a GPU" lines give the case counts).
summarize_tests() {
  local dir=$1 log=$2 total failed skipped gpu_names gpu=0 other=0 cases name
  total=$(sed -nE 's/.* tests? failed out of ([0-9]+).*/\1/p' "$log" | tail -1)
  failed=$(sed -nE 's/.* ([0-9]+) tests? failed out of .*/\1/p' "$log" | tail -1)
  [ -n "$total" ] || { echo "test.sh: no ctest summary in $log"; return 0; }
  # (before `ctest -N`, which rewrites LastTest.log)
  cases=$({ grep -ohE 'its [0-9]+ tests need a GPU' "$dir/Testing/Temporary/LastTest.log" || true; } |
          awk '{n += $2} END {print n + 0}')
  gpu_names=" $(ctest --test-dir "$dir" -N -L '^gpu$' | sed -nE 's/^ *Test +#[0-9]+: (.*)$/\1/p' | tr '\n' ' ')"
  skipped=$(sed -nE 's/^[[:space:]]*[0-9]+ - ([^ ]+) .*\((Skipped|Disabled|Not Run)\)$/\1/p' "$log")
  for name in $skipped; do
    if [[ "$gpu_names" == *" $name "* ]]; then gpu=$((gpu + 1)); else other=$((other + 1)); fi
  done
  local ran=$((total - gpu - other)) in_cases=""
  [ "$cases" -eq 0 ] || in_cases=" (suites of $cases test cases)"
  echo "test.sh: $ran of $total tests ran: $((ran - failed)) passed, $failed failed;" \
       "$gpu skipped because they need a GPU$in_cases; $other skipped for other reasons"
}
# gpu_build_args: the CMake arguments scripts/setup.sh adds for the GPUs of this machine,
# one per line (docs/building.md, "CUDA architectures"): with a GPU, its CUDA code for
# that GPU's architecture only (nvidia-smi's compute capability of each GPU, else CMake's
# "native"; CUDAARCHS, when set, chooses instead); without one, host mode only
# (-DTANDEM_CUDA=OFF) unless TANDEM_CUDA=ON asks for GPU support, which then builds
# CUDAARCHS or the build's default list. TANDEM_CUDA=OFF: host mode only. Says what it
# chose on stderr. (scripts/test.sh and .ci/run choose sm_90 themselves.)
gpu_build_args() {
  local mode caps
  mode=$(echo "${TANDEM_CUDA:-AUTO}" | tr '[:lower:]' '[:upper:]')
  if [ "$mode" = OFF ]; then
    echo "-DTANDEM_CUDA=OFF"
    echo "setup: TANDEM_CUDA=OFF: host mode only, no CUDA code is built" >&2
    return 0
  fi
  caps=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null |
         tr -d '. ' | grep -E '^[0-9]+$' | sort -un | paste -sd';' || true)
  if [ -z "$caps" ] && nvidia-smi -L 2>/dev/null | grep -q '^GPU '; then
    caps=native  # a driver too old for --query-gpu=compute_cap: CMake asks the GPUs
  fi
  if [ -n "$caps" ] && [ -n "${CUDAARCHS:-}" ]; then
    echo "setup: GPU found; CUDAARCHS=$CUDAARCHS chooses the CUDA architectures" >&2
  elif [ -n "$caps" ]; then
    echo "-DCMAKE_CUDA_ARCHITECTURES=$caps"
    echo "setup: GPU found: its CUDA code is built for architecture $caps only" >&2
  elif [ "$mode" = ON ]; then
    echo "setup: no GPU found; TANDEM_CUDA=ON: the CUDA code is built for" \
         "${CUDAARCHS:-the default architectures (docs/building.md)}" >&2
  else
    echo "-DTANDEM_CUDA=OFF"
    echo "setup: no GPU found (nvidia-smi): host mode only, no CUDA code is built;" \
         "TANDEM_CUDA=ON scripts/setup.sh builds it too (docs/building.md)" >&2
  fi
}
