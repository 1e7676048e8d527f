"""TandemOptimizer's state_dict, load_state_dict, save_checkpoint and load_checkpoint
(docs/python.md, "State and checkpoints"); each takes the optimizer first. State dicts
are version 2 (1 still loads; DTensor parameters: version 3, _sharded_state.py);
checkpoint files carry the param_groups in their metadata (Note [Checkpoint metadata])."""

import json
import math
import numbers
import warnings

import numpy as np
import torch

from tandem._core import dist as _dist
from tandem._core.checks import MAX_STEP, integer, listing, mapping, need, real, step_value
from tandem._core.state import EngineState, require_checkpoint
from tandem.torch import _sharded_state
from tandem.torch._optim_state import (apply_groups, check_group_values, engine_groups_from,
                                       from_torch_state, saved_param_groups, torch_groups)

STATE_DICT_VERSION = 2
_READABLE_VERSIONS = (1, 2)
# Engine hyper-parameter fields (HyperParams in include/tandem/types.h), lr_scale aside.
HYPER_FIELDS = ("beta1", "beta2", "eps", "weight_decay", "momentum", "dampening",
                "nesterov")

# Note [Checkpoint metadata]: save_checkpoint stores, in the snapshot's metadata (kept
# verbatim by the checkpoint file), a JSON object tagged with this schema and version:
#   {"schema": METADATA_SCHEMA, "version": 2, "algorithm": ...,
#    "param_groups": [{key: value, ...} per group, "params" left out],
#    "group_sizes": [len(group["params"]) ...],
#    "ref_group": int, "lr_scales": [float ...]}   (the groups' reference lr ratios)
# Values are plain JSON, except that a tuple is {"$tuple": [...]}, a dict is
# {"$dict": [[key, value], ...]} and a non-finite float is {"$float": "nan"|"inf"|"-inf"},
# so that load_checkpoint gives back exactly what was saved (betas stay a tuple).
# Version 1 also held "engine_hyper", the hyper-parameters last handed to the engine: it
# is ignored on load (Note [One source of hyper-parameters] in _optim_state.py).
METADATA_SCHEMA = "tandem.torch.param_groups"
METADATA_VERSION = 2
_READABLE_METADATA = (1, 2)


def state_dict(opt):
    """TandemOptimizer.state_dict: see its docstring."""
    snap = opt._core.snapshot()
    meta = {"version": _sharded_state.VERSION if opt._core.sharded else STATE_DICT_VERSION,
            **{key: snap[key] for key in ("algorithm", "master", "momentum", "variance")},
            "step": int(snap["step"]),
            "engine_groups": engine_groups_from(opt._layout.engine_hyper, opt._layout.lr_scales),
            "ref_group": opt._layout.ref_group}
    if opt._core.sharded:
        return _sharded_state.state_dict(opt, snap, meta, torch_groups(opt))
    entries = EngineState(opt._core).entries(
        snap, lambda k, a, values: None if values is None else a.tensor(values).reshape(-1))
    state = {opt._layout.indices[k]: entry for k, entry in enumerate(entries)}
    meta["tensors"] = [{key: t[key] for key in ("name", "numel", "shape", "param_dtype",
                                                "grad_dtype", "group")}
                       for t in snap["tensors"]]
    return {"state": state, "param_groups": torch_groups(opt), "tandem": meta}


def load_state_dict(opt, sd):
    """TandemOptimizer.load_state_dict: see its docstring."""
    mapping(sd, "state dict")
    if not _sharded_state.is_sharded_state_dict(sd) and "tandem" not in sd:
        return from_torch_state(opt, sd)
    snap, groups, ref_group = _plan_load(opt, sd)
    unstepped = [k for k, t in enumerate(snap["tensors"]) if t["step"] == 0]
    _keeping_unstepped_weights(opt, lambda: opt._core.restore(snap), unstepped)
    apply_groups(opt, groups, ref_group, snap["groups"])


def _keeping_unstepped_weights(opt, load, unstepped=None):
    """Runs load() (a restore, which writes every master to its parameter), then puts
    back the weights of the parameters that have never been stepped and re-reads their
    masters from them. ``unstepped``: the engine tensors the load leaves at step 0, when
    known before it; otherwise every weight is kept aside (in host memory).

    Note [A never-stepped parameter keeps its weight]: until its first step a parameter
    holds the truth and its master is only its encoding, which can be coarser (an fp32
    weight under a bf16 master). Loading the optimizer's own state back must not round
    such weights, as torch.optim never writes weights on load: Accelerate's prepare
    round-trips state_dict/load_state_dict before training
    (tests/python_dist/test_hf_accelerate.py)."""
    if opt._core.formats[0] == "f32":  # encodes every parameter dtype exactly
        return load()
    kept = range(len(opt._core.params)) if unstepped is None else unstepped
    before = {k: _dist.local(opt._core.params[k]).detach().to("cpu", copy=True) for k in kept}
    result = load()
    unstepped = [k for k, s in enumerate(opt.tensor_step_counts()) if s == 0 and k in before]
    if unstepped:
        with opt._core.guard(), torch.no_grad():
            if opt._core.cuda:
                torch.cuda.synchronize(opt._core.device)  # the restore's writes are final
            for k in unstepped:
                _dist.local(opt._core.params[k]).data.copy_(before[k])  # .data: no version bump
        opt._core.reload(unstepped)
    return result


def _plan_load(opt, sd):
    """Checks every field of a tandem state dict (versions 1 to 3) against the optimizer
    and returns what loading it sets: (engine snapshot dict, param group values,
    ref_group). Raises ValueError naming the first bad field; changes nothing."""
    sharded = _sharded_state.is_sharded_state_dict(sd)
    if sharded:  # Note [Sharded state dict]
        saved = listing(need(sd, "param_groups", "state dict"), "state dict['param_groups']",
                        len(opt.param_groups))
        meta = need(saved[0], "tandem", "state dict['param_groups'][0]")
        where, kind, readable = ("state dict['param_groups'][0]['tandem']", "sharded tandem",
                                 (_sharded_state.VERSION,))
    else:
        meta = need(sd, "tandem", "state dict")
        where, kind, readable = "state dict['tandem']", "tandem", _READABLE_VERSIONS
    version = need(meta, "version", where)
    algorithm = _check_saved(opt, version, readable, meta, where,
                             "unsupported %s state dict" % kind, "state dict")
    formats = tuple(need(meta, key, where) for key in ("master", "momentum", "variance"))
    if formats != tuple(opt._core.formats):
        raise ValueError("state dict formats master=%s,m=%s,v=%s but optimizer uses "
                         "master=%s,m=%s,v=%s" % (formats + tuple(opt._core.formats)))
    step = integer(need(meta, "step", where), where + "['step']", 0, MAX_STEP)
    keys = []  # torch index -> the saved state key (an int, or a name under DCP)

    def check_params(saved, params, gw):
        if sharded:
            keys.extend(params)
            return
        for j, p in enumerate(params):
            integer(p, "%s['params'][%d]" % (gw, j))

    groups, hypers = saved_param_groups(opt, sd, check_params)
    for g in groups:
        g.pop("tandem", None)
    engine_groups, ref_group = _saved_bookkeeping(meta, where, hypers)
    if sharded:
        state = mapping(need(sd, "state", "state dict"), "state dict['state']")
        tensors = _sharded_state.tensors(opt, state, keys, engine_groups, step)
    else:
        tensors = _tensors(opt, sd, meta, where, version, engine_groups, step)
    snap = {"algorithm": algorithm, "master": formats[0], "momentum": formats[1],
            "variance": formats[2], "step": step, "groups": [dict(h) for h in engine_groups],
            "tensors": tensors, "metadata": ""}
    return snap, groups, ref_group


def _check_saved(opt, version, readable, meta, where, unsupported, saved):
    """`meta`'s algorithm, once `version` is one of `readable` and the algorithm the
    optimizer's; the ValueErrors begin with `unsupported` and `saved`."""
    if isinstance(version, bool) or version not in readable:
        raise ValueError("%s version %r (this build reads %s)"
                         % (unsupported, version, ", ".join(map(str, readable))))
    algorithm = need(meta, "algorithm", where)
    if algorithm != opt._ALGORITHM:
        raise ValueError("%s algorithm %r but optimizer uses %r"
                         % (saved, algorithm, opt._ALGORITHM))
    return algorithm


def _ref_group(meta, where, lr_scales):
    """`meta`'s ref_group, checked: a group whose lr_scale is 1."""
    ref_group = integer(need(meta, "ref_group", where), where + "['ref_group']", 0,
                        len(lr_scales) - 1)
    if float(lr_scales[ref_group]) != 1.0:
        raise ValueError("%s['ref_group'] is %d, whose lr_scale is %r (the reference "
                         "group's is 1)" % (where, ref_group, lr_scales[ref_group]))
    return ref_group


def _saved_bookkeeping(meta, where, hypers):
    """(engine groups, ref_group) a state dict's 'tandem' entry gives with the param
    groups' hyper-parameters `hypers`: its engine_groups are checked, and only their
    lr_scale is used (Note [One source of hyper-parameters])."""
    n_groups = len(hypers)
    saved = listing(need(meta, "engine_groups", where), where + "['engine_groups']", n_groups)
    for g, h in enumerate(saved):
        hw = "%s['engine_groups'][%d]" % (where, g)
        mapping(h, hw)
        for key in ("lr_scale",) + HYPER_FIELDS:
            need(h, key, hw)
        unknown = sorted(set(h) - set(("lr_scale",) + HYPER_FIELDS))
        if unknown:
            raise ValueError("%s has unknown key %r" % (hw, unknown[0]))
        for key in ("lr_scale",) + HYPER_FIELDS[:-1]:
            real(h[key], "%s[%r]" % (hw, key), lo=0.0 if key == "lr_scale" else None)
        if not isinstance(h["nesterov"], bool):
            raise ValueError("%s['nesterov'] must be a bool, got %r" % (hw, h["nesterov"]))
    lr_scales = [h["lr_scale"] for h in saved]
    return engine_groups_from(hypers, lr_scales), _ref_group(meta, where, lr_scales)


def _tensors(opt, sd, meta, where, version, engine_groups, step):
    """The engine snapshot's tensors of a version 1 or 2 state dict, checked."""
    infos = listing(need(meta, "tensors", where), where + "['tensors']", len(opt._core.params))
    state = mapping(need(sd, "state", "state dict"), "state dict['state']")
    engine = EngineState(opt._core)
    tensors = []
    for k, info in enumerate(infos):
        tw = "%s['tensors'][%d]" % (where, k)
        p = opt._core.params[k]
        t = {
            "name": need(info, "name", tw),
            "numel": integer(need(info, "numel", tw), tw + "['numel']", 0),
            "param_dtype": need(info, "param_dtype", tw),
            "grad_dtype": need(info, "grad_dtype", tw),
            "group": integer(need(info, "group", tw), tw + "['group']", 0,
                             len(engine_groups) - 1),
            "shape": [],
        }
        for key in ("name", "param_dtype", "grad_dtype"):
            if not isinstance(t[key], str):
                raise ValueError("%s[%r] must be a str, got %r" % (tw, key, t[key]))
        n = t["numel"]
        if n != p.numel():
            raise ValueError("%s: %d elements in the state dict, parameter %d has %d"
                             % (tw, n, opt._layout.indices[k], p.numel()))
        if version >= 2:
            shape = listing(need(info, "shape", tw), tw + "['shape']")
            dims = [integer(d, "%s['shape'][%d]" % (tw, i), 0) for i, d in enumerate(shape)]
            if dims and math.prod(dims) != n:
                raise ValueError("%s['shape'] is %s, whose product is not numel %d"
                                 % (tw, dims, n))
            t["shape"] = dims
        index = opt._layout.indices[k]
        if index not in state:
            raise ValueError("state dict has no state for parameter %d" % index)
        ew = "state dict['state'][%d]" % index
        entry = mapping(state[index], ew)
        t["step"] = (step_value(need(entry, "step", ew), ew + "['step']", step)
                     if version >= 2 else step)
        t.update(engine.read(k, entry, ew, engine_groups[t["group"]]))
        tensors.append(t)
    return tensors


def _encode(value, where):
    """One param_group value as JSON (Note [Checkpoint metadata]); ValueError for values
    JSON cannot carry without loss."""
    if value is None or isinstance(value, (bool, str)):
        return value
    if isinstance(value, numbers.Integral):
        return int(value)
    if isinstance(value, float):
        return value if math.isfinite(value) else {"$float": repr(value)}
    if isinstance(value, tuple):
        return {"$tuple": [_encode(v, "%s[%d]" % (where, i)) for i, v in enumerate(value)]}
    if isinstance(value, list):
        return [_encode(v, "%s[%d]" % (where, i)) for i, v in enumerate(value)]
    if isinstance(value, dict):
        return {"$dict": [[_encode(k, where + " key"), _encode(v, "%s[%r]" % (where, k))]
                          for k, v in value.items()]}
    if ((torch.is_tensor(value) and value.dim() == 0 and not value.is_complex())
            or (isinstance(value, np.generic) and not isinstance(value, np.complexfloating))):
        return _encode(value.item(), where)  # a 0-d tensor or numpy scalar: its value
    if isinstance(value, numbers.Real):
        return _encode(float(value), where)
    raise ValueError("%s: a %s cannot be stored in the checkpoint's metadata (JSON holds "
                     "None, bool, int, float, str, and lists, tuples and dicts of them; a "
                     "0-d tensor is stored as its number); convert or remove it before "
                     "save_checkpoint" % (where, type(value).__name__))


def _decode(value, where):
    if isinstance(value, list):
        return [_decode(v, where) for v in value]
    if isinstance(value, dict):
        if set(value) == {"$tuple"}:
            return tuple(_decode(v, where) for v in listing(value["$tuple"], where))
        if set(value) == {"$dict"}:
            return {_decode(k, where): _decode(v, where)
                    for k, v in (listing(kv, where, 2) for kv in listing(value["$dict"], where))}
        if set(value) == {"$float"} and value["$float"] in ("nan", "inf", "-inf"):
            return float(value["$float"])
        raise ValueError("%s: unknown tagged value %r" % (where, value))
    return value


def _metadata(opt):
    """The JSON metadata save_checkpoint stores (Note [Checkpoint metadata])."""
    groups = [{key: _encode(value, "param_groups[%d][%r]" % (g, key))
               for key, value in group.items() if key != "params"}
              for g, group in enumerate(opt.param_groups)]
    doc = {"schema": METADATA_SCHEMA, "version": METADATA_VERSION, "algorithm": opt._ALGORITHM,
           "param_groups": groups,
           "group_sizes": [len(group["params"]) for group in opt.param_groups],
           "ref_group": opt._layout.ref_group, "lr_scales": list(opt._layout.lr_scales)}
    return json.dumps(doc, allow_nan=False, sort_keys=True)


def _parse_metadata(opt, text, path):
    """(groups, ref_group, engine groups) from a checkpoint's metadata, or None for a
    file without tandem.torch metadata. Raises ValueError when it does not fit."""
    if not text:
        return None
    try:
        doc = json.loads(text)
    except ValueError:
        return None
    if not isinstance(doc, dict) or doc.get("schema") != METADATA_SCHEMA:
        return None
    where = "checkpoint '%s' metadata" % path
    _check_saved(opt, doc.get("version"), _READABLE_METADATA, doc, where,
                 where + ": unsupported", where + ":")
    n_groups = len(opt.param_groups)
    sizes = listing(need(doc, "group_sizes", where), where + "['group_sizes']", n_groups)
    for g, (size, group) in enumerate(zip(sizes, opt.param_groups)):
        if size != len(group["params"]):
            raise ValueError("%s: group %d has %r parameters, optimizer %d"
                             % (where, g, size, len(group["params"])))
    groups, hypers = [], []
    for g, saved in enumerate(listing(need(doc, "param_groups", where),
                                    where + "['param_groups']", n_groups)):
        gw = "%s['param_groups'][%d]" % (where, g)
        if not isinstance(saved, dict):
            raise ValueError("%s must be a dict" % gw)
        group = {key: _decode(value, "%s[%r]" % (gw, key)) for key, value in saved.items()}
        hypers.append(check_group_values(opt, group, gw))
        groups.append(group)
    lr_scales = [real(s, "%s['lr_scales'][%d]" % (where, g), lo=0.0) for g, s in
                 enumerate(listing(need(doc, "lr_scales", where), where + "['lr_scales']",
                                 n_groups))]
    return groups, _ref_group(doc, where, lr_scales), engine_groups_from(hypers, lr_scales)


def save_checkpoint(opt, path, compression="none", sync=True):
    """TandemOptimizer.save_checkpoint: see its docstring."""
    require_checkpoint()
    metadata = _metadata(opt)  # before any I/O: a value JSON cannot hold raises here
    with opt._core.guard():
        if opt._core.cuda:
            torch.cuda.synchronize(opt._core.device)
        opt._core.engine.save_checkpoint(str(path), compression, bool(sync), metadata)


def load_checkpoint(opt, path):
    """TandemOptimizer.load_checkpoint: see its docstring."""
    require_checkpoint()
    parsed = []

    def groups_for(metadata):
        # Runs after the file is verified and before anything changes: raising refuses it
        # (Note [One source of hyper-parameters]).
        parsed.append(_parse_metadata(opt, metadata, path))
        return opt._core.engine_groups() if parsed[0] is None else parsed[0][2]

    def load():
        with opt._core.guard():
            if opt._core.cuda:
                torch.cuda.synchronize(opt._core.device)
            opt._core.engine.load_checkpoint(str(path), groups_for)

    _keeping_unstepped_weights(opt, load)
    if parsed[0] is None:
        warnings.warn("checkpoint '%s' holds no tandem.torch param_groups (written by an "
                      "older tandem or another program): the optimizer keeps its own "
                      "param_groups and hyper-parameters" % (path,), stacklevel=4)
    else:
        apply_groups(opt, *parsed[0])
