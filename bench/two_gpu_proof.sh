#!/usr/bin/env bash
# The two-GPU proof (docs/distributed.md, "Two GPUs"): FSDP2 + tandem.torch over NCCL on
# two local GPUs, from tests/python_dist/fsdp_worker.py (a small Llama-style model, the
# same seeded gradients on every rank, 20 steps, clipping at 1.0):
#   * offload fractions 0, 0.37 and 1 x offload_compute host / gpu / auto / 0.5: parameters
#     and norms bit-identical to the fraction-0 run;
#   * Tandem's clip norm against torch.nn.utils.clip_grad_norm_'s (float32 ulps);
#   * a NaN in rank 1's gradient at step 5: that step skipped, every other applied;
#   * DCP: saved at 2 ranks (step 10), loaded at 1 rank at another fraction (saved again
#     at step 15), loaded back at 2 ranks: each resumed run equal to the uninterrupted one;
#   * compute-sanitizer racecheck on both ranks of a short run.
# Writes OUT/two_gpu_proof.json (and logs); needs tandem on PYTHONPATH.
#     PYTHONPATH=build/python bash bench/two_gpu_proof.sh OUT
set -o pipefail
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
OUT=${1:?usage: two_gpu_proof.sh OUT}
mkdir -p "$OUT"
W="tests/python_dist/fsdp_worker.py --device cuda --formats bf16+ecc8/q8/q8 --steps 20 --clip 1.0"
R=$(mktemp -d)
L=$OUT/runs.log
run() {
  local n=$1
  shift
  timeout 120 torchrun --nproc_per_node "$n" --master_port $((29500 + RANDOM % 1000)) $W "$@" >> "$L" 2>&1
  echo "rc=$? n=$n $*" | tee -a "$OUT/rcs.txt"
}
run 2 --fraction 0 --out "$R/base.pt"
for f in 0.37 1; do
  for m in host gpu auto 0.5; do run 2 --fraction $f --offload-compute $m --out "$R/f${f}_$m.pt"; done
done
run 2 --fraction 0.37 --nan-rank 1 --nan-step 5 --out "$R/nan.pt"
run 2 --fraction 0.37 --save-at 10 --ckpt "$R/ck2" --out "$R/save2.pt"
run 1 --fraction 1 --load-from "$R/ck2" --first-step 10 --save-at 15 --ckpt "$R/ck1" --out "$R/load1.pt"
run 2 --fraction 0 --load-from "$R/ck1" --first-step 15 --out "$R/load2.pt"
python3 - "$R" "$OUT/two_gpu_proof.json" <<'PY'
import glob, json, os, struct, sys
import torch
R, out = sys.argv[1], sys.argv[2]
ld = lambda n: torch.load(os.path.join(R, n), weights_only=False)
bits = lambda t: t.view(torch.uint8) if t.dtype != torch.uint8 else t
same = lambda a, b: a.keys() == b.keys() and all(torch.equal(bits(a[k]), bits(b[k])) for k in a)
f32 = lambda x: struct.unpack("<i", struct.pack("<f", x))[0]
base = ld("base.pt")
res = {"world": base["world"], "runs": {}}
for p in sorted(glob.glob(R + "/f*.pt")):
    r = torch.load(p, weights_only=False)
    res["runs"][os.path.basename(p)[:-3]] = dict(
        params_equal_base=same(r["params"], base["params"]), norms_equal_base=r["norms"] == base["norms"])
res["clip_norm_vs_torch"] = [dict(tandem=a, torch=b, float32_ulps=abs(f32(a) - f32(b)))
                             for a, b in zip(base["norms"], base["torch_norms"])]
res["max_float32_ulps"] = max(d["float32_ulps"] for d in res["clip_norm_vs_torch"])
nan = ld("nan.pt")
res["nan_only_step5_skipped"] = nan["applied"] == [i != 5 for i in range(20)]
l1 = ld("load1.pt")
res["dcp_save2_equal_base"] = same(ld("save2.pt")["params"], base["params"])
res["dcp_load1_world"] = l1["world"]
res["dcp_load1_equal_base"] = l1["norms"] == base["norms"][10:] and same(l1["params"], base["params"])
res["dcp_2_to_1_to_2_equal_base"] = same(ld("load2.pt")["params"], base["params"])
json.dump(res, open(out, "w"), indent=1)
print(json.dumps({k: v for k, v in res.items() if k != "clip_norm_vs_torch"}, indent=1))
PY
timeout 200 torchrun --nproc_per_node 2 --master_port 29911 --no-python compute-sanitizer --tool racecheck \
  --print-limit 5 python3 $W --steps 2 --fraction 1 --offload-compute gpu --out "$R/race.pt" > "$OUT/racecheck.txt" 2>&1
echo "racecheck rc=$?"
grep -E "RACECHECK SUMMARY" "$OUT/racecheck.txt"
