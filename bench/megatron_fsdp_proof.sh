#!/usr/bin/env bash
# The Megatron-FSDP proof on GPUs (docs/megatron_fsdp.md, "GPU proof"): a Megatron-Core GPT
# (tests/megatron/mfsdp_gpt.py: SwiGLU, bf16 weights, Megatron-FSDP optim_grads_params with
# fp32 main weights) at NPROC ranks (default 2) over NCCL, 20 steps, clipping at 1.0:
#   * Megatron's own optimizer (TE FusedAdam where installed, else its torch AdamW) against
#     tandem.megatron_fsdp at offload fractions 0, 0.5 (host compute), 0.5 (GPU compute)
#     and 1 with f32 state: losses within 2e-2 (tests/megatron/gpt_proof.py's tolerance),
#     and tandem's runs bit-identical to each other (losses and parameters); q8 moments
#     with a bf16+ecc8 master within 5e-2;
#   * an fsdp_dtensor checkpoint saved at NPROC ranks after 10 steps (gradients drawn per
#     step and parameter, the same at every world size) and loaded at NPROC/2 ranks (at
#     least 1) at another fraction: the resumed run's parameters bit-identical to the uninterrupted run's, the
#     loaded state equal to the saved one, Megatron's dummy step changing nothing;
#   * Megatron-FSDP with Megatron's HybridDeviceOptimizer (optimizer_cpu_offload, fraction
#     0.5): its losses and memory, or its error, recorded;
#   * the GPU memory (allocated after training, peak) and step time of every run;
#   * with a megatron-core whose DistributedDataParallelConfig sets Megatron-FSDP's main
#     weights' dtype and decoupled_grad (0.19.2; 0.16.1 has neither and these runs are
#     skipped, the JSON says so): gradients as decoupled_grad bit-identical to t0, and
#     bf16 main weights with decoupled_grad and a bf16+ecc8 master (no fp32 copy of the
#     weights) at fractions 0, 0.5 (host and GPU compute) and 1: bit-identical to each
#     other, Megatron's gradient norm at the first step that of Megatron's own run (it
#     reads the decoupled gradients), losses within 2e-2 of Megatron's own optimizer.
# Writes OUT/megatron_fsdp_proof.json and OUT/megatron_fsdp_proof.txt (the table), the
# workers' logs in OUT; exits non-zero when a check fails.
#     PYTHONPATH=build/python bash bench/megatron_fsdp_proof.sh OUT [NPROC]
# MODEL_ARGS=... sets the model's size (below).
# DEVICE=cpu runs the same jobs on CPUs with gloo, with the tests' tiny model and 6 steps
# (a check of this script; HybridDeviceOptimizer fails there and is recorded so).
set -o pipefail
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
OUT=${1:?usage: megatron_fsdp_proof.sh OUT [NPROC]}
N=${2:-2}
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
DEVICE=${DEVICE:-cuda}
case $DEVICE in
  cuda) MODEL="--layers 4 --hidden 256 --heads 8 --ffn 512 --vocab 1024 --seq 128 --micro-batch 4"
        STEPS=20 SAVE=10 ;;
  cpu) MODEL="" STEPS=6 SAVE=3 ;;
  *) echo "DEVICE must be cuda or cpu, not $DEVICE" >&2; exit 2 ;;
esac
# MODEL_ARGS replaces the model's size (a larger one for the memory table, e.g. "--layers 8
# --hidden 2048 --heads 16 --ffn 5632 --vocab 32000 --seq 1024 --micro-batch 2").
MODEL=${MODEL_ARGS:-$MODEL}
SEEDED="grads=seeded,clip=0"
BF16="main=bf16,decoupled=1,formats=bf16+ecc8/f32/f32"
# Megatron-FSDP's main-weight dtype and decoupled_grad: megatron-core 0.19.2, not 0.16.1.
if "${PYTHON:-python3}" -c "
import sys, warnings
warnings.simplefilter('ignore')
from megatron.core.distributed import DistributedDataParallelConfig as C
sys.exit(0 if 'megatron_fsdp_use_decoupled_grad' in C.__dataclass_fields__ else 1)" 2>/dev/null
then
  BF16_RUNS=(--train dec,tandem,decoupled=1 --train b0,tandem,fraction=0,$BF16
             --train b5h,tandem,fraction=0.5,compute=host,$BF16
             --train b5g,tandem,fraction=0.5,compute=gpu,$BF16
             --train b1,tandem,fraction=1,compute=gpu,$BF16)
else
  BF16_RUNS=()
fi
# job NAME NPROC ARGS...: one torchrun job of the worker, its output in OUT/NAME.
job() {
  local name=$1 n=$2
  shift 2
  timeout 900 torchrun --standalone --nproc_per_node "$n" tests/megatron/mfsdp_gpt.py \
    --device "$DEVICE" --steps $STEPS $MODEL --out "$OUT/$name" "$@" > "$OUT/$name.log" 2>&1
  echo "$name: exit $? ($n ranks)" | tee -a "$OUT/jobs.txt"
}
: > "$OUT/jobs.txt"
job compare "$N" --train base,megatron --train t0,tandem,fraction=0 \
  --train t5h,tandem,fraction=0.5,compute=host --train t5g,tandem,fraction=0.5,compute=gpu \
  --train t1,tandem,fraction=1,compute=gpu \
  --train q8,tandem,fraction=0.5,formats=bf16+ecc8/q8/q8 \
  --train saved,tandem,fraction=0.5,$SEEDED,save=$SAVE "${BF16_RUNS[@]}"
job resume $(( N / 2 > 0 ? N / 2 : 1 )) --train resumed,tandem,fraction=1,compute=gpu,$SEEDED,load="$OUT/compare/saved"
job hdo "$N" --train hdo,hdo,fraction=0.5

"${PYTHON:-python3}" - "$OUT" "$N" "$SECONDS" "$SAVE" "$DEVICE" <<'PY'
import json, os, re, sys
import torch
out, nproc, seconds, save, device = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), \
    int(sys.argv[4]), sys.argv[5]
sys.path.insert(0, "bench")
from bench_args import git_commit, utc_now


def result(job):
    path = os.path.join(out, job, "result.json")
    return json.load(open(path)) if os.path.exists(path) else {"runs": {}, "errors": ["no result"]}


def tensors(job, name):
    path = os.path.join(out, job, name + ".pt")
    return torch.load(path, weights_only=False) if os.path.exists(path) else {}


bits = lambda t: t.reshape(-1).view(torch.uint8)
same = lambda a, b: bool(a) and a.keys() == b.keys() and all(
    torch.equal(bits(a[k]), bits(b[k])) for k in a)
rel = lambda a, b: max(abs(x - y) / max(abs(y), 1e-12) for x, y in zip(a, b)) \
    if a and b and len(a) == len(b) else float("inf")

compare, resume, hdo = result("compare"), result("resume"), result("hdo")
runs = compare["runs"]
loss = lambda name: runs.get(name, {}).get("losses")
checks = {"compare_ran": not compare["errors"], "resume_ran": not resume["errors"]}
for name in ("t5h", "t5g", "t1"):
    checks[name + "_bits_equal_t0"] = loss(name) == loss("t0") and same(
        tensors("compare", name).get("params"), tensors("compare", "t0").get("params"))
checks["t0_losses_vs_megatron"] = rel(loss("t0"), loss("base")) <= 2e-2
checks["q8_losses_vs_megatron"] = rel(loss("q8"), loss("base")) <= 5e-2
saved, resumed = tensors("compare", "saved"), tensors("resume", "resumed")
checks["resume_state_equal_saved"] = same(saved.get("saved_state"), resumed.get("loaded_state"))
checks["resume_params_bits_equal"] = same(saved.get("params"), resumed.get("params"))
r = resume["runs"].get("resumed", {})
checks["resume_first_step"] = r.get("first_step") == save
checks["dummy_step_changed_nothing"] = bool(r.get("load_checks", {}).get(
    "dummy_step_changed_nothing"))
checks["state_keys_identical"] = bool(runs.get("saved", {}).get("state_keys_identical"))
bf16_main = "b0" in runs
if bf16_main:
    norms = lambda name: runs.get(name, {}).get("grad_norms") or [0.0]
    checks["dec_bits_equal_t0"] = loss("dec") == loss("t0") and same(
        tensors("compare", "dec").get("params"), tensors("compare", "t0").get("params"))
    for name in ("b5h", "b5g", "b1"):
        checks[name + "_bits_equal_b0"] = loss(name) == loss("b0") and same(
            tensors("compare", name).get("params"), tensors("compare", "b0").get("params"))
    checks["b0_no_master_copy"] = runs["b0"].get("engine_memory", {}).get("master") == 0
    checks["b0_first_norm_is_megatrons"] = rel(norms("b0")[:1], norms("base")[:1]) <= 1e-5
    checks["b0_losses_vs_megatron"] = rel(loss("b0"), loss("base")) <= 2e-2

gib = lambda b: "%.3f" % (b / 2**30) if isinstance(b, (int, float)) else "-"
lines = ["Megatron-FSDP (Megatron-Core %s) with tandem.megatron_fsdp vs Megatron's own "
         "optimizer (%s), %d ranks, %s" % (compare.get("versions", {}).get("megatron.core"),
                                          runs.get("base", {}).get("inner_optimizer"), nproc,
                                          compare.get("gpu")),
         "commit %s, %s" % (git_commit(), utc_now()), "",
         "%-8s %10s %10s %10s %10s %10s" % ("run", "loss[-1]", "step ms", "GPU GiB",
                                           "peak GiB", "host GiB")]
everything = dict(runs, **resume["runs"], **hdo["runs"])
for name, run in everything.items():
    if run.get("error"):  # the exception's line
        last = [l for l in run["error"].splitlines()
                if re.match(r"[A-Za-z_][\w.]*(Error|Exception)\b", l)] or ["?"]
        lines.append("%-8s failed: %s" % (name, last[-1][:100]))
        continue
    host = run.get("engine_memory", {}).get("host_total")
    lines.append("%-8s %10.6f %10.1f %10s %10s %10s" % (
        name, run["losses"][-1], run.get("step_ms_median") or 0, gib(run.get(
            "gpu_allocated_bytes")), gib(run.get("gpu_peak_bytes")), gib(host)))
lines.append("")
lines += ["  %-32s %s" % (k, "ok" if v else "FAILED") for k, v in checks.items()]
text = "\n".join(lines)
print(text)
open(os.path.join(out, "megatron_fsdp_proof.txt"), "w").write(text + "\n")
json.dump({"benchmark": "megatron_fsdp_proof", "commit": git_commit(), "date": utc_now(),
           "command": ("DEVICE=cpu " if device == "cpu" else "")
           + "PYTHONPATH=build/python bash bench/megatron_fsdp_proof.sh OUT %d" % nproc,
           "device": device, "seconds": seconds, "checks": checks,
           "bf16_main_weights": "run" if bf16_main else "skipped: this megatron-core's "
           "DistributedDataParallelConfig has no megatron_fsdp_use_decoupled_grad",
           "jobs": {"compare": compare, "resume": resume, "hdo": hdo}},
          open(os.path.join(out, "megatron_fsdp_proof.json"), "w"), indent=1)
sys.exit(0 if all(checks.values()) else 1)
PY
