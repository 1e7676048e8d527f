#!/usr/bin/env bash
# The two-GPU proof (docs/distributed.md, "Two GPUs"): FSDP2 + tandem.torch over NCCL on
# two local GPUs, from tests/python_dist/fsdp_worker.py (a small Llama-style model, the
# same seeded gradients on every rank, 20 steps, clipping at 1.0):
#   * offload fractions 0, 0.37 and 1 x offload_compute host / gpu / auto / 0.5: parameters
#     and norms bit-identical to the fraction-0 run;
#   * every rank's record (the worker writes one per rank): in every run, each rank's
#     gathered full parameters equal rank 0's, each rank's local shards equal its slice of
#     them, and (runs that must equal the base run, at 2 ranks) each rank's local shards
#     equal the same rank's shards of the base run, bit for bit;
#   * Tandem's clip norm against torch.nn.utils.clip_grad_norm_'s (float32 ulps);
#   * a NaN in rank 1's gradient at step 5: that step skipped, every other applied;
#   * DCP: saved at 2 ranks (step 10), loaded at 1 rank at another fraction (saved again
#     at step 15), loaded back at 2 ranks: each resumed run equal to the uninterrupted one;
#   * DCP through tandem.dcp's CRC32C writer and reader (--crc): saved at 2 ranks, one byte
#     flipped inside one stored item of a copy; loading the copy at 2 ranks must fail with
#     an error naming the file and the item, and the undamaged checkpoint must load at 2
#     ranks (another fraction) and resume bit-identically;
#   * compute-sanitizer racecheck on both ranks of a short run (GPUs only).
# Writes OUT/two_gpu_proof.json (and logs); needs tandem on PYTHONPATH and exits non-zero
# when a check fails.
#     PYTHONPATH=build/python bash bench/two_gpu_proof.sh OUT
# DEVICE=cpu runs every step but the racecheck on CPUs with gloo (default: cuda, NCCL):
#     DEVICE=cpu PYTHONPATH=build/python bash bench/two_gpu_proof.sh OUT
set -o pipefail
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
OUT=${1:?usage: [DEVICE=cpu] two_gpu_proof.sh OUT}
DEVICE=${DEVICE:-cuda}
case $DEVICE in cuda | cpu) ;; *) echo "DEVICE must be cuda or cpu, not $DEVICE" >&2; exit 2 ;; esac
mkdir -p "$OUT"
W="tests/python_dist/fsdp_worker.py --device $DEVICE --formats bf16+ecc8/q8/q8 --steps 20 --clip 1.0"
R=$(mktemp -d)
L=$OUT/runs.log
# run N ARGS...: one torchrun job of N ranks, logged to $LOG (default runs.log); returns
# the job's exit status.
run() {
  local n=$1 rc
  shift
  timeout 120 torchrun --nproc_per_node "$n" --master_port $((29500 + RANDOM % 1000)) $W "$@" \
    >> "${LOG:-$L}" 2>&1
  rc=$?
  echo "rc=$rc n=$n $*" | tee -a "$OUT/rcs.txt" "$R/rcs.txt"
  return $rc
}
run 2 --fraction 0 --out "$R/base.pt"
for f in 0.37 1; do
  for m in host gpu auto 0.5; do run 2 --fraction $f --offload-compute $m --out "$R/f${f}_$m.pt"; done
done
run 2 --fraction 0.37 --nan-rank 1 --nan-step 5 --out "$R/nan.pt"
run 2 --fraction 0.37 --save-at 10 --ckpt "$R/ck2" --out "$R/save2.pt"
run 1 --fraction 1 --load-from "$R/ck2" --first-step 10 --save-at 15 --ckpt "$R/ck1" --out "$R/load1.pt"
run 2 --fraction 0 --load-from "$R/ck1" --first-step 15 --out "$R/load2.pt"

# The CRC storage path: one byte flipped in the middle of rank 1's stored q8 momentum codes
# of up.weight (its record in the sidecar gives the file, offset and length), in a copy.
run 2 --fraction 0.37 --crc --save-at 10 --ckpt "$R/ckc" --out "$R/crc_save2.pt"
cp -r "$R/ckc" "$R/ckc_damaged"
python3 - "$R/ckc_damaged" "$R/damage.json" <<'PY'
import json, os, sys
path, out = sys.argv[1], sys.argv[2]
fqn = "optim.state.up.weight.m_codes"
with open(os.path.join(path, ".metadata.crc32c")) as f:
    (r,) = [r for r in json.load(f)["records"] if r["fqn"] == fqn and r["file"].startswith("__1_")]
at = r["offset"] + r["length"] // 2
with open(os.path.join(path, r["file"]), "r+b") as f:
    f.seek(at)
    b = f.read(1)
    f.seek(at)
    f.write(bytes([b[0] ^ 0x10]))
json.dump(dict(file=os.path.join(path, r["file"]), item=fqn, byte=at,
               item_bytes=[r["offset"], r["offset"] + r["length"]]), open(out, "w"))
print("flipped byte %d of %s (item %s)" % (at, r["file"], fqn))
PY
LOG=$OUT/crc_damaged.log run 2 --fraction 1 --crc --load-from "$R/ckc_damaged" --first-step 10 \
  --out "$R/crc_damaged.pt"
CRC_RC=$?
grep -m 2 "CRC32C mismatch" "$OUT/crc_damaged.log"
run 2 --fraction 1 --crc --load-from "$R/ckc" --first-step 10 --out "$R/crc_load2.pt"

python3 - "$R" "$OUT/two_gpu_proof.json" "$DEVICE" "$CRC_RC" "$OUT/crc_damaged.log" "$SECONDS" <<'PY'
import json, os, struct, sys
import torch
R, out, device, crc_rc, crc_log, seconds = sys.argv[1:]


def ld(name, rank=0):
    """The record `rank` wrote for run `name`, or None where it is missing."""
    p = os.path.join(R, name + ".pt" + ("" if rank == 0 else ".rank%d" % rank))
    return torch.load(p, weights_only=False) if os.path.exists(p) else None


bits = lambda t: t.view(torch.uint8) if t.dtype != torch.uint8 else t
same = lambda a, b: a.keys() == b.keys() and all(
    a[k].shape == b[k].shape and torch.equal(bits(a[k]), bits(b[k])) for k in a)
f32 = lambda x: struct.unpack("<i", struct.pack("<f", x))[0]


def ranks_of(name):
    first = ld(name)
    return [first] + [ld(name, r) for r in range(1, first["world"])] if first else [None]


def own_slice(full, rank, world):
    """FSDP2's Shard(0) of `full` for `rank`: torch.chunk's piece (empty past the last)."""
    pieces = {k: torch.chunk(v, world, dim=0) for k, v in full.items()}
    return {k: p[rank] if rank < len(p) else full[k][0:0] for k, p in pieces.items()}


sys.path.insert(0, "bench")
from bench_args import git_commit, utc_now

base = ranks_of("base")
res = {"benchmark": "two_gpu_proof",
       "command": ("DEVICE=cpu " if device == "cpu" else "")
       + "PYTHONPATH=build/python bash bench/two_gpu_proof.sh OUT",
       "commit": git_commit(), "date": utc_now(), "device": device,
       "world": base[0]["world"], "runs": {}}
f_runs = ["f%s_%s" % (f, m) for f in ("0.37", "1") for m in ("host", "gpu", "auto", "0.5")]
for name in f_runs:
    r = ld(name)
    res["runs"][name] = dict(
        params_equal_base=r is not None and same(r["params"], base[0]["params"]),
        norms_equal_base=r is not None and r["norms"] == base[0]["norms"])
# Each step's norm three ways: Tandem's (exact sum of squares), clip_grad_norm_'s (float32
# sums), and a float64 reference from the worker's seeded gradients (every float32 square
# is exact in float64), to tell whose rounding a difference is.
sys.path.insert(0, "tests/python_dist")
from fsdp_worker import given_grad


def reference_norm(step):
    return sum(float(given_grad(n, p.shape, p.dtype, step).double().square().sum())
               for n, p in base[0]["params"].items()) ** 0.5


res["clip_norm_vs_torch"] = [
    dict(tandem=a, torch=b, float32_ulps=abs(f32(a) - f32(b)), reference=c,
         tandem_vs_reference_float32_ulps=abs(f32(a) - f32(c)),
         torch_vs_reference_float32_ulps=abs(f32(b) - f32(c)))
    for a, b, c in zip(base[0]["norms"], base[0]["torch_norms"],
                       (reference_norm(s) for s in range(len(base[0]["norms"]))))]
res["max_float32_ulps"] = max(d["float32_ulps"] for d in res["clip_norm_vs_torch"])
res["max_tandem_vs_reference_float32_ulps"] = max(
    d["tandem_vs_reference_float32_ulps"] for d in res["clip_norm_vs_torch"])
res["max_torch_vs_reference_float32_ulps"] = max(
    d["torch_vs_reference_float32_ulps"] for d in res["clip_norm_vs_torch"])
# The target is 1 ulp of clip_grad_norm_ (issue, GPUs). On CPUs torch's float32 sums of
# squares land up to 2 ulps from the reference (tests/python_dist/test_fsdp.py allows an
# ulp or two) while Tandem's norm rounds to the reference's float32 exactly: 2 there.
res["float32_ulps_allowed"] = 1 if device == "cuda" else 2
nan = ld("nan")
res["nan_only_step5_skipped"] = nan is not None and nan["applied"] == [i != 5 for i in range(20)]
s2, l1, l2 = ld("save2"), ld("load1"), ld("load2")
res["dcp_save2_equal_base"] = s2 is not None and same(s2["params"], base[0]["params"])
res["dcp_load1_world"] = l1 and l1["world"]
res["dcp_load1_equal_base"] = (l1 is not None and l1["norms"] == base[0]["norms"][10:]
                               and same(l1["params"], base[0]["params"]))
res["dcp_2_to_1_to_2_equal_base"] = l2 is not None and same(l2["params"], base[0]["params"])

# Every rank of every run: gathered parameters equal rank 0's; local shards equal the
# rank's slice of them and, where the run must equal the base run at its world size,
# the same rank's shards of the base run.
equal_base = {"base", "save2", "load2", "load1", "crc_save2", "crc_load2"} | set(f_runs)
res["per_rank"] = {}
for name in ["base"] + f_runs + ["nan", "save2", "load1", "load2", "crc_save2", "crc_load2"]:
    recs = ranks_of(name)
    if any(r is None for r in recs):
        res["per_rank"][name] = dict(records_complete=False)
        continue
    world = recs[0]["world"]
    d = dict(ranks=len(recs), records_complete=True,
             params_equal_rank0=all(same(r["params"], recs[0]["params"]) for r in recs),
             local_equal_own_slice=all(same(r["local_params"], own_slice(r["params"], i, world))
                                       for i, r in enumerate(recs)))
    if name in equal_base and world == len(base):
        d["local_equal_base_rank"] = all(same(r["local_params"], base[i]["local_params"])
                                         for i, r in enumerate(recs))
    res["per_rank"][name] = d
res["bit_identical_on_every_rank"] = all(
    all(v for k, v in d.items() if k != "ranks") for d in res["per_rank"].values())

# The CRC storage path.
dmg = json.load(open(os.path.join(R, "damage.json")))
log = open(crc_log, errors="replace").read().splitlines()
named = [l for l in log if dmg["file"] + ": item " + dmg["item"] in l and "CRC32C mismatch" in l]
cs, cl = ld("crc_save2"), ld("crc_load2")
res["crc"] = dict(
    damaged_file=os.path.basename(dmg["file"]), damaged_item=dmg["item"],
    damaged_byte=dmg["byte"], item_bytes=dmg["item_bytes"],
    damaged_load_exit=int(crc_rc), damaged_load_failed=int(crc_rc) != 0,
    error_names_file_and_item=bool(named),
    ranks_reporting=sorted({int(l.split()[l.split().index("rank") + 1].rstrip(":"))
                            for l in named if "rank" in l.split()}),
    error=named[0][named[0].index(dmg["file"]):] if named else None,
    save2_equal_base=cs is not None and same(cs["params"], base[0]["params"]),
    undamaged_load2_equal_base=(cl is not None and cl["norms"] == base[0]["norms"][10:]
                                and same(cl["params"], base[0]["params"])))
c = res["crc"]
res["crc_damage_reported_by_file_and_item"] = (c["damaged_load_failed"]
                                               and c["error_names_file_and_item"]
                                               and c["ranks_reporting"] == [0, 1])
res["crc_undamaged_resume_equal_base"] = c["save2_equal_base"] and c["undamaged_load2_equal_base"]
# Every job but the damaged load must exit 0 (a rank that aborts after writing its record
# still fails the proof).
res["runs_exit_nonzero"] = [l.strip() for l in open(os.path.join(R, "rcs.txt"))
                            if not l.startswith("rc=0 ") and "ckc_damaged" not in l]
res["all_checks_pass"] = bool(
    all(all(v.values()) for v in res["runs"].values())
    and res["max_float32_ulps"] <= res["float32_ulps_allowed"]
    and res["max_tandem_vs_reference_float32_ulps"] == 0
    and res["nan_only_step5_skipped"] and res["dcp_save2_equal_base"]
    and res["dcp_load1_world"] == 1 and res["dcp_load1_equal_base"]
    and res["dcp_2_to_1_to_2_equal_base"] and res["bit_identical_on_every_rank"]
    and res["crc_damage_reported_by_file_and_item"] and res["crc_undamaged_resume_equal_base"]
    and not res["runs_exit_nonzero"])
res["runs_wall_s"] = int(seconds)
json.dump(res, open(out, "w"), indent=1)
for k, v in res.items():  # one line per key (per run for the nested tables)
    if k == "clip_norm_vs_torch":
        continue
    if k in ("runs", "per_rank"):
        for name, d in v.items():
            print("%s %s %s" % (k, name, json.dumps(d)))
    else:
        print("%s %s" % (k, json.dumps(v)))
sys.exit(0 if res["all_checks_pass"] else 1)
PY
CHECKS_RC=$?
if [ "$DEVICE" = cuda ]; then
  timeout 200 torchrun --nproc_per_node 2 --master_port 29911 --no-python compute-sanitizer --tool racecheck \
    --print-limit 5 python3 $W --steps 2 --fraction 1 --offload-compute gpu --out "$R/race.pt" > "$OUT/racecheck.txt" 2>&1
  echo "racecheck rc=$?"
  grep -E "RACECHECK SUMMARY" "$OUT/racecheck.txt"
else
  echo "racecheck: skipped (DEVICE=$DEVICE; compute-sanitizer needs GPUs)"
fi
echo "two_gpu_proof: checks $([ $CHECKS_RC = 0 ] && echo pass || echo FAIL), ${SECONDS} s"
exit $CHECKS_RC
