"""What the state paths of tandem.torch share (tandem/_state.py, _sharded_state.py,
_torch_state.py): the field checks of loads (each raises ValueError naming the field),
the param groups of a saved state checked with the constructor's checks (Note [One
source of hyper-parameters]), the learning-rate bookkeeping they carry, and the
optimizer's lock around the state functions called on their own."""

import functools
import math
import numbers
from collections.abc import Mapping

import torch

from tandem import _options
from tandem._torch_layout import reference_values

# Engine hyper-parameter fields (HyperParams in include/tandem/types.h), lr_scale aside.
HYPER_FIELDS = ("beta1", "beta2", "eps", "weight_decay", "momentum", "dampening",
                "nesterov")
MAX_STEP = 1 << 53

# Note [One source of hyper-parameters]: a loaded optimizer steps with the
# hyper-parameters its param_groups show, as a torch.optim optimizer does: every load
# (state dict, checkpoint file, torch.optim state dict) checks the saved param_groups with
# the constructor's checks and hands the engine the values they give. The engine's own
# copies in the saved state (the checkpoint's groups, a state dict's
# ['tandem']['engine_groups']) are not used; an edit of them cannot make the engine step
# with other values than param_groups show. Each group's lr_scale and the reference group
# (the lr ratios LayoutFollower._follow_values keeps, for hyperparam_update="error") are
# checked and kept as they are.


def serialised(sync_before=False, load=False):
    """fn(opt, ...) under the optimizer's lock, so it falls between two steps (the methods
    of TandemOptimizer and the state functions called on their own). With sync_before,
    param_groups and reallocations are followed and parameters written by torch ops
    since the engine last wrote them reloaded first (the state read is the live
    weights'); with load, the engine is rebound first for param_groups, reallocations
    and parameters the loaded state dict has state for, and the parameters' version
    counters are recorded after the engine wrote them (Note [The parameter is the source
    of truth] in _engine.py)."""
    def decorate(fn):
        @functools.wraps(fn)
        def wrapper(opt, *args, **kwargs):
            with opt._lock:
                if load and opt._core.step_begun:
                    raise ValueError(
                        "%s between begin_step() and step(): the step under way updates "
                        "the state this load would replace; load before begin_step(), or "
                        "call step() (or zero_grad(), which drops the step) first. Nothing "
                        "changed" % fn.__name__)
                if sync_before and not opt._core.step_begun:
                    opt._sync_params()
                if load:
                    opt._rebind_for_load(args[0] if args else None)
                result = fn(opt, *args, **kwargs)
                if load:
                    opt._core.record_versions()
                return result
        return wrapper
    return decorate


def need(mapping, key, where):
    if not isinstance(mapping, Mapping):
        raise ValueError("%s must be a dict, got %s" % (where, type(mapping).__name__))
    if key not in mapping:
        raise ValueError("%s has no key %r" % (where, key))
    return mapping[key]


def integer(value, where, lo=None, hi=None):
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise ValueError("%s must be an int, got %r" % (where, value))
    value = int(value)
    if (lo is not None and value < lo) or (hi is not None and value > hi):
        raise ValueError("%s is %d, outside [%s, %s]" % (where, value, lo, hi))
    return value


def real(value, where, lo=None):
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise ValueError("%s must be a number, got %r" % (where, value))
    value = float(value)
    if not math.isfinite(value) or (lo is not None and value < lo):
        raise ValueError("%s must be finite%s, got %r"
                         % (where, "" if lo is None else " and >= %g" % lo, value))
    return value


def listing(value, where, length=None):
    if not isinstance(value, (list, tuple)):
        raise ValueError("%s must be a list, got %s" % (where, type(value).__name__))
    if length is not None and len(value) != length:
        raise ValueError("%s has %d entries, optimizer %d" % (where, len(value), length))
    return value


def step_value(value, where, hi):
    """A per-parameter step: an int, an integral float or a one-element tensor."""
    if torch.is_tensor(value):
        if value.numel() != 1:
            raise ValueError("%s must hold one value, has %d" % (where, value.numel()))
        value = value.item()
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise ValueError("%s must be a number, got %r" % (where, value))
    if not math.isfinite(value) or value != int(value):
        raise ValueError("%s must be a whole number, got %r" % (where, value))
    return integer(int(value), where, 0, hi)


def saved_param_groups(opt, sd, check):
    """(values, hypers) of state dict `sd`'s param_groups: the values (all but "params")
    of one group per optimizer group, each listing as many params as that group has,
    and the engine hyper-parameters they give. check(saved, params, where) adds the
    caller's checks of a saved group before its values are checked as the constructor
    checks them (check_group_values). Raises ValueError naming the field."""
    saved_groups = listing(need(sd, "param_groups", "state dict"), "state dict['param_groups']",
                         len(opt.param_groups))
    groups, hypers = [], []
    for g, (saved, group) in enumerate(zip(saved_groups, opt.param_groups)):
        gw = "state dict['param_groups'][%d]" % g
        params = listing(need(saved, "params", gw), gw + "['params']", len(group["params"]))
        check(saved, params, gw)
        hypers.append(check_group_values(opt, saved, gw))
        groups.append({key: value for key, value in saved.items() if key != "params"})
    return groups, hypers


def check_group_values(opt, group, where):
    """The engine hyper-parameters of a saved param group, checked with the
    constructor's checks and messages (Note [One source of hyper-parameters]); every
    refusal is a ValueError naming the group and the key."""
    if not isinstance(group, Mapping):
        raise ValueError("%s must be a dict, got %s" % (where, type(group).__name__))
    try:
        return _options.group_values(opt._ALGORITHM, opt._hyper, None, group, where)[1]
    except TypeError as e:
        raise ValueError(str(e)) from None


def engine_groups_from(hypers, lr_scales):
    return [dict(h, lr_scale=float(s)) for h, s in zip(hypers, lr_scales)]


def check_engine_group(h, where):
    if not isinstance(h, Mapping):
        raise ValueError("%s must be a dict, got %s" % (where, type(h).__name__))
    for key in ("lr_scale",) + HYPER_FIELDS:
        need(h, key, where)
    unknown = sorted(set(h) - set(("lr_scale",) + HYPER_FIELDS))
    if unknown:
        raise ValueError("%s has unknown key %r" % (where, unknown[0]))
    for key in ("lr_scale",) + HYPER_FIELDS[:-1]:
        real(h[key], "%s[%r]" % (where, key), lo=0.0 if key == "lr_scale" else None)
    if not isinstance(h["nesterov"], bool):
        raise ValueError("%s['nesterov'] must be a bool, got %r" % (where, h["nesterov"]))


def saved_bookkeeping(meta, where, hypers):
    """(engine groups, ref_group) a state dict's 'tandem' entry gives with the param
    groups' hyper-parameters `hypers`: its engine_groups are checked, and only their
    lr_scale is used (Note [One source of hyper-parameters])."""
    n_groups = len(hypers)
    saved = listing(need(meta, "engine_groups", where), where + "['engine_groups']", n_groups)
    for g, h in enumerate(saved):
        check_engine_group(h, "%s['engine_groups'][%d]" % (where, g))
    ref_group = integer(need(meta, "ref_group", where), where + "['ref_group']", 0,
                     n_groups - 1)
    if float(saved[ref_group]["lr_scale"]) != 1.0:
        raise ValueError("%s['ref_group'] is %d, whose lr_scale is %r (the reference "
                         "group's is 1)" % (where, ref_group, saved[ref_group]["lr_scale"]))
    return engine_groups_from(hypers, [h["lr_scale"] for h in saved]), ref_group


def plan_result(algorithm, formats, step, engine_groups, tensors, groups, ref_group):
    """What loading a checked state dict sets: (engine snapshot dict, param group values,
    ref_group, lr_scales, engine_hyper)."""
    snap = {"algorithm": algorithm, "master": formats[0], "momentum": formats[1],
            "variance": formats[2], "step": step, "groups": [dict(h) for h in engine_groups],
            "tensors": tensors, "metadata": ""}
    lr_scales = [float(h["lr_scale"]) for h in engine_groups]
    engine_hyper = [{f: h[f] for f in HYPER_FIELDS} for h in engine_groups]
    return snap, groups, ref_group, lr_scales, engine_hyper


def common_meta(opt, snap, version):
    """The "tandem" entry's fields that every state dict version carries."""
    return {
        "version": version,
        "algorithm": snap["algorithm"],
        "master": snap["master"],
        "momentum": snap["momentum"],
        "variance": snap["variance"],
        "step": int(snap["step"]),
        "engine_groups": [dict(h, lr_scale=s)
                          for h, s in zip(opt._engine_hyper, opt._lr_scales)],
        "ref_group": opt._ref_group,
    }


def torch_groups(opt):
    """param_groups as torch's state_dict writes them: params as indices."""
    groups = []
    index = 0
    for group in opt.param_groups:
        g = {key: value for key, value in group.items() if key != "params"}
        g["params"] = list(range(index, index + len(group["params"])))
        index += len(group["params"])
        groups.append(g)
    return groups


def apply_groups(opt, groups, ref_group, lr_scales, engine_hyper):
    """Sets the param_groups' values (params kept) and the binding's bookkeeping. Cannot
    fail: everything was checked before."""
    for saved, group in zip(groups, opt.param_groups):
        for key, value in saved.items():
            if key != "params":
                group[key] = value
    opt._ref_group, opt._lr_scales = ref_group, list(lr_scales)
    opt._engine_hyper = [dict(h) for h in engine_hyper]
    opt._core.hypers = [dict(h) for h in engine_hyper]


def bookkeeping(opt, groups):
    """(ref_group, lr_scales, hypers) an optimizer over param groups `groups` starts
    with (LayoutFollower._follow_values), each group checked."""
    return reference_values(*opt._group_values(groups))


def engine_groups(opt):
    return opt._core.engine_groups()


def snapshot(opt):
    """The engine's snapshot dict, after the last step is final."""
    return opt._core.snapshot()


def restore(opt, snap):
    opt._core.restore(snap)
