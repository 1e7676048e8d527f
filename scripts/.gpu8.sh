set -o pipefail; export PYTHONUNBUFFERED=1
t0=$(date +%s); el() { echo "[$(( $(date +%s) - t0 )) s] $*"; }
bash scripts/offline-build.sh .bundle /tmp/b -DTANDEM_BUILD_PYTHON=ON -DPython_EXECUTABLE=$(command -v python3) -DCMAKE_CUDA_ARCHITECTURES=90 -DTANDEM_TORCH_PYTHON=$(command -v python3) > $OUT/build.log 2>&1 || { tail -40 $OUT/build.log; exit 1; }
el build
PYTHONPATH=/tmp/b/python timeout 300 python3 -m pytest -q -x tests/python > $OUT/pytest_gpu.log 2>&1; el "pytest tests/python (GPU) rc=$? $(tail -1 $OUT/pytest_gpu.log)"
grep -E "^FAILED|Error" $OUT/pytest_gpu.log | head -5
for c in host gpu auto 0.5; do PYTHONPATH=/tmp/b/python timeout 120 torchrun --standalone --nproc_per_node 1 tests/python_dist/fsdp_worker.py --device cuda --formats bf16+ecc8/q8/q8 --steps 20 --clip 1.0 --fraction 1 --offload-compute $c --out $OUT/fsdp_$c.pt > $OUT/fsdp_$c.log 2>&1 || tail -5 $OUT/fsdp_$c.log; done
el "fsdp runs"
python3 -c "
import torch
names = ('host', 'gpu', 'auto', '0.5')
r = [torch.load('$OUT/fsdp_%s.pt' % c) for c in names]
same = all(torch.equal(r[0]['params'][k].view(-1).view(torch.uint8), x['params'][k].view(-1).view(torch.uint8)) for x in r[1:] for k in r[0]['params'])
print('FSDP2 world 1 NCCL, 20 steps, fraction 1, offload_compute host/gpu/auto/0.5 bit-identical:', same, '; norms equal:', all(x['norms'] == r[0]['norms'] for x in r), '; all applied:', all(all(x['applied']) for x in r))
"
timeout 200 /tmp/b/bench/hybrid/tandem-bench-construct --models llama3-8b --fractions 0.5 --compute 0 --fp32 --json $OUT/construct_fp32.json > $OUT/construct_fp32.txt 2>&1; el "construct fp32 rc=$?"; grep -v "^tandem:" $OUT/construct_fp32.txt | tail -5
