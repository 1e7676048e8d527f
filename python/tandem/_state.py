"""The state of a tandem.torch optimizer, in and out.

* ``state_dict`` / ``load_state_dict``: the torch-shaped state dict with the engine's
  whole state (version 2; version 1 still loads). ``load_state_dict`` checks every field
  before it changes anything, and takes a torch.optim state dict through
  ``from_torch_state``.
* ``save_checkpoint`` / ``load_checkpoint``: Tandem checkpoint files that also carry the
  torch ``param_groups`` and the binding's own bookkeeping, as JSON in the snapshot's
  metadata (Note [Checkpoint metadata]), so a resumed run is bit-identical.
* ``to_torch_state`` / ``from_torch_state``: torch.optim.AdamW/Adam/SGD (and Lion-style)
  state dicts, both ways.
* ``export_masters``: the fp32 master weights as a safetensors file, by parameter name.

Every function takes the optimizer (a ``tandem.torch.TandemOptimizer``) first; the
methods of that class delegate here. docs/python.md, "State and checkpoints", describes
them.
"""

import functools
import json
import math
import numbers
import os
import struct
import warnings
from collections.abc import Mapping

import numpy as np
import torch

from tandem import _C
from tandem import _dist

STATE_DICT_VERSION = 2
_READABLE_VERSIONS = (1, 2)

# Note [Checkpoint metadata]: save_checkpoint stores, in the snapshot's metadata (kept
# verbatim by the checkpoint file), a JSON object tagged with this schema and version:
#   {"schema": METADATA_SCHEMA, "version": 2, "algorithm": ...,
#    "param_groups": [{key: value, ...} per group, "params" left out],
#    "group_sizes": [len(group["params"]) ...],
#    "ref_group": int, "lr_scales": [float ...]}
# Values are plain JSON, except that a tuple is {"$tuple": [...]}, a dict is
# {"$dict": [[key, value], ...]} and a non-finite float is {"$float": "nan"|"inf"|"-inf"},
# so that load_checkpoint gives back exactly what was saved (betas stay a tuple).
# Version 1 also held "engine_hyper", the hyper-parameters last handed to the engine: it
# is ignored on load (Note [One source of hyper-parameters]).
#
# Note [One source of hyper-parameters]: a loaded optimizer steps with the
# hyper-parameters its param_groups show, as a torch.optim optimizer does: every load
# (state dict, checkpoint file, torch.optim state dict) checks the saved param_groups with
# the constructor's checks and hands the engine the values they give. The engine's own
# copies in the saved state (the checkpoint's groups, a state dict's
# ['tandem']['engine_groups']) are not used, except each group's lr_scale, the binding's
# learning-rate bookkeeping (Note [One lr per step] in torch.py) that a bit-identical
# resume needs; an edit of them cannot make the engine step with other values than
# param_groups show.
METADATA_SCHEMA = "tandem.torch.param_groups"
METADATA_VERSION = 2
_READABLE_METADATA = (1, 2)

# Engine hyper-parameter fields (HyperParams in include/tandem/types.h), lr_scale aside.
HYPER_FIELDS = ("beta1", "beta2", "eps", "weight_decay", "momentum", "dampening",
                "nesterov")

# Snapshot arrays: torch dtype in a state dict, and which hold bf16 bit patterns (NumPy
# int16 in the engine's snapshot dicts, torch.bfloat16 in state dicts).
_ARRAY_DTYPES = {
    "master_f32": torch.float32, "master_bf16": torch.bfloat16, "ecc8": torch.int8,
    "ecc16": torch.int16, "m_f32": torch.float32, "v_f32": torch.float32,
    "m_codes": torch.int8, "v_codes": torch.uint8, "m_scales": torch.bfloat16,
    "v_scales": torch.bfloat16,
}
_ARRAYS = tuple(_ARRAY_DTYPES)
_BF16_ARRAYS = ("master_bf16", "m_scales", "v_scales")
_MAX_STEP = 1 << 53
_QUANT_GROUP = 32  # elements per q8 scale (docs/numerics.md)


# ---------------------------------------------------------------------------------------
# Engine snapshots


def _serialised(sync_before=False, record_after=False):
    """For the functions called on their own (not through a TandemOptimizer method, which
    torch.py serialises the same way): fn(opt, ...) under the optimizer's lock, so it
    falls between two steps; with sync_before, parameters written by torch ops since the
    engine last wrote them are reloaded first (the state read is the live weights'); with
    record_after, the parameters' version counters are recorded after the engine wrote
    them (Note [The parameter is the source of truth] in torch.py)."""
    def decorate(fn):
        @functools.wraps(fn)
        def wrapper(opt, *args, **kwargs):
            with opt._lock:
                if sync_before and not opt._engine.step_begun:
                    opt._sync_params()
                result = fn(opt, *args, **kwargs)
                if record_after:
                    opt._record_param_versions()
                return result
        return wrapper
    return decorate


def _snapshot(opt):
    """The engine's snapshot dict, after the last step is final."""
    with opt._device_guard():
        if opt._cuda:
            torch.cuda.synchronize(opt._device)
        return opt._engine.snapshot()


def _restore(opt, snap):
    with opt._device_guard():
        if opt._cuda:
            torch.cuda.synchronize(opt._device)
        opt._engine.restore(snap)


def _convert(snap, master, momentum, variance):
    """`snap` in other formats (tandem::ConvertSnapshot); `snap` itself when equal."""
    if (snap["master"], snap["momentum"], snap["variance"]) == (master, momentum, variance):
        return snap
    convert = getattr(_C, "convert_snapshot", None)
    if convert is None:
        raise RuntimeError(
            "converting state from master=%s,m=%s,v=%s to master=%s,m=%s,v=%s needs "
            "tandem._C.convert_snapshot, which this build lacks (built without the "
            "checkpoint/ library)" % (snap["master"], snap["momentum"], snap["variance"],
                                      master, momentum, variance))
    return convert(snap, master, momentum, variance)


def _has_momentum(algorithm, hyper):
    """HasMomentum in include/tandem/types.h."""
    return algorithm != "sgd" or float(hyper["momentum"]) != 0.0


def _expected_arrays(algorithm, formats, hyper, numel):
    """Array name -> element count that a tensor's snapshot holds (ValidateSnapshot)."""
    master, momentum, variance = formats
    scales = (numel + _QUANT_GROUP - 1) // _QUANT_GROUP
    out = {}
    if master == "f32":
        out["master_f32"] = numel
    else:
        out["master_bf16"] = numel
        if master == "bf16+ecc8":
            out["ecc8"] = numel
        elif master == "bf16+ecc16":
            out["ecc16"] = numel
    for moment, fmt, present in (("m", momentum, _has_momentum(algorithm, hyper)),
                                 ("v", variance, algorithm in ("adam", "adamw"))):
        if not present:
            continue
        if fmt == "q8":
            out[moment + "_codes"] = numel
            out[moment + "_scales"] = scales
        else:
            out[moment + "_f32"] = numel
    return out


def _engine_groups(opt):
    return [dict(h, lr_scale=s) for h, s in zip(opt._engine_hyper, opt._lr_scales)]


def _torch_groups(opt):
    """param_groups as torch's state_dict writes them: params as indices."""
    groups = []
    index = 0
    for group in opt.param_groups:
        g = {key: value for key, value in group.items() if key != "params"}
        g["params"] = list(range(index, index + len(group["params"])))
        index += len(group["params"])
        groups.append(g)
    return groups


def _apply_groups(opt, groups, ref_group, lr_scales, engine_hyper):
    """Sets the param_groups' values (params kept) and the binding's bookkeeping. Cannot
    fail: everything was checked before."""
    for saved, group in zip(groups, opt.param_groups):
        for key, value in saved.items():
            if key != "params":
                group[key] = value
    opt._ref_group = ref_group
    opt._lr_scales = list(lr_scales)
    opt._engine_hyper = [dict(h) for h in engine_hyper]


# ---------------------------------------------------------------------------------------
# Field checks: each raises ValueError naming the field.


def _need(mapping, key, where):
    if not isinstance(mapping, Mapping):
        raise ValueError("%s must be a dict, got %s" % (where, type(mapping).__name__))
    if key not in mapping:
        raise ValueError("%s has no key %r" % (where, key))
    return mapping[key]


def _int(value, where, lo=None, hi=None):
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise ValueError("%s must be an int, got %r" % (where, value))
    value = int(value)
    if (lo is not None and value < lo) or (hi is not None and value > hi):
        raise ValueError("%s is %d, outside [%s, %s]" % (where, value, lo, hi))
    return value


def _float(value, where, lo=None):
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise ValueError("%s must be a number, got %r" % (where, value))
    value = float(value)
    if not math.isfinite(value) or (lo is not None and value < lo):
        raise ValueError("%s must be finite%s, got %r"
                         % (where, "" if lo is None else " and >= %g" % lo, value))
    return value


def _list(value, where, length=None):
    if not isinstance(value, (list, tuple)):
        raise ValueError("%s must be a list, got %s" % (where, type(value).__name__))
    if length is not None and len(value) != length:
        raise ValueError("%s has %d entries, optimizer %d" % (where, len(value), length))
    return value


def _step_value(value, where, hi):
    """A per-parameter step: an int, an integral float or a one-element tensor."""
    if torch.is_tensor(value):
        if value.numel() != 1:
            raise ValueError("%s must hold one value, has %d" % (where, value.numel()))
        value = value.item()
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise ValueError("%s must be a number, got %r" % (where, value))
    if not math.isfinite(value) or value != int(value):
        raise ValueError("%s must be a whole number, got %r" % (where, value))
    return _int(int(value), where, 0, hi)


def _saved_param_groups(opt, sd, check):
    """(values, hypers) of state dict `sd`'s param_groups: the values (all but "params")
    of one group per optimizer group, each listing as many params as that group has,
    and the engine hyper-parameters they give. check(saved, params, where) adds the
    caller's checks of a saved group before its values are checked as the constructor
    checks them (_check_group_values). Raises ValueError naming the field."""
    saved_groups = _list(_need(sd, "param_groups", "state dict"), "state dict['param_groups']",
                         len(opt.param_groups))
    groups, hypers = [], []
    for g, (saved, group) in enumerate(zip(saved_groups, opt.param_groups)):
        gw = "state dict['param_groups'][%d]" % g
        params = _list(_need(saved, "params", gw), gw + "['params']", len(group["params"]))
        check(saved, params, gw)
        hypers.append(_check_group_values(opt, saved, gw))
        groups.append({key: value for key, value in saved.items() if key != "params"})
    return groups, hypers


def _check_group_values(opt, group, where):
    """The engine hyper-parameters of a saved param group, checked with the
    constructor's checks and messages (Note [One source of hyper-parameters]); every
    refusal is a ValueError naming the group and the key."""
    if not isinstance(group, Mapping):
        raise ValueError("%s must be a dict, got %s" % (where, type(group).__name__))
    try:
        return opt._group_hyper(None, group, where)[1]
    except TypeError as e:
        raise ValueError(str(e)) from None


def _engine_groups_from(hypers, lr_scales):
    return [dict(h, lr_scale=float(s)) for h, s in zip(hypers, lr_scales)]


def _check_engine_group(h, where):
    if not isinstance(h, Mapping):
        raise ValueError("%s must be a dict, got %s" % (where, type(h).__name__))
    for key in ("lr_scale",) + HYPER_FIELDS:
        _need(h, key, where)
    unknown = sorted(set(h) - set(("lr_scale",) + HYPER_FIELDS))
    if unknown:
        raise ValueError("%s has unknown key %r" % (where, unknown[0]))
    for key in ("lr_scale",) + HYPER_FIELDS[:-1]:
        _float(h[key], "%s[%r]" % (where, key), lo=0.0 if key == "lr_scale" else None)
    if not isinstance(h["nesterov"], bool):
        raise ValueError("%s['nesterov'] must be a bool, got %r" % (where, h["nesterov"]))


# ---------------------------------------------------------------------------------------
# State dicts


def state_dict(opt):
    """TandemOptimizer.state_dict: see its docstring."""
    if opt._sharded:
        from tandem import _sharded_state
        return _sharded_state.state_dict(opt)
    snap = _snapshot(opt)
    state = {}
    for k, t in enumerate(snap["tensors"]):
        entry = {"step": torch.tensor(float(t["step"]))}
        for name in _ARRAYS:
            if name in t:
                tensor = torch.from_numpy(t[name])
                if name in _BF16_ARRAYS:
                    tensor = tensor.view(torch.bfloat16)
                entry[name] = tensor
        state[opt._indices[k]] = entry
    meta = common_meta(opt, snap, STATE_DICT_VERSION)
    meta["tensors"] = [{key: t[key] for key in ("name", "numel", "shape", "param_dtype",
                                                "grad_dtype", "group")}
                       for t in snap["tensors"]]
    return {"state": state, "param_groups": _torch_groups(opt), "tandem": meta}


def common_meta(opt, snap, version):
    """The "tandem" entry's fields that every state dict version carries."""
    return {
        "version": version,
        "algorithm": snap["algorithm"],
        "master": snap["master"],
        "momentum": snap["momentum"],
        "variance": snap["variance"],
        "step": int(snap["step"]),
        "engine_groups": snap["groups"],
        "ref_group": opt._ref_group,
    }


def load_state_dict(opt, sd):
    """TandemOptimizer.load_state_dict: see its docstring."""
    if not isinstance(sd, Mapping):
        raise ValueError("state dict must be a dict, got %s" % type(sd).__name__)
    from tandem import _sharded_state
    if _sharded_state.is_sharded_state_dict(sd):
        plan = _sharded_state.plan_load(opt, sd)
    elif "tandem" not in sd:
        return from_torch_state(opt, sd)
    else:
        plan = _plan_load(opt, sd)
    snap, groups, ref_group, lr_scales, engine_hyper = plan
    unstepped = [k for k, t in enumerate(snap["tensors"]) if t["step"] == 0]
    _keeping_unstepped_weights(opt, lambda: _restore(opt, snap), unstepped)
    _apply_groups(opt, groups, ref_group, lr_scales, engine_hyper)
    return None


def _keeping_unstepped_weights(opt, load, unstepped=None):
    """Runs load() (a restore, which writes every master to its parameter), then puts
    back the weights of the parameters that have never been stepped and re-reads their
    masters from them. ``unstepped``: the engine tensors the load leaves at step 0, when
    known before it (a state dict); otherwise every weight is kept aside (a checkpoint
    file, whose steps are read with it). The weights are kept in host memory: on a GPU
    a second copy of the model may not fit.

    Note [A never-stepped parameter keeps its weight]: until its first step a parameter
    holds the truth and its master is only its encoding, which can be coarser (an fp32
    weight under a bf16 or bf16+ecc8 master). Loading the optimizer's own state back
    must not round such weights: Accelerate's prepare does exactly that
    (AcceleratedOptimizer round-trips state_dict/load_state_dict before training), so
    the first forward would run on rounded weights and training would drift from the
    same loop without Accelerate (tests/python_dist/test_hf_accelerate.py). torch.optim
    never writes weights on load; neither do we before a parameter's first step. An
    fp32 master encodes every supported dtype exactly: nothing to do then."""
    if opt._formats[0] == "f32":
        return load()
    kept = range(len(opt._params)) if unstepped is None else unstepped
    before = {k: _dist.local(opt._params[k]).detach().to("cpu", copy=True) for k in kept}
    result = load()
    unstepped = [k for k, s in enumerate(opt.tensor_step_counts()) if s == 0 and k in before]
    if unstepped:
        with opt._device_guard(), torch.no_grad():
            if opt._cuda:
                torch.cuda.synchronize(opt._device)  # the restore's writes are final
            for k in unstepped:
                _dist.local(opt._params[k]).data.copy_(before[k])  # .data: no version bump
        opt._reload(unstepped)
    return result


def _plan_load(opt, sd):
    """Checks every field of a tandem state dict against the optimizer and returns what
    loading it sets: (engine snapshot dict, param group values, ref_group, lr_scales,
    engine_hyper). Raises ValueError naming the first bad field; changes nothing."""
    meta = _need(sd, "tandem", "state dict")
    version = _need(meta, "version", "state dict['tandem']")
    if isinstance(version, bool) or version not in _READABLE_VERSIONS:
        raise ValueError("unsupported tandem state dict version %r (this build reads %s)"
                         % (version, ", ".join(map(str, _READABLE_VERSIONS))))
    where = "state dict['tandem']"
    algorithm = _need(meta, "algorithm", where)
    if algorithm != opt._ALGORITHM:
        raise ValueError("state dict algorithm %r but optimizer uses %r"
                         % (algorithm, opt._ALGORITHM))
    formats = tuple(_need(meta, key, where) for key in ("master", "momentum", "variance"))
    if formats != tuple(opt._formats):
        raise ValueError("state dict formats master=%s,m=%s,v=%s but optimizer uses "
                         "master=%s,m=%s,v=%s" % (formats + tuple(opt._formats)))
    step = _int(_need(meta, "step", where), where + "['step']", 0, _MAX_STEP)

    n_groups = len(opt.param_groups)

    def check_params(saved, params, gw):
        for j, p in enumerate(params):
            _int(p, "%s['params'][%d]" % (gw, j))

    groups, hypers = _saved_param_groups(opt, sd, check_params)
    engine_groups, ref_group = _saved_bookkeeping(meta, where, hypers)

    infos = _list(_need(meta, "tensors", where), where + "['tensors']", len(opt._params))
    state = _need(sd, "state", "state dict")
    if not isinstance(state, Mapping):
        raise ValueError("state dict['state'] must be a dict, got %s" % type(state).__name__)
    tensors = []
    for k, info in enumerate(infos):
        tw = "%s['tensors'][%d]" % (where, k)
        p = opt._params[k]
        t = {
            "name": _need(info, "name", tw),
            "numel": _int(_need(info, "numel", tw), tw + "['numel']", 0),
            "param_dtype": _need(info, "param_dtype", tw),
            "grad_dtype": _need(info, "grad_dtype", tw),
            "group": _int(_need(info, "group", tw), tw + "['group']", 0, n_groups - 1),
            "shape": [],
        }
        for key in ("name", "param_dtype", "grad_dtype"):
            if not isinstance(t[key], str):
                raise ValueError("%s[%r] must be a str, got %r" % (tw, key, t[key]))
        n = t["numel"]
        if n != p.numel():
            raise ValueError("%s: %d elements in the state dict, parameter %d has %d"
                             % (tw, n, opt._indices[k], p.numel()))
        if version >= 2:
            shape = _list(_need(info, "shape", tw), tw + "['shape']")
            dims = [_int(d, "%s['shape'][%d]" % (tw, i), 0) for i, d in enumerate(shape)]
            if dims and math.prod(dims) != n:
                raise ValueError("%s['shape'] is %s, whose product is not numel %d"
                                 % (tw, dims, n))
            t["shape"] = dims

        index = opt._indices[k]
        if index not in state:
            raise ValueError("state dict has no state for parameter %d" % index)
        entry = state[index]
        ew = "state dict['state'][%d]" % index
        if not isinstance(entry, Mapping):
            raise ValueError("%s must be a dict, got %s" % (ew, type(entry).__name__))
        if version >= 2:
            t["step"] = _step_value(_need(entry, "step", ew), ew + "['step']", step)
        else:
            t["step"] = step
        expected = _expected_arrays(algorithm, formats, engine_groups[t["group"]], n)
        for name in _ARRAYS:
            if name not in expected:
                if name in entry:
                    raise ValueError("%s has %r, which %s with master=%s,m=%s,v=%s does not "
                                     "keep" % ((ew, name, algorithm) + formats))
                continue
            a = _need(entry, name, ew)
            aw = "%s[%r]" % (ew, name)
            if not torch.is_tensor(a):
                raise ValueError("%s must be a tensor, got %s" % (aw, type(a).__name__))
            if a.dtype != _ARRAY_DTYPES[name]:
                raise ValueError("%s has dtype %s, expected %s"
                                 % (aw, a.dtype, _ARRAY_DTYPES[name]))
            if a.numel() != expected[name]:
                raise ValueError("%s has %d elements, expected %d"
                                 % (aw, a.numel(), expected[name]))
            t[name] = engine_array(name, a)
        tensors.append(t)
    return plan_result(algorithm, formats, step, engine_groups, tensors, groups, ref_group)


def _saved_bookkeeping(meta, where, hypers):
    """(engine groups, ref_group) a state dict's 'tandem' entry gives with the param
    groups' hyper-parameters `hypers`: its engine_groups are checked, and only their
    lr_scale is used (Note [One source of hyper-parameters])."""
    n_groups = len(hypers)
    saved = _list(_need(meta, "engine_groups", where), where + "['engine_groups']", n_groups)
    for g, h in enumerate(saved):
        _check_engine_group(h, "%s['engine_groups'][%d]" % (where, g))
    ref_group = _int(_need(meta, "ref_group", where), where + "['ref_group']", 0,
                     n_groups - 1)
    if float(saved[ref_group]["lr_scale"]) != 1.0:
        raise ValueError("%s['ref_group'] is %d, whose lr_scale is %r (the reference "
                         "group's is 1)" % (where, ref_group, saved[ref_group]["lr_scale"]))
    return _engine_groups_from(hypers, [h["lr_scale"] for h in saved]), ref_group


def engine_array(name, a):
    """Array `name` of a state dict as the engine's snapshot dicts hold it: flat, on the
    CPU, bf16 bit patterns as int16, a NumPy array."""
    a = a.detach().cpu().reshape(-1)
    if name in _BF16_ARRAYS:
        a = a.view(torch.int16)
    return a.contiguous().numpy()


def plan_result(algorithm, formats, step, engine_groups, tensors, groups, ref_group):
    """What loading a checked state dict sets: (engine snapshot dict, param group values,
    ref_group, lr_scales, engine_hyper)."""
    snap = {"algorithm": algorithm, "master": formats[0], "momentum": formats[1],
            "variance": formats[2], "step": step, "groups": [dict(h) for h in engine_groups],
            "tensors": tensors, "metadata": ""}
    lr_scales = [float(h["lr_scale"]) for h in engine_groups]
    engine_hyper = [{f: h[f] for f in HYPER_FIELDS} for h in engine_groups]
    return snap, groups, ref_group, lr_scales, engine_hyper


# ---------------------------------------------------------------------------------------
# Checkpoint files


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
    if torch.is_tensor(value) and value.dim() == 0 and not value.is_complex():
        return _encode(value.item(), where)  # a 0-d tensor: its value, exactly
    if isinstance(value, np.generic) and not isinstance(value, np.complexfloating):
        return _encode(value.item(), where)
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
            return tuple(_decode(v, where) for v in _list(value["$tuple"], where))
        if set(value) == {"$dict"}:
            return {_decode(k, where): _decode(v, where)
                    for k, v in (_list(kv, where, 2) for kv in _list(value["$dict"], where))}
        if set(value) == {"$float"} and value["$float"] in ("nan", "inf", "-inf"):
            return float(value["$float"])
        raise ValueError("%s: unknown tagged value %r" % (where, value))
    return value


def _metadata(opt):
    """The JSON metadata save_checkpoint stores (Note [Checkpoint metadata])."""
    groups = []
    for g, group in enumerate(opt.param_groups):
        groups.append({key: _encode(value, "param_groups[%d][%r]" % (g, key))
                       for key, value in group.items() if key != "params"})
    doc = {
        "schema": METADATA_SCHEMA,
        "version": METADATA_VERSION,
        "algorithm": opt._ALGORITHM,
        "param_groups": groups,
        "group_sizes": [len(group["params"]) for group in opt.param_groups],
        "ref_group": opt._ref_group,
        "lr_scales": list(opt._lr_scales),
    }
    return json.dumps(doc, allow_nan=False, sort_keys=True)


def _parse_metadata(opt, text, path):
    """(groups, ref_group, lr_scales, engine_hyper) from a checkpoint's metadata, or None
    for a file without tandem.torch metadata. Raises ValueError when it does not fit."""
    if not text:
        return None
    try:
        doc = json.loads(text)
    except ValueError:
        return None
    if not isinstance(doc, dict) or doc.get("schema") != METADATA_SCHEMA:
        return None
    where = "checkpoint '%s' metadata" % path
    version = doc.get("version")
    if isinstance(version, bool) or version not in _READABLE_METADATA:
        raise ValueError("%s: unsupported version %r (this build reads %s)"
                         % (where, version, ", ".join(map(str, _READABLE_METADATA))))
    algorithm = _need(doc, "algorithm", where)
    if algorithm != opt._ALGORITHM:
        raise ValueError("%s: algorithm %r but optimizer uses %r"
                         % (where, algorithm, opt._ALGORITHM))
    n_groups = len(opt.param_groups)
    sizes = _list(_need(doc, "group_sizes", where), where + "['group_sizes']", n_groups)
    for g, (size, group) in enumerate(zip(sizes, opt.param_groups)):
        if size != len(group["params"]):
            raise ValueError("%s: group %d has %r parameters, optimizer %d"
                             % (where, g, size, len(group["params"])))
    groups, hypers = [], []
    for g, saved in enumerate(_list(_need(doc, "param_groups", where),
                                    where + "['param_groups']", n_groups)):
        gw = "%s['param_groups'][%d]" % (where, g)
        if not isinstance(saved, dict):
            raise ValueError("%s must be a dict" % gw)
        group = {key: _decode(value, "%s[%r]" % (gw, key)) for key, value in saved.items()}
        hypers.append(_check_group_values(opt, group, gw))
        groups.append(group)
    ref_group = _int(_need(doc, "ref_group", where), where + "['ref_group']", 0, n_groups - 1)
    lr_scales = [_float(s, "%s['lr_scales'][%d]" % (where, g), lo=0.0) for g, s in
                 enumerate(_list(_need(doc, "lr_scales", where), where + "['lr_scales']",
                                 n_groups))]
    if lr_scales[ref_group] != 1.0:
        raise ValueError("%s['ref_group'] is %d, whose lr_scale is %r (the reference "
                         "group's is 1)" % (where, ref_group, lr_scales[ref_group]))
    # Version 1's "engine_hyper" is not read (Note [One source of hyper-parameters]).
    return groups, ref_group, lr_scales, hypers


def save_checkpoint(opt, path, compression="none", sync=True):
    """TandemOptimizer.save_checkpoint: see its docstring."""
    opt._require_checkpoint()
    metadata = _metadata(opt)  # before any I/O: a value JSON cannot hold raises here
    with opt._device_guard():
        if opt._cuda:
            torch.cuda.synchronize(opt._device)
        opt._engine.save_checkpoint(str(path), compression, bool(sync), metadata)


def load_checkpoint(opt, path):
    """TandemOptimizer.load_checkpoint: see its docstring."""
    opt._require_checkpoint()
    parsed = []

    def groups_for(metadata):
        # Runs after the file is verified and before anything changes: raising refuses it.
        # The engine takes the hyper-parameters of the file's param_groups (or, in a file
        # without them, this optimizer's), never the file's own copy of the engine's
        # (Note [One source of hyper-parameters]).
        p = _parse_metadata(opt, metadata, path)
        parsed.append(p)
        if p is None:
            return _engine_groups(opt)
        _groups, _ref_group, lr_scales, hypers = p
        return _engine_groups_from(hypers, lr_scales)

    def load():
        with opt._device_guard():
            if opt._cuda:
                torch.cuda.synchronize(opt._device)
            opt._engine.load_checkpoint(str(path), groups_for)

    _keeping_unstepped_weights(opt, load)
    if parsed[0] is None:
        warnings.warn("checkpoint '%s' holds no tandem.torch param_groups (written by an "
                      "older tandem or another program): the optimizer keeps its own "
                      "param_groups and hyper-parameters" % (path,), stacklevel=4)
    else:
        _apply_groups(opt, *parsed[0])


# ---------------------------------------------------------------------------------------
# torch.optim state dicts


@_serialised(sync_before=True)
def to_torch_state(opt):
    """A state dict of the torch.optim optimizer of the same algorithm.

    AdamW/Adam: ``state[i] = {"step": float tensor, "exp_avg", "exp_avg_sq"}`` (fp32, the
    parameter's shape), as torch.optim.AdamW/Adam keep them; SGD: ``{"momentum_buffer"}``
    (None without momentum); Lion: ``{"exp_avg", "step"}`` (the layout of common Lion
    implementations). Parameters not yet stepped have no state (torch creates it at
    their first step). ``param_groups`` are the optimizer's, with params as indices.
    Quantized moments are decoded exactly (tandem::ConvertSnapshot). The masters are not
    part of it: the parameters hold them (rounded to the parameters' dtype).
    """
    snap = _snapshot(opt)
    snap = _convert(snap, snap["master"], "f32", "f32")
    algorithm = opt._ALGORITHM
    state = {}
    for k, t in enumerate(snap["tensors"]):
        step = int(t["step"])
        if step == 0:
            continue
        p = opt._params[k]

        def moment(name, t=t, p=p):
            a = torch.from_numpy(t[name]).contiguous().reshape(_dist.local(p).shape)
            return _dist.wrap_like(a, p, tuple(p.shape)) if opt._sharded else a
        if algorithm in ("adam", "adamw"):
            entry = {"step": torch.tensor(float(step)), "exp_avg": moment("m_f32"),
                     "exp_avg_sq": moment("v_f32")}
        elif algorithm == "lion":
            entry = {"step": torch.tensor(float(step)), "exp_avg": moment("m_f32")}
        else:
            entry = {"momentum_buffer": moment("m_f32") if "m_f32" in t else None}
        state[opt._indices[k]] = entry
    return {"state": state, "param_groups": _torch_groups(opt)}


@_serialised(record_after=True)
def from_torch_state(opt, sd):
    """Loads a torch.optim state dict (AdamW/Adam: exp_avg, exp_avg_sq, step; SGD:
    momentum_buffer; Lion-style: exp_avg) into a Tandem optimizer of any formats.

    The masters are taken from the parameters (the torch optimizer keeps none), the
    moments from the state dict, encoded into the optimizer's formats
    (tandem::ConvertSnapshot); a parameter without state starts fresh (step 0, zero
    moments). param_groups take the state dict's values. Every field is checked before
    anything changes (ValueError naming it).
    """
    if not isinstance(sd, Mapping):
        raise ValueError("state dict must be a dict, got %s" % type(sd).__name__)
    algorithm = opt._ALGORITHM

    def check_flags(saved, params, gw):
        for key in ("amsgrad", "maximize"):
            if saved.get(key):
                raise ValueError("%s has %s=True, which tandem does not support" % (gw, key))

    groups, _hypers = _saved_param_groups(opt, sd, check_flags)
    ref_group, lr_scales, engine_hyper = opt._bookkeeping(groups)
    engine_groups = _engine_groups_from(engine_hyper, lr_scales)
    state = _need(sd, "state", "state dict")
    if not isinstance(state, Mapping):
        raise ValueError("state dict['state'] must be a dict, got %s" % type(state).__name__)

    live = _snapshot(opt)
    tensors = []
    for k, info in enumerate(live["tensors"]):
        p = opt._params[k]
        n = p.numel()
        index = opt._indices[k]
        entry = state.get(index, {})
        ew = "state dict['state'][%d]" % index
        if not isinstance(entry, Mapping):
            raise ValueError("%s must be a dict, got %s" % (ew, type(entry).__name__))
        hyper = engine_groups[info["group"]]
        t = {key: info[key] for key in ("name", "numel", "shape", "param_dtype",
                                        "grad_dtype", "group")}
        t["master_f32"] = p.detach().to("cpu", torch.float32).reshape(-1).numpy().copy()

        def moment(key, ew=ew, entry=entry, n=n):
            a = entry.get(key)
            if a is None:
                return None
            if not torch.is_tensor(a) or not a.is_floating_point():
                raise ValueError("%s[%r] must be a floating-point tensor" % (ew, key))
            if a.numel() != n:
                raise ValueError("%s[%r] has %d elements, parameter %d has %d"
                                 % (ew, key, a.numel(), index, n))
            return a.detach().to("cpu", torch.float32).reshape(-1).numpy().copy()
        names = {"adam": ("exp_avg", "exp_avg_sq"), "adamw": ("exp_avg", "exp_avg_sq"),
                 "lion": ("exp_avg",), "sgd": ("momentum_buffer",)}[algorithm]
        values = [moment(key) for key in names]
        missing = [key for key, v in zip(names, values) if v is None]
        if algorithm in ("adam", "adamw") and entry and missing:
            raise ValueError("%s has no key %r" % (ew, missing[0]))
        if entry.get("max_exp_avg_sq") is not None:
            raise ValueError("%s has max_exp_avg_sq (amsgrad), which tandem does not "
                             "support" % ew)
        if "step" in entry:
            step = _step_value(entry["step"], ew + "['step']", _MAX_STEP)
        else:  # SGD and some Lion implementations keep no step
            step = 1 if values[0] is not None else 0
        if _has_momentum(algorithm, hyper):
            t["m_f32"] = values[0] if values[0] is not None else np.zeros(n, np.float32)
        if algorithm in ("adam", "adamw"):
            t["v_f32"] = values[1] if values[1] is not None else np.zeros(n, np.float32)
            if np.any(t["v_f32"] < 0) or np.any(np.isnan(t["v_f32"])):
                raise ValueError("%s['exp_avg_sq'] has negative or NaN entries" % ew)
        t["step"] = step
        tensors.append(t)
    step = max([t["step"] for t in tensors] + [0])
    snap = {"algorithm": algorithm, "master": "f32", "momentum": "f32", "variance": "f32",
            "step": step, "groups": engine_groups, "tensors": tensors, "metadata": ""}
    snap = _convert(snap, *opt._formats)
    _restore(opt, snap)
    _apply_groups(opt, groups, ref_group, lr_scales, engine_hyper)


# ---------------------------------------------------------------------------------------
# safetensors export


@_serialised(sync_before=True)
def export_masters(opt, path, module=None):
    """Writes the fp32 master weights of the stepped parameters to `path` as safetensors,
    each under its fully qualified name and with its original shape, so that
    ``model.load_state_dict(safetensors.torch.load_file(path), strict=False)`` (strict
    when every parameter is stepped and the model has no buffers) loads them.

    Names come from `module` (``module.named_parameters()``) when given, else from the
    param groups' ``param_names`` (optimizers built from ``named_parameters()``), else
    the engine's tensor names. Writes with the ``safetensors`` package when importable,
    else with a small writer of the same format; atomically (a temporary file renamed
    over `path`). Raises ValueError for duplicate or missing names.
    """
    snap = _snapshot(opt)
    metadata = {"format": "pt", "tandem_algorithm": snap["algorithm"],
                "tandem_master": snap["master"], "tandem_step": str(snap["step"])}
    snap = _convert(snap, "f32", snap["momentum"], snap["variance"])
    by_id = {}
    if module is not None:
        by_id = {id(p): name for name, p in module.named_parameters()}
    else:
        for group in opt.param_groups:
            names = group.get("param_names")
            if names is not None and len(names) == len(group["params"]):
                by_id.update({id(p): n for p, n in zip(group["params"], names)})
    tensors = {}
    for k, t in enumerate(snap["tensors"]):
        p = opt._params[k]
        name = by_id.get(id(p), t["name"] if module is None else None)
        if name is None:
            raise ValueError("parameter %d (shape %s) is not a parameter of the given "
                             "module" % (opt._indices[k], tuple(p.shape)))
        if name in tensors:
            raise ValueError("two parameters are both named %r" % name)
        shape = list(t["shape"]) or list(p.shape)
        tensors[name] = (shape, np.ascontiguousarray(t["master_f32"], dtype="<f4"))
    tmp = str(path) + ".tmp"
    try:
        try:
            import safetensors.torch as st
        except ImportError:
            _write_safetensors(tmp, tensors, metadata)
        else:
            st.save_file({n: torch.from_numpy(a).reshape(s) for n, (s, a) in tensors.items()},
                         tmp, metadata=metadata)
        os.replace(tmp, str(path))
    except BaseException:
        if os.path.exists(tmp):
            os.remove(tmp)
        raise


def _write_safetensors(path, tensors, metadata):
    """The safetensors layout: u64 little-endian header size N, N bytes of JSON (padded
    with spaces to a multiple of 8), then the tensors' little-endian bytes back to back."""
    header = {"__metadata__": metadata}
    offset = 0
    for name, (shape, a) in tensors.items():
        header[name] = {"dtype": "F32", "shape": shape,
                        "data_offsets": [offset, offset + a.nbytes]}
        offset += a.nbytes
    text = json.dumps(header, separators=(",", ":")).encode("utf-8")
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for _, a in tensors.values():
            f.write(a.tobytes())
        f.flush()
        os.fsync(f.fileno())
