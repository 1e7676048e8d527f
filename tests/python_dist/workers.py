"""Starts a test worker under torchrun on CPUs (gloo) and reads what its ranks wrote."""

import os
import subprocess
import sys

import torch


def run_worker(worker, tmp, name, nproc, *args):
    """Runs `worker` on `nproc` processes with ``--out <tmp>/<name>.pt`` and `args`;
    returns every rank's record (rank 0 writes --out, rank r ``<out>.rank<r>``, as
    fsdp_worker.record_path says). A failed run raises AssertionError with its stderr."""
    out = os.path.join(tmp, name + ".pt")
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone",
           "--nproc_per_node", str(nproc), worker, "--out", out] + [str(a) for a in args]
    env = dict(os.environ, OMP_NUM_THREADS="1")
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300)
    if proc.returncode != 0:
        raise AssertionError("%s failed (%d):\n%s" % (" ".join(cmd), proc.returncode,
                                                      proc.stderr[-4000:]))
    return [torch.load(out if r == 0 else "%s.rank%d" % (out, r)) for r in range(nproc)]
