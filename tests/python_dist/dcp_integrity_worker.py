"""Workers for test_dcp_integrity.py: gloo ranks on CPU (started by
torch.multiprocessing with fork) and the damage sweep (a subprocess: ``python
dcp_integrity_worker.py sweep CKPT OUT.json``).

Workers assert; torch.multiprocessing re-raises a worker's failure in the test.
"""

import json
import os
import resource
import sys
import time
import warnings

import torch
import torch.distributed as dist
from torch.distributed.checkpoint.api import CheckpointException

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import dcp_crc_worker as W  # noqa: E402
import tandem.dcp  # noqa: E402

# Headroom of address space over what the process has mapped when a limit is set: a
# load that asks for more fails with MemoryError instead of growing (the OOM the
# damaged .metadata caused before it was checked).
ADDRESS_HEADROOM = 1 << 30


def limit_address_space(headroom=ADDRESS_HEADROOM):
    """Caps this process's address space at what it maps now plus ``headroom``."""
    with open("/proc/self/statm") as f:
        mapped = int(f.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")
    resource.setrlimit(resource.RLIMIT_AS, (mapped + headroom, resource.RLIM_INFINITY))


class FailingWriter(tandem.dcp.CrcFileSystemWriter):
    """Fails on rank ``fail_rank`` after writing its data files (a rank that dies in
    the middle of a save)."""

    def __init__(self, path, fail_rank):
        super().__init__(path)
        self.fail_rank = fail_rank

    def write_data(self, plan, planner):
        if dist.get_rank() != self.fail_rank:
            return super().write_data(plan, planner)
        tandem.dcp.FileSystemWriter.write_data(self, plan, planner).wait()
        raise RuntimeError(f"rank {self.fail_rank} fails after writing its data (injected)")


def _state(mesh, step):
    state = W._sharded(mesh, W.full_state())
    state["step"] = step
    return state


def save_worker(rank, world, init_file, path, step, fail_rank=None):
    """Saves the sharded test state (``step`` as the non-tensor item) to ``path``; with
    ``fail_rank``, that rank fails after writing its data and the save must fail on
    every rank."""
    mesh = W._init(rank, world, init_file)
    try:
        state = _state(mesh, step)
        if fail_rank is None:
            tandem.dcp.save(state, path)
            return
        try:
            torch.distributed.checkpoint.save(state, storage_writer=FailingWriter(path, fail_rank))
        except CheckpointException as e:
            assert "injected" in str(e), e
        else:
            raise AssertionError(f"rank {rank}: the failing save did not fail")
    finally:
        dist.destroy_process_group()


def load_worker(rank, world, init_file, path, error, needles, step=None):
    """Loads ``path`` under an address-space limit. With ``error`` (a class name of
    tandem.dcp), the load must raise it with every needle in its message and leave this
    rank's tensors unchanged; otherwise it must load the test state saved at ``step``."""
    mesh = W._init(rank, world, init_file)
    try:
        state = W._sharded(mesh, W.map_tensors(W.sentinel_like, W.full_state()))
        state["step"] = -1
        before = [(n, t.to_local().clone()) for n, t in W.leaves({k: v for k, v in state.items() if k != "step"})]
        limit_address_space()
        if error is None:
            tandem.dcp.load(state, path)
            assert state["step"] == step, (rank, state["step"], step)
            want = W._sharded(mesh, W.full_state())
            for (name, got), (_, exp) in zip(W.leaves({k: state[k] for k in ("model", "optim")}), W.leaves(want)):
                assert W.same_bits(got.to_local(), exp.to_local()), (rank, name)
            return
        try:
            tandem.dcp.load(state, path)
        except getattr(tandem.dcp, error) as e:
            for needle in needles:
                assert needle in str(e), (rank, needle, str(e))
        else:
            raise AssertionError(f"rank {rank}: loading {path} did not raise {error}")
        for (name, was), (_, now) in zip(before, W.leaves({k: v for k, v in state.items() if k != "step"})):
            assert W.same_bits(now.to_local(), was), (rank, name)
        assert state["step"] == -1
    finally:
        dist.destroy_process_group()


def sweep(path, out):
    """Flips one bit of every byte of ``.metadata`` and of ``.metadata.crc32c`` of the
    checkpoint ``path``, in turn, and loads it each time (one process, no process
    group, under an address-space limit). Writes a JSON summary to ``out``: per file
    its bytes, how many loads were refused with CheckpointCorruptError naming the file,
    the others (as text), and the slowest load; the peak RSS of the process."""
    warnings.filterwarnings("ignore", "torch.distributed is disabled")
    targets = (".metadata", ".metadata.crc32c")
    full = W.full_state()
    fresh = W.map_tensors(W.sentinel_like, full)
    tandem.dcp.load(dict(W.map_tensors(lambda t: t.clone(), fresh), step=-1), path)  # warm
    rss_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    limit_address_space()
    report = {"files": {}}
    for name in targets:
        file = os.path.join(path, name)
        with open(file, "rb") as f:
            original = f.read()
        refused, other, slowest, total = 0, [], 0.0, 0.0
        for i in range(len(original)):
            damaged = bytearray(original)
            damaged[i] ^= 1 << (i % 8)
            with open(file, "wb") as f:
                f.write(damaged)
            state = dict(W.map_tensors(lambda t: t.clone(), fresh), step=-1)
            start = time.perf_counter()
            try:
                tandem.dcp.load(state, path)
                other.append(f"byte {i}: loaded")
            except tandem.dcp.CheckpointCorruptError as e:
                if name in str(e) and state["step"] == -1:
                    refused += 1
                else:
                    other.append(f"byte {i}: {e}")
            except Exception as e:  # noqa: BLE001: every other outcome is reported
                other.append(f"byte {i}: {type(e).__name__}: {e}")
            took = time.perf_counter() - start
            slowest, total = max(slowest, took), total + took
        with open(file, "wb") as f:
            f.write(original)
        report["files"][name] = {"bytes": len(original), "refused_named": refused,
                                 "other": other[:20], "other_count": len(other),
                                 "slowest_load_s": slowest,
                                 "mean_load_s": total / max(1, len(original))}
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    report["rss_kib_before"] = rss_before
    report["rss_kib_peak"] = rss
    # The undamaged checkpoint still loads.
    state = dict(W.map_tensors(lambda t: t.clone(), fresh), step=-1)
    tandem.dcp.load(state, path)
    report["intact_loads"] = state["step"] != -1
    with open(out, "w") as f:
        json.dump(report, f, indent=1)


if __name__ == "__main__":
    if sys.argv[1] == "sweep":
        sweep(sys.argv[2], sys.argv[3])
