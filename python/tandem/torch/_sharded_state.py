"""The state dict of an optimizer over DTensor parameters (version 3), the layout
torch.distributed.checkpoint (DCP) saves, reshards and loads (docs/distributed.md).

Note [Sharded state dict]: DCP keeps only "state" and "param_groups" of an optimizer's
state dict (keyed by fully qualified parameter names), so everything Tandem needs besides
the arrays rides in each param group under "tandem". ``state[i]`` holds the tensor's step
(the same on every rank) and its arrays as DTensors with the parameter's mesh and
placements and *global* shapes (Note [Array shapes] in _core/state.py), so that DCP
reshards them exactly; their local shards are CPU tensors.
"""

import functools
from collections.abc import Mapping

import torch

from tandem._core import dist as _dist
from tandem._core.checks import mapping, need, step_value
from tandem._core.state import COMPONENTS, EngineState

VERSION = 3
_DTYPES = {torch.float32: "f32", torch.bfloat16: "bf16", torch.float16: "f16"}


def state_dict(opt, snap, meta, groups):
    """TandemOptimizer.state_dict for DTensor parameters from the engine's snapshot
    `snap`, the "tandem" entry `meta` and the torch param groups. Every rank has every
    array, an empty shard too: DCP needs the same keys on every rank."""
    entries = EngineState(opt._core).entries(snap, lambda k, a, values: _dist.wrap_like(
        a.tensor(values), opt._core.params[k], a.shape))
    state = {opt._layout.indices[k]: entry for k, entry in enumerate(entries)}
    for g in groups:
        g["tandem"] = dict(meta)
    return {"state": state, "param_groups": groups}


def is_sharded_state_dict(sd):
    groups = sd.get("param_groups") if isinstance(sd, Mapping) else None
    return (isinstance(groups, (list, tuple)) and len(groups) > 0
            and isinstance(groups[0], Mapping) and "tandem" in groups[0])


def _shard_of(engine, k, array, a, where):
    """The local shard (a CPU tensor) of saved array `a` (a DTensor of the parameter's
    placements, or a whole tensor) of tensor k. ValueError naming `where` for another
    shape or other placements."""
    p = engine.core.params[k]
    if tuple(a.shape) != array.shape:
        raise ValueError("%s has shape %s, expected %s (the parameter's global shape %s)"
                         % (where, tuple(a.shape), array.shape, tuple(p.shape)))
    if _dist.is_dtensor(a):
        if not _dist.is_dtensor(p) or tuple(a.placements) != tuple(p.placements):
            raise ValueError("%s is a DTensor with placements %s; the parameter has %s"
                             % (where, tuple(a.placements),
                                tuple(getattr(p, "placements", ())) or "none"))
        return a._local_tensor.detach().cpu()
    if not _dist.is_dtensor(p) or _dist.shard_dim(p) is None or not array.shape:
        return a.detach().cpu()
    row = engine.first_row(k)
    return a.detach().cpu()[row:row + array.local_shape[0]]


def tensors(opt, state, keys, engine_groups, step):
    """The engine snapshot's tensors from the entries `state` of a version-3 state dict
    (keys: each parameter's saved state key, by torch index), checked. Raises
    ValueError naming the first bad field."""
    engine = EngineState(opt._core)
    out = []
    for k, p in enumerate(opt._core.params):
        key = keys[opt._layout.indices[k]]
        ew = "state dict['state'][%r]" % (key,)
        if key not in state:
            raise ValueError("state dict has no state for parameter %r" % (key,))
        entry = mapping(state[key], ew)
        n = _dist.local(p).numel()
        t = {"name": opt._core.names[k], "numel": n, "param_dtype": _DTYPES[p.dtype],
             "grad_dtype": _DTYPES[p.dtype], "group": opt._core.group_of[k],
             "shape": list(_dist.local(p).shape),
             "step": step_value(need(entry, "step", ew), ew + "['step']", step)}
        mine = opt._core.formats_of(k)
        if mine != tuple(opt._core.formats):
            t["formats"] = dict(zip(COMPONENTS, mine))
        t.update(engine.read(k, entry, ew, engine_groups[t["group"]],
                             local=functools.partial(_shard_of, engine, k)))
        out.append(t)
    return out
