"""DTensor parameters (FSDP2's ``fully_shard``, HSDP) in tandem.torch: what a shard is,
the one collective of a step, and the quantization-group rule. docs/distributed.md,
"The contract" and "Parameters on the host", explains each note.

Note [Sharded parameters]: a DTensor parameter's state covers its local shard
(``p._local_tensor``), which the engine updates in place, ordering the caller's current
stream after the update. Placements: ``Shard(0)`` on at most one mesh dimension and
``Replicate`` on the others (HSDP); shards may be uneven or empty.

Note [Parameters on the host]: FSDP2's ``CPUOffloadPolicy`` makes the local shards CPU
tensors of a CUDA mesh; the engine runs in host mode over them. The GPU still copies into
and out of the shards, so the step first waits for the device (``wait_copies``), a
gradient handed over during backward waits for its own copy (Note [Gradients copied to
the host] in copied_grads.py), and the collective runs where the group's backend wants
it (``collective_device``).

Note [One collective per step]: ``combine`` all-gathers each rank's exact sum of squared
gradients (Note [Exact sum of squares] in engine/exact_sum.h) and non-finite flag over
the *shard* mesh dimension (HSDP's replicas hold the same gradients) and adds them as
integers: every rank reaches the bits of a single process's norm and skip decision.

Note [Shard-safe quantization groups]: a ``Shard(0)`` boundary falls between rows, so a
tensor of two or more dimensions whose last is a multiple of 32 never splits a q8 group
(scales shaped ``shape[:-1] + (K // 32,)``); any other sharded tensor keeps its moments
in f32, decided from the global shape and placements only, never from the mesh. Plain
parameters keep the configured formats.
"""

import atexit
import sys
import time

import torch

from tandem import _C

QUANT_GROUP = _C.QUANT_GROUP  # elements per q8 scale (tandem/types.h)
EXACT_DIGITS = 16  # GradStats::exact


def dtensor_types():
    """(DTensor, Shard, Replicate) from torch.distributed.tensor, or None when this torch
    has no DTensor or the program has not imported it (then it holds no DTensor: a
    plain single-process run never pays for importing torch.distributed)."""
    for name in ("torch.distributed.tensor", "torch.distributed._tensor"):
        module = sys.modules.get(name)
        if module is not None and hasattr(module, "DTensor"):
            return module.DTensor, module.Shard, module.Replicate
    return None


# Plain tensors are no DTensor (a DTensor parameter's type is DTensor): the per-step
# calls on every parameter and gradient take this path without a module lookup.
_PLAIN = (torch.Tensor, torch.nn.Parameter)


def is_dtensor(t):
    if type(t) in _PLAIN:
        return False
    types = dtensor_types()
    return types is not None and isinstance(t, types[0])


def local(t):
    """The local tensor of a DTensor (sharing its storage), or t itself."""
    if type(t) in _PLAIN:
        return t
    return t._local_tensor if is_dtensor(t) else t


def shard_dim(p):
    """The mesh dimension that shards DTensor p (None when it is replicated on every
    mesh dimension). Raises ValueError for placements other than Shard(0)/Replicate or
    for more than one sharded mesh dimension."""
    _, Shard, Replicate = dtensor_types()
    dim = None
    for d, placement in enumerate(p.placements):
        if isinstance(placement, Replicate):
            continue
        if isinstance(placement, Shard) and placement.dim == 0:
            if dim is not None:
                raise ValueError("placements %s shard the tensor on two mesh dimensions; "
                                 "tandem.torch supports Shard(0) on one mesh dimension "
                                 "(FSDP2, HSDP)" % (tuple(p.placements),))
            dim = d
            continue
        raise ValueError("placement %r is not supported; tandem.torch steps Shard(0) and "
                         "Replicate placements (FSDP2's fully_shard, HSDP)" % (placement,))
    return dim


def replicated(p):
    """Whether tensor p is a DTensor replicated over a mesh dimension (HSDP's replicas)."""
    return is_dtensor(p) and any(isinstance(placement, dtensor_types()[2])
                                 for placement in p.placements)


def check_param(p, where):
    """Checks DTensor parameter p (Note [Sharded parameters]); returns its mesh
    signature (mesh, sharded mesh dimension) for check_same_mesh."""
    if host_shard(p) and p.device_mesh.device_type != "cuda":
        raise ValueError(
            "%s: this DTensor parameter lives on the CPU while its mesh is on %s; "
            "parameters on the host (FSDP2's CPUOffloadPolicy) are supported on CUDA "
            "meshes" % (where, p.device_mesh.device_type))
    try:
        dim = shard_dim(p)
    except ValueError as e:
        raise ValueError("%s: %s" % (where, e)) from None
    if not local(p).is_contiguous():
        raise ValueError("%s: the local shard is not contiguous" % where)
    return p.device_mesh, dim


def host_shard(p):
    """Whether DTensor p's local shard is in host memory while its mesh is on a device."""
    return p.device.type == "cpu" and p.device_mesh.device_type != "cpu"


def host_shards(params):
    """Whether `params` (of one mesh) are host shards of a device mesh."""
    return bool(params) and is_dtensor(params[0]) and host_shard(params[0])


def wait_copies(params):
    """When `params` are host shards of a CUDA mesh (Note [Parameters on the host]), waits
    until the current GPU has completed what is queued (no copy still writes a gradient
    or reads a shard). Returns None."""
    if torch.cuda.is_initialized() and host_shards(params):
        torch.cuda.synchronize()


def rank_device(param_groups):
    """The device this rank trains on (None: no parameter requires grad): the first
    such parameter's, or for a host shard (Note [Parameters on the host]) the current
    GPU of its mesh."""
    p = next((p for g in param_groups for p in g["params"] if p.requires_grad), None)
    if p is not None and host_shards([p]) and torch.cuda.is_available():
        return torch.device("cuda", torch.cuda.current_device())
    return p.device if p is not None else None


def check_same_mesh(signatures, labels):
    """Every DTensor parameter must live on one mesh and shard on one mesh dimension."""
    first = signatures[0]
    for sig, label in zip(signatures, labels):
        if sig[0] != first[0] or (sig[1] is not None and first[1] is not None
                                  and sig[1] != first[1]):
            raise ValueError("%s is on mesh %s (sharded on mesh dimension %s), the first "
                             "parameter on mesh %s (dimension %s); one optimizer steps the "
                             "parameters of one device mesh" % (label, sig[0], sig[1],
                                                                first[0], first[1]))


def shard_group(signatures):
    """The process group the partials are gathered over: the sharded mesh dimension's,
    or None when nothing is sharded (every rank holds whole tensors)."""
    dims = {sig[1] for sig in signatures if sig[1] is not None}
    return signatures[0][0].get_group(mesh_dim=dims.pop()) if dims else None


def make_combine(group, device):
    """StepOptions::combine_grad_stats over `group` (Note [One collective per step]): one
    all-gather of each rank's 16 32-bit digits and non-finite flag, added as integers."""
    import torch.distributed as dist
    world = dist.get_world_size(group)
    on = collective_device(str(dist.get_backend(group)), device)
    words = EXACT_DIGITS + 1
    # Note [Collectives at exit]: the buffers live as long as the optimizer's engine.
    mine = torch.zeros(words, dtype=torch.int64, device=on)
    every = torch.empty(world * words, dtype=torch.int64, device=on)
    guard_exit()

    def combine(digits, nonfinite):
        mine.copy_(torch.tensor(list(digits) + [int(nonfinite)], dtype=torch.int64))
        dist.all_gather_into_tensor(every, mine, group=group)
        total, bad = 0, 0
        for row in every.view(world, words).tolist():
            total += sum(d << (32 * k) for k, d in enumerate(row[:EXACT_DIGITS]))
            bad += row[EXACT_DIGITS]
        if total >> (32 * EXACT_DIGITS):
            raise RuntimeError("the gradient sum of squares overflowed 512 bits")
        return [(total >> (32 * k)) & 0xFFFFFFFF for k in range(EXACT_DIGITS)], bad

    return combine


# Note [Collectives at exit] (docs/distributed.md, "The abort at exit"): a gloo thread
# that frees a collective's tensors (taking the GIL) while the interpreter finalizes is
# ended inside that destructor: SIGABRT after the script's work. So Tandem's collective
# gathers into buffers that live as long as the engine, and a process that used Tandem's
# collectives or checkpoints gives those threads the GIL for a moment at exit (atexit).
EXIT_GRACE_S = 0.05
_exit_guarded = []


def guard_exit():
    """Registers, once per process, the exit pause of Note [Collectives at exit]."""
    if not _exit_guarded:
        _exit_guarded.append(True)
        atexit.register(_release_the_gil_at_exit)


def _release_the_gil_at_exit():
    time.sleep(EXIT_GRACE_S)


def collective_device(backend, device):
    """Where the step's all-gather runs for a group of `backend` when the parameters are
    on `device`: on their GPU under NCCL, on the CPU under gloo; host shards of an
    NCCL-only group (Note [Parameters on the host]) on the current GPU."""
    backend = backend.lower()
    if "nccl" in backend and device.type == "cuda":
        return device
    if "nccl" in backend and "gloo" not in backend:
        return torch.device("cuda", torch.cuda.current_device())
    return torch.device("cpu")


def group_safe(shape, sharded):
    """Whether q8 groups of a tensor of global `shape` survive any shard boundary
    (Note [Shard-safe quantization groups])."""
    return not sharded or (len(shape) >= 2 and shape[-1] % QUANT_GROUP == 0)


def tensor_formats(formats, shape, sharded):
    """The per-tensor formats override for the engine (a dict) or None: q8 moments become
    f32 where the group rule says so."""
    master, momentum, variance = formats
    if group_safe(shape, sharded) or "q8" not in (momentum, variance):
        return None
    return {"master": master, "momentum": "f32" if momentum == "q8" else momentum,
            "variance": "f32" if variance == "q8" else variance}


def wrap_like(local_tensor, p, shape):
    """A DTensor with p's mesh and placements, global `shape` (contiguous strides) and
    `local_tensor` as its local shard, wherever that lives (no copy; a CPU shard of a
    CUDA mesh stays on the CPU, as FSDP2's own CPU offload does)."""
    from torch.distributed.tensor import DTensor
    from torch.distributed.tensor._dtensor_spec import DTensorSpec, TensorMeta
    stride, acc = [], 1
    for d in reversed(shape):
        stride.append(acc)
        acc *= d
    meta = TensorMeta(torch.Size(shape), tuple(reversed(stride)), local_tensor.dtype)
    spec = DTensorSpec(p.device_mesh, tuple(p.placements), tensor_meta=meta)
    return DTensor(local_tensor, spec, requires_grad=False)
