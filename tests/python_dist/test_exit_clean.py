"""A process that exits with a Tandem optimizer still alive exits cleanly (status 0, no
"terminate called"), whatever the engine's threads are doing then: the optimizer at
module level in a reference cycle (destroyed by the interpreter's final collection, or
never), in the middle of a speculative early start (the speculation worker busy, the
step never called), and after a normal run; and a deleted optimizer leaves no thread
behind (docs/distributed.md, "Exit").

Each case runs in a fresh interpreter (host mode, offload fraction 1, pinned to one
CPU, speculation on), several times, because an exit-time race shows only sometimes.
"""

import os
import subprocess
import sys

import pytest

torch = pytest.importorskip("torch")

RUNS = 2

SETUP = r"""
import gc, os, sys
import torch
import tandem.torch
torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(256, 512), torch.nn.Linear(512, 256))
opt = tandem.torch.AdamW(model.parameters(), lr=1e-3, offload_fraction=1.0,
                         chunk_elements=4096, speculative_early_start=True,
                         host_cpus=[sorted(os.sched_getaffinity(0))[0]])
model.opt = opt        # a reference cycle through the module
opt.model = model
def train(steps):
    for _ in range(steps):
        opt.begin_step()
        model(torch.randn(64, 256)).square().mean().backward()
        opt.step()
        opt.zero_grad()
def threads():
    return len(os.listdir("/proc/self/task"))
"""

CASES = {
    # Exit right after backward: the speculation worker is updating chunks.
    "mid_speculation": SETUP + "train(2)\nopt.begin_step()\n"
                              "model(torch.randn(64, 256)).square().mean().backward()\n"
                              "sys.exit(0)\n",
    # Exit with the optimizer alive in a cycle at module level.
    "alive_at_exit": SETUP + "train(3)\n",
    # An uncaught exception while the optimizer is alive (frames keep it).
    "exception_at_exit": SETUP + "train(1)\nopt.begin_step()\n"
                                 "model(torch.randn(64, 256)).square().mean().backward()\n"
                                 "raise SystemExit(3)\n",
    # Deleted and collected: no thread of the engine is left.
    "deleted": SETUP + "base = None\ngc.collect()\n"
                       "train(1)\nbusy = threads()\n"
                       "del model.opt, opt.model, opt\ngc.collect()\n"
                       "print('threads', busy, threads())\n",
}

EXPECTED = {"mid_speculation": 0, "alive_at_exit": 0, "exception_at_exit": 3, "deleted": 0}


@pytest.mark.parametrize("case", sorted(CASES))
def test_exit_is_clean(case):
    env = dict(os.environ, OMP_NUM_THREADS="1")
    for run in range(RUNS):
        p = subprocess.run([sys.executable, "-c", CASES[case]], capture_output=True,
                           text=True, timeout=300, env=env)
        assert p.returncode == EXPECTED[case], (case, run, p.returncode, p.stderr[-2000:])
        assert "terminate called" not in p.stderr, (case, run, p.stderr[-2000:])
        if case == "deleted":
            busy, after = map(int, p.stdout.split()[-2:])
            # Every thread the engine started (speculation worker, host stream device,
            # oneTBB arena) is gone once it is deleted; torch's own may stay.
            assert after < busy, p.stdout


# Note [Collectives at exit] (tandem/_core/dist.py): Tandem's one collective gathers into
# buffers that live as long as the engine, never left for a gloo thread to free at exit,
# and a process that used Tandem's collectives or DCP checkpoints gives the process
# group's threads the GIL before the interpreter finalizes. The two-rank loop that counts
# aborts is exit_loop.py (docs/distributed.md, "The abort at exit").
def test_the_collective_keeps_its_buffers_and_the_exit_is_guarded(tmp_path, monkeypatch):
    import torch.distributed as dist
    from tandem._core import dist as _dist
    dist.init_process_group("gloo", init_method="file://%s" % (tmp_path / "store"), rank=0,
                           world_size=1)
    try:
        seen = []
        real = dist.all_gather_into_tensor

        def record(out, inp, group=None, async_op=False):
            seen.append((out, inp))
            return real(out, inp, group=group, async_op=async_op)
        monkeypatch.setattr(dist, "all_gather_into_tensor", record)
        monkeypatch.setattr(_dist, "_exit_guarded", [])
        registered = []
        monkeypatch.setattr(_dist.atexit, "register", registered.append)
        combine = _dist.make_combine(dist.group.WORLD, torch.device("cpu"))
        assert registered == [_dist._release_the_gil_at_exit]
        digits = [3] + [0] * (_dist.EXACT_DIGITS - 1)
        assert combine(digits, 0) == (digits, 0)
        assert combine([5] + digits[1:], 1) == ([5] + digits[1:], 1)
        assert seen[0][0] is seen[1][0] and seen[0][1] is seen[1][1]  # the same buffers
        import tandem.dcp
        tandem.dcp.CrcFileSystemReader(str(tmp_path))
        assert registered == [_dist._release_the_gil_at_exit]  # once per process
    finally:
        dist.destroy_process_group()
