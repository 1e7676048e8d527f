"""Worker processes and shared data for test_dcp_crc.py (gloo on CPU).

The state dict is deterministic (random bytes from a fixed seed, every bit pattern of
each dtype), so every process and the test itself build the same full tensors; a
process shards them with ``distribute_tensor(..., Shard(0))`` over a 1-D CPU mesh.
Workers assert; torch.multiprocessing re-raises a worker's failure in the test.
"""

import os

import torch
import torch.distributed as dist
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.tensor import DTensor, Shard, distribute_tensor

import tandem.dcp

# 7 rows: uneven on 2 ranks (4 + 3) and on 3 ranks (3 + 3 + 1).
ROWS = 7
# The item the damage tests flip a byte in (nested: DCP names it with dots).
DAMAGED_FQN = "optim.state.layers.0.weight.exp_avg"
SENTINEL_BYTE = 0x5A


def _random(shape, dtype, seed):
    """A tensor of `shape` and `dtype` holding random bytes (any bit pattern)."""
    g = torch.Generator().manual_seed(seed)
    n = 1
    for s in shape:
        n *= s
    n *= torch.empty((), dtype=dtype).element_size()
    raw = torch.randint(0, 256, (n,), dtype=torch.uint8, generator=g)
    return raw.view(dtype).reshape(shape)


def full_state():
    """The full (unsharded) tensors of the test's state dict, nested as saved."""
    return {
        "model": {
            "w": _random((ROWS, 5), torch.float32, 1),
            "b": _random((ROWS, 3), torch.bfloat16, 2),
            "codes": _random((ROWS, 4), torch.uint8, 3),
        },
        "optim": {
            "state": {
                "layers.0.weight": {
                    "exp_avg": _random((ROWS, 5), torch.float32, 4),
                    "q": _random((ROWS,), torch.int8, 5),
                }
            }
        },
    }


def map_tensors(fn, tree):
    if isinstance(tree, dict):
        return {k: map_tensors(fn, v) for k, v in tree.items()}
    return fn(tree)


def leaves(tree, prefix=""):
    """(dotted name, tensor) pairs of a nested dict, in a fixed order."""
    out = []
    for k in sorted(tree):
        v = tree[k]
        name = f"{prefix}{k}"
        if isinstance(v, dict):
            out += leaves(v, name + ".")
        else:
            out.append((name, v))
    return out


def same_bits(a, b):
    """Whether two tensors have the same dtype, shape and bytes (NaNs included)."""
    if a.dtype != b.dtype or a.shape != b.shape:
        return False
    return torch.equal(a.contiguous().view(torch.uint8), b.contiguous().view(torch.uint8))


def sentinel_like(t):
    s = torch.empty_like(t)
    s.view(torch.uint8).fill_(SENTINEL_BYTE)
    return s


def _init(rank, world, init_file):
    torch.set_num_threads(1)
    dist.init_process_group(
        "gloo", init_method=f"file://{init_file}", rank=rank, world_size=world
    )
    return init_device_mesh("cpu", (world,))


def _sharded(mesh, tree):
    return map_tensors(lambda t: distribute_tensor(t, mesh, [Shard(0)]), tree)


def save_worker(rank, world, init_file, targets):
    """Saves the sharded state dict to each (directory, writer kwargs) of `targets`."""
    mesh = _init(rank, world, init_file)
    try:
        state = _sharded(mesh, full_state())
        state["step"] = 11  # a non-tensor item (stored as bytes)
        for path, kwargs in targets:
            tandem.dcp.save(state, path, **kwargs)
    finally:
        dist.destroy_process_group()


def load_worker(rank, world, init_file, good_dirs, damaged_dir, damaged_file):
    """Loads every `good_dirs` checkpoint bit-identical; then expects the load of
    `damaged_dir` to raise CheckpointCorruptError naming `damaged_file` and
    DAMAGED_FQN on every rank, with this rank's destination shards unchanged."""
    mesh = _init(rank, world, init_file)
    try:
        full = full_state()
        for path in good_dirs:
            state = _sharded(mesh, map_tensors(sentinel_like, full))
            state["step"] = 0
            tandem.dcp.load(state, path)
            assert state["step"] == 11, (path, state["step"])
            expect = _sharded(mesh, full)
            for (name, got), (_, want) in zip(leaves(state["model"]), leaves(expect["model"])):
                assert same_bits(got.to_local(), want.to_local()), (path, name, rank)
            for (name, got), (_, want) in zip(leaves(state["optim"]), leaves(expect["optim"])):
                assert same_bits(got.to_local(), want.to_local()), (path, name, rank)

        if damaged_dir is not None:
            state = _sharded(mesh, map_tensors(sentinel_like, full))
            before = [(n, t.to_local().clone()) for n, t in leaves(state)]
            try:
                tandem.dcp.load(state, damaged_dir)
            except tandem.dcp.CheckpointCorruptError as e:
                msg = str(e)
                assert os.path.basename(damaged_file) in msg, msg
                assert DAMAGED_FQN in msg, msg
            else:
                raise AssertionError(f"rank {rank}: loading {damaged_dir} did not raise")
            for (name, was), (_, t) in zip(before, leaves(state)):
                assert isinstance(t, DTensor)
                assert same_bits(t.to_local(), was), (name, rank)
    finally:
        dist.destroy_process_group()


def save_local_worker(rank, world, init_file, path):
    """Each rank saves its own checkpoint (DCP without collectives: __<rank>.metadata)."""
    _init(rank, world, init_file)
    try:
        state = {"x": torch.full((3,), float(rank)), "step": rank}
        tandem.dcp.save(state, path, use_collectives=False)
    finally:
        dist.destroy_process_group()
