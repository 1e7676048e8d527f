"""Runs many two-rank distributed jobs and counts the ranks that do not exit cleanly.

    python tests/python_dist/exit_loop.py --jobs 500 --parallel 8 --out DIR [--handler]
    python tests/python_dist/exit_loop.py --jobs 500 --parallel 1 --backend nccl --out DIR

Each job is what torchrun starts: two fresh interpreters running fsdp_worker.py, on CPUs
with gloo (--backend gloo, the default) or on GPUs 0 and 1 with NCCL (--backend nccl),
alternately a CRC save at fraction 1 (steps 0-3, saved after step 2) and a CRC load of
the save before it (steps 2-3), the configuration in which a rank was seen to abort after
its work ("terminate called without an active exception"). A job passes when both ranks
exit with status 0 and print no "terminate called". --handler preloads
terminate_handler.cc (built with g++ into DIR): an aborting rank prints its thread's
backtrace and has gdb write every thread's stack to DIR/gdb.PID.txt.

Writes DIR/progress.txt as it goes, DIR/failures.txt and the logs of each failed job,
and prints one line last: "N jobs, F failed, A aborts in S s". Exit status 1 if any job
failed. docs/distributed.md ("The abort at exit") gives the runs made with it.
"""

import argparse
import os
import random
import shutil
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor

HERE = os.path.dirname(os.path.abspath(__file__))


def build_handler(out):
    lib = os.path.join(out, "libterminate_handler.so")
    subprocess.run(["g++", "-shared", "-fPIC", "-O1", "-o", lib,
                    os.path.join(HERE, "terminate_handler.cc")], check=True)
    return lib


def job_args(i, ck):
    # Job i saves (even i) or loads what job i - 1 saved (odd i): the pair runs in one
    # task, in order (run_pair), and its checkpoint is removed after it.
    slot = f"{ck}.{i // 2}"
    if i % 2 == 0:
        return ["--crc", "--fraction", "1", "--steps", "4", "--save-at", "2", "--ckpt", slot]
    return ["--crc", "--fraction", "1", "--steps", "4", "--first-step", "2",
            "--load-from", slot]


def run_job(i, out, env_extra, device):
    port = str(20000 + random.randrange(20000))
    logs, procs = [], []
    for r in (0, 1):
        env = dict(os.environ, MASTER_ADDR="127.0.0.1", MASTER_PORT=port, RANK=str(r),
                   WORLD_SIZE="2", LOCAL_RANK=str(r), LOCAL_WORLD_SIZE="2", GROUP_RANK="0",
                   OMP_NUM_THREADS="1", **env_extra)
        log = os.path.join(out, f"job{i}.{r}.log")
        logs.append(log)
        with open(log, "w") as f:
            procs.append(subprocess.Popen(
                [sys.executable, os.path.join(HERE, "fsdp_worker.py"), "--device", device]
                + job_args(i, os.path.join(out, "ckpt"))
                + ["--out", os.path.join(out, f"o{i}.pt")],
                stdout=f, stderr=subprocess.STDOUT, env=env))
    codes = [p.wait() for p in procs]
    text = ""
    for log in logs:
        with open(log, errors="replace") as f:
            text += f.read()
    aborted = "terminate called" in text or "TERMHANDLER" in text
    ok = codes == [0, 0] and not aborted
    for path in (os.path.join(out, f"o{i}.pt"), os.path.join(out, f"o{i}.pt.rank1")):
        if os.path.exists(path):
            os.remove(path)
    if ok:
        for log in logs:
            os.remove(log)
    return ok, aborted, codes


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--jobs", type=int, default=500)
    ap.add_argument("--parallel", type=int, default=4, help="jobs at once (2 ranks each)")
    ap.add_argument("--out", required=True)
    ap.add_argument("--handler", action="store_true",
                    help="preload terminate_handler.cc (needs g++ and gdb)")
    ap.add_argument("--backend", choices=("gloo", "nccl"), default="gloo",
                    help="gloo on CPUs (default), or NCCL on GPUs 0 and 1")
    a = ap.parse_args()
    if a.jobs < 2 or a.jobs % 2:
        ap.error(f"--jobs must be an even number >= 2 (a save and its load), got {a.jobs}")
    if a.parallel < 1:
        ap.error(f"--parallel must be >= 1, got {a.parallel}")
    device = "cuda" if a.backend == "nccl" else "cpu"
    if device == "cuda":
        import torch
        if torch.cuda.device_count() < 2:
            print("exit_loop: --backend nccl needs two GPUs, this machine has %d; nothing run"
                  % torch.cuda.device_count())
            return 0
    start = time.monotonic()
    os.makedirs(a.out, exist_ok=True)
    env_extra = {"TERM_DIR": a.out}
    if a.handler:
        env_extra["LD_PRELOAD"] = build_handler(a.out)
    lock = threading.Lock()
    tally = {"done": 0, "failed": 0, "aborts": 0}

    def run_pair(k):
        for i in (2 * k, 2 * k + 1):
            ok, aborted, codes = run_job(i, a.out, env_extra, device)
            with lock:
                tally["done"] += 1
                if not ok:
                    tally["failed"] += 1
                    tally["aborts"] += aborted
                    with open(os.path.join(a.out, "failures.txt"), "a") as f:
                        f.write(f"job {i} ({' '.join(job_args(i, 'ckpt'))}): exit codes "
                                f"{codes}{', aborted' if aborted else ''}\n")
                with open(os.path.join(a.out, "progress.txt"), "w") as f:
                    f.write("%(done)d jobs, %(failed)d failed, %(aborts)d aborts\n" % tally)
        shutil.rmtree(os.path.join(a.out, f"ckpt.{k}"), ignore_errors=True)

    with ThreadPoolExecutor(a.parallel) as pool:
        list(pool.map(run_pair, range(a.jobs // 2)))
    print("%(done)d jobs, %(failed)d failed, %(aborts)d aborts" % tally
          + " in %.0f s (%s)" % (time.monotonic() - start, a.backend))
    return 1 if tally["failed"] else 0


if __name__ == "__main__":
    sys.exit(main())
