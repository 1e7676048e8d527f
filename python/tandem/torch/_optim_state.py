"""``to_torch_state`` / ``from_torch_state`` (torch.optim's AdamW, Adam, SGD and
Lion-style state dicts) and ``export_masters`` (docs/python.md, "Moving from and to
torch.optim"), each taking the optimizer first; and what every state load of
tandem.torch shares: param_groups checked with the constructor's checks, and
``serialised``."""

import functools
import json
import os
import struct

import numpy as np
import torch

from tandem._core import dist as _dist
from tandem._core import options as _options
from tandem._core.checks import MAX_STEP, listing, mapping, need, step_value
from tandem._core.state import F32, components, convert


# Note [One source of hyper-parameters]: a loaded optimizer steps with the
# hyper-parameters its param_groups show, as torch.optim does: every load checks the
# saved param_groups with the constructor's checks and hands the engine their values,
# never the engine's own copies in the saved state (the checkpoint's groups,
# ['tandem']['engine_groups']), of which only each group's lr_scale and the reference
# group are kept (LayoutFollower.follow_values).


def serialised(sync_before=False, load=False):
    """fn(opt, ...) under the optimizer's lock, so it falls between two steps. With
    sync_before, the live weights are read first (TandemOptimizer._sync_params); with
    load, the engine is rebound first (_rebind_for_load) and the parameters' version
    counters recorded after (Note [The parameter is the source of truth] in
    _core/engine.py)."""
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


# ----------------------------------------------------------------------------------------
# Param groups


def torch_groups(opt):
    """param_groups as torch's state_dict writes them: params as indices."""
    groups, index = [], 0
    for group in opt.param_groups:
        n = len(group["params"])
        groups.append(dict(_values(group), params=list(range(index, index + n))))
        index += n
    return groups


def _values(group):
    """A param group's values: every key but "params"."""
    return {key: value for key, value in group.items() if key != "params"}


def saved_param_groups(opt, sd, check):
    """(values, hypers) of state dict `sd`'s param_groups, one per optimizer group, each
    listing as many params as that group has; check(saved, params, where) adds the
    caller's checks. Raises ValueError naming the field."""
    saved_groups = listing(need(sd, "param_groups", "state dict"), "state dict['param_groups']",
                           len(opt.param_groups))
    groups, hypers = [], []
    for g, (saved, group) in enumerate(zip(saved_groups, opt.param_groups)):
        gw = "state dict['param_groups'][%d]" % g
        params = listing(need(saved, "params", gw), gw + "['params']", len(group["params"]))
        check(saved, params, gw)
        hypers.append(check_group_values(opt, saved, gw))
        groups.append(_values(saved))
    return groups, hypers


def check_group_values(opt, group, where):
    """The engine hyper-parameters of a saved param group, checked with the
    constructor's checks and messages, as ValueErrors."""
    mapping(group, where)
    try:
        return _options.group_values(opt._ALGORITHM, opt._hyper, None, group, where)[1]
    except TypeError as e:
        raise ValueError(str(e)) from None


def engine_groups_from(hypers, lr_scales):
    return [dict(h, lr_scale=float(s)) for h, s in zip(hypers, lr_scales)]


def apply_groups(opt, groups, ref_group, engine_groups):
    """Sets the param_groups' values (params kept) and the layout's reference values
    (ref_group and those of `engine_groups`); everything was checked before."""
    for saved, group in zip(groups, opt.param_groups):
        group.update(_values(saved))
    hypers = [{k: v for k, v in h.items() if k != "lr_scale"} for h in engine_groups]
    opt._layout.ref_group, opt._layout.engine_hyper = ref_group, hypers
    opt._layout.lr_scales = [h["lr_scale"] for h in engine_groups]
    opt._core.hypers = [dict(h) for h in hypers]


# ----------------------------------------------------------------------------------------
# torch.optim's state


# torch.optim's names of the moments (momentum, variance), by algorithm.
_MOMENTS = {"adam": ("exp_avg", "exp_avg_sq"), "adamw": ("exp_avg", "exp_avg_sq"),
            "lion": ("exp_avg",), "sgd": ("momentum_buffer",)}


@serialised(sync_before=True)
def to_torch_state(opt):
    """A state dict of the torch.optim optimizer of the same algorithm: AdamW/Adam:
    ``state[i] = {"step": float tensor, "exp_avg", "exp_avg_sq"}`` (fp32, the parameter's
    shape); SGD: ``{"momentum_buffer"}`` (None without momentum); Lion: ``{"exp_avg",
    "step"}``. Parameters not yet stepped have no state; the masters are not part of
    it."""
    snap = opt._core.snapshot()
    snap = convert(snap, snap["master"], "f32", "f32")
    m, v = F32["momentum"], F32["variance"]
    algorithm = opt._ALGORITHM
    state = {}
    for k, t in enumerate(snap["tensors"]):
        step = int(t["step"])
        if step == 0:
            continue
        p = opt._core.params[k]

        def moment(name, t=t, p=p):
            a = torch.from_numpy(t[name]).contiguous().reshape(_dist.local(p).shape)
            return _dist.wrap_like(a, p, tuple(p.shape)) if opt._core.sharded else a
        if algorithm == "sgd":
            entry = {"momentum_buffer": moment(m) if m in t else None}
        else:
            entry = {"step": torch.tensor(float(step))}
            entry.update((key, moment(a)) for key, a in zip(_MOMENTS[algorithm], (m, v)))
        state[opt._layout.indices[k]] = entry
    return {"state": state, "param_groups": torch_groups(opt)}


@serialised(load=True)
def from_torch_state(opt, sd):
    """Loads a torch.optim state dict (AdamW/Adam: exp_avg, exp_avg_sq, step; SGD:
    momentum_buffer; Lion-style: exp_avg) into a Tandem optimizer of any formats, the
    masters from the parameters; a parameter without state starts fresh. Every field
    is checked before anything changes (ValueError naming it)."""
    mapping(sd, "state dict")
    algorithm = opt._ALGORITHM

    def check_flags(saved, params, gw):
        for key in ("amsgrad", "maximize"):
            if saved.get(key):
                raise ValueError("%s has %s=True, which tandem does not support" % (gw, key))

    groups, _hypers = saved_param_groups(opt, sd, check_flags)
    ref_group, lr_scales, engine_hyper = reference_values(*opt._group_values(groups))
    engine_groups = engine_groups_from(engine_hyper, lr_scales)
    state = mapping(need(sd, "state", "state dict"), "state dict['state']")

    live = opt._core.snapshot()
    tensors = []
    for k, info in enumerate(live["tensors"]):
        p = opt._core.params[k]
        n = p.numel()
        index = opt._layout.indices[k]
        entry = state.get(index, {})
        ew = "state dict['state'][%d]" % index
        mapping(entry, ew)
        hyper = engine_groups[info["group"]]
        t = {key: info[key] for key in ("name", "numel", "shape", "param_dtype",
                                        "grad_dtype", "group")}
        t[F32["master"]] = p.detach().to("cpu", torch.float32).reshape(-1).numpy().copy()

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
        names = _MOMENTS[algorithm]
        values = [moment(key) for key in names]
        missing = [key for key, v in zip(names, values) if v is None]
        if algorithm in ("adam", "adamw") and entry and missing:
            raise ValueError("%s has no key %r" % (ew, missing[0]))
        if entry.get("max_exp_avg_sq") is not None:
            raise ValueError("%s has max_exp_avg_sq (amsgrad), which tandem does not "
                             "support" % ew)
        # SGD and some Lion implementations keep no step.
        t["step"] = (step_value(entry["step"], ew + "['step']", MAX_STEP) if "step" in entry
                     else 1 if values[0] is not None else 0)
        for c, value in zip(("momentum", "variance"), values):
            if c in components(algorithm, hyper):
                t[F32[c]] = np.zeros(n, np.float32) if value is None else value
        v = t.get(F32["variance"])
        if v is not None and (np.any(v < 0) or np.any(np.isnan(v))):
            raise ValueError("%s['exp_avg_sq'] has negative or NaN entries" % ew)
        tensors.append(t)
    step = max([t["step"] for t in tensors] + [0])
    snap = {"algorithm": algorithm, "master": "f32", "momentum": "f32", "variance": "f32",
            "step": step, "groups": engine_groups, "tensors": tensors, "metadata": ""}
    opt._core.restore(convert(snap, *opt._core.formats))
    apply_groups(opt, groups, ref_group, engine_groups)


@serialised(sync_before=True)
def export_masters(opt, path, module=None):
    """Writes the fp32 master weights of the stepped parameters to `path` as safetensors
    (atomically), each under its name and with its shape: the names of `module`
    (``module.named_parameters()``) when given, else the param groups' ``param_names``,
    else the engine's tensor names. Raises ValueError for duplicate or missing names."""
    snap = opt._core.snapshot()
    metadata = {"format": "pt", "tandem_algorithm": snap["algorithm"],
                "tandem_master": snap["master"], "tandem_step": str(snap["step"])}
    snap = convert(snap, "f32", snap["momentum"], snap["variance"])
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
        p = opt._core.params[k]
        name = by_id.get(id(p), t["name"] if module is None else None)
        if name is None:
            raise ValueError("parameter %d (shape %s) is not a parameter of the given "
                             "module" % (opt._layout.indices[k], tuple(p.shape)))
        if name in tensors:
            raise ValueError("two parameters are both named %r" % name)
        shape = list(t["shape"]) or list(p.shape)
        tensors[name] = (shape, np.ascontiguousarray(t[F32["master"]], dtype="<f4"))
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


def reference_values(lrs, hypers):
    """(ref_group, lr_scales, hypers): the group with the largest lr, each group's lr
    ratio to it, and the hyper-parameters (LayoutFollower.follow_values)."""
    ref_group = max(range(len(lrs)), key=lambda i: lrs[i])
    ref = lrs[ref_group]
    return ref_group, [(lr / ref if ref > 0 else 1.0) for lr in lrs], [dict(h) for h in hypers]
