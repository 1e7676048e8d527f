"""The state dict of an optimizer over DTensor parameters (version 3), the layout
torch.distributed.checkpoint (DCP) saves, reshards and loads. docs/distributed.md.

Note [Sharded state dict]: DCP's ``get_optimizer_state_dict`` keeps only "state" and
"param_groups" of an optimizer's state dict (keyed by fully qualified parameter names),
so everything Tandem needs besides the arrays rides in each param group under "tandem".
``state[i]`` holds the tensor's step (a plain float tensor, the same on every rank) and
its snapshot arrays (the names of ``_arrays.NAMES``) as DTensors with the parameter's
mesh and placements and *global* shapes: the parameter's shape, and for q8 scales
``shape[:-1] + (K // 32,)`` (Note [Shard-safe quantization groups] in _dist.py), so that
DCP reshards codes, scales and corrections exactly at another world size. The local
shards are CPU tensors (a copy of the engine's state), never moved to the GPU.

Loading takes the arrays as DTensors of this optimizer's placements (what DCP fills in
place of the templates ``state_dict()`` gave it), or as whole tensors of the global
shape, of which each rank takes its shard. torch's load-time dtype cast never touches
them (Tandem loads them itself). Every field is checked before anything changes.
"""

from collections.abc import Mapping

import torch

from tandem import _arrays
from tandem import _dist
from tandem._state_common import (MAX_STEP, common_meta, integer, listing, need, plan_result,
                                  saved_bookkeeping, saved_param_groups, snapshot, step_value,
                                  torch_groups)

VERSION = 3
_DTYPES = {torch.float32: "f32", torch.bfloat16: "bf16", torch.float16: "f16"}


def state_dict(opt):
    """TandemOptimizer.state_dict for DTensor parameters (Note [Sharded state dict])."""
    snap = snapshot(opt)
    state = {}
    for k, t in enumerate(snap["tensors"]):
        p = opt._core.params[k]
        entry = {"step": torch.tensor(float(t["step"]))}
        # Every rank has every array, an empty shard too (its arrays are empty): DCP
        # needs the same keys on every rank.
        names = _arrays.expected(snap["algorithm"], opt._core.formats_of(k),
                                        snap["groups"][t["group"]], _dist.local(p).numel())
        for name in _arrays.NAMES:
            if name not in names:
                continue
            if name in t:
                a = torch.from_numpy(t[name]).contiguous()  # (fresh zeros come broadcast)
            else:
                a = torch.empty(0, dtype=_arrays.BITS[name])
            if name in _arrays.BF16:
                a = a.view(torch.bfloat16)
            a = a.reshape(_dist.array_shape(name, _dist.local(p).shape))
            entry[name] = _dist.wrap_like(a, p, _dist.array_shape(name, p.shape))
        state[opt._indices[k]] = entry
    meta = common_meta(opt, snap, VERSION)
    groups = torch_groups(opt)
    for g in groups:
        g["tandem"] = dict(meta)
    return {"state": state, "param_groups": groups}


def is_sharded_state_dict(sd):
    groups = sd.get("param_groups") if isinstance(sd, Mapping) else None
    return (isinstance(groups, (list, tuple)) and len(groups) > 0
            and isinstance(groups[0], Mapping) and "tandem" in groups[0])


def _shard_of(a, p, name, where):
    """The local shard (a CPU tensor) of saved array `a` for parameter p: a DTensor of p's
    placements gives its local tensor, a whole tensor its rows for this rank."""
    global_shape = _dist.array_shape(name, p.shape)
    if tuple(a.shape) != tuple(global_shape):
        raise ValueError("%s has shape %s, expected %s (the parameter's global shape %s)"
                         % (where, tuple(a.shape), tuple(global_shape), tuple(p.shape)))
    if _dist.is_dtensor(a):
        if not _dist.is_dtensor(p) or tuple(a.placements) != tuple(p.placements):
            raise ValueError("%s is a DTensor with placements %s; the parameter has %s"
                             % (where, tuple(a.placements),
                                tuple(getattr(p, "placements", ())) or "none"))
        return a._local_tensor.detach().cpu()
    if not _dist.is_dtensor(p) or _dist.shard_dim(p) is None:
        return a.detach().cpu()
    from torch.distributed.tensor._utils import compute_local_shape_and_global_offset
    shape, offset = compute_local_shape_and_global_offset(
        torch.Size(global_shape), p.device_mesh, p.placements)
    rows = slice(offset[0], offset[0] + shape[0]) if len(shape) else slice(None)
    return a.detach().cpu()[rows]


def plan_load(opt, sd):
    """Checks a version-3 state dict against the optimizer and returns what loading it
    sets: (engine snapshot dict, param group values, ref_group, lr_scales, engine_hyper).
    Raises ValueError naming the first bad field; changes nothing."""
    saved_groups = listing(need(sd, "param_groups", "state dict"),
                                "state dict['param_groups']", len(opt.param_groups))
    where = "state dict['param_groups'][0]['tandem']"
    meta = need(saved_groups[0], "tandem", "state dict['param_groups'][0]")
    version = need(meta, "version", where)
    if isinstance(version, bool) or version != VERSION:
        raise ValueError("unsupported sharded tandem state dict version %r (this build "
                         "reads %d)" % (version, VERSION))
    algorithm = need(meta, "algorithm", where)
    if algorithm != opt._ALGORITHM:
        raise ValueError("state dict algorithm %r but optimizer uses %r"
                         % (algorithm, opt._ALGORITHM))
    formats = tuple(need(meta, key, where) for key in ("master", "momentum",
                                                                "variance"))
    if formats != tuple(opt._core.formats):
        raise ValueError("state dict formats master=%s,m=%s,v=%s but optimizer uses "
                         "master=%s,m=%s,v=%s" % (formats + tuple(opt._core.formats)))
    step = integer(need(meta, "step", where), where + "['step']", 0,
                       MAX_STEP)
    keys = []  # torch index -> the saved state key (an int, or a name under DCP)

    def collect(saved, params, gw):
        del saved, gw
        keys.extend(params)

    groups, hypers = saved_param_groups(opt, sd, collect)
    for g in groups:
        g.pop("tandem", None)
    engine_groups, ref_group = saved_bookkeeping(meta, where, hypers)
    state = need(sd, "state", "state dict")
    if not isinstance(state, Mapping):
        raise ValueError("state dict['state'] must be a dict, got %s" % type(state).__name__)
    tensors = []
    for k, p in enumerate(opt._core.params):
        index = opt._indices[k]
        key = keys[index]
        ew = "state dict['state'][%r]" % (key,)
        if key not in state:
            raise ValueError("state dict has no state for parameter %r" % (key,))
        entry = state[key]
        if not isinstance(entry, Mapping):
            raise ValueError("%s must be a dict, got %s" % (ew, type(entry).__name__))
        n = _dist.local(p).numel()
        t = {"name": opt._core.names[k], "numel": n, "param_dtype": _DTYPES[p.dtype],
             "grad_dtype": _DTYPES[p.dtype], "group": opt._core.group_of[k],
             "shape": list(_dist.local(p).shape),
             "step": step_value(need(entry, "step", ew), ew + "['step']",
                                        step)}
        mine = opt._core.formats_of(k)
        if mine != tuple(opt._core.formats):
            t["formats"] = dict(zip(("master", "momentum", "variance"), mine))
        expected = _arrays.expected(algorithm, mine, engine_groups[t["group"]], n)
        for name in _arrays.NAMES:
            if name not in expected:
                if name in entry:
                    raise ValueError("%s has %r, which %s with master=%s,m=%s,v=%s does not "
                                     "keep" % ((ew, name, algorithm) + mine))
                continue
            a = need(entry, name, ew)
            aw = "%s[%r]" % (ew, name)
            if not torch.is_tensor(a):
                raise ValueError("%s must be a tensor, got %s" % (aw, type(a).__name__))
            if a.dtype != _arrays.TORCH[name]:
                raise ValueError("%s has dtype %s, expected %s"
                                 % (aw, a.dtype, _arrays.TORCH[name]))
            a = _shard_of(a, p, name, aw)
            if a.numel() != expected[name]:
                raise ValueError("%s has %d local elements, expected %d"
                                 % (aw, a.numel(), expected[name]))
            t[name] = _arrays.engine_array(name, a)
        tensors.append(t)
    return plan_result(algorithm, formats, step, engine_groups, tensors, groups,
                              ref_group)
