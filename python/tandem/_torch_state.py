"""tandem.torch optimizers and torch.optim's state, both ways, and the masters as a
safetensors file:

* ``to_torch_state`` / ``from_torch_state``: torch.optim.AdamW/Adam/SGD (and
  Lion-style) state dicts;
* ``export_masters``: the fp32 master weights, by parameter name.

Each takes the optimizer (a ``tandem.torch.TandemOptimizer``) first and runs under its
lock (_state_common.serialised). docs/python.md, "Moving from and to torch.optim".
"""

import json
import os
import struct
from collections.abc import Mapping

import numpy as np
import torch

from tandem import _arrays
from tandem import _dist
from tandem import _state_common as common
from tandem._state_common import (MAX_STEP, apply_groups, bookkeeping, engine_groups_from, need,
                                  restore, saved_param_groups, snapshot, step_value, torch_groups)


@common.serialised(sync_before=True)
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
    snap = snapshot(opt)
    snap = _arrays.convert(snap, snap["master"], "f32", "f32")
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
        if algorithm in ("adam", "adamw"):
            entry = {"step": torch.tensor(float(step)), "exp_avg": moment("m_f32"),
                     "exp_avg_sq": moment("v_f32")}
        elif algorithm == "lion":
            entry = {"step": torch.tensor(float(step)), "exp_avg": moment("m_f32")}
        else:
            entry = {"momentum_buffer": moment("m_f32") if "m_f32" in t else None}
        state[opt._indices[k]] = entry
    return {"state": state, "param_groups": torch_groups(opt)}


@common.serialised(load=True)
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

    groups, _hypers = saved_param_groups(opt, sd, check_flags)
    ref_group, lr_scales, engine_hyper = bookkeeping(opt, groups)
    engine_groups = engine_groups_from(engine_hyper, lr_scales)
    state = need(sd, "state", "state dict")
    if not isinstance(state, Mapping):
        raise ValueError("state dict['state'] must be a dict, got %s" % type(state).__name__)

    live = snapshot(opt)
    tensors = []
    for k, info in enumerate(live["tensors"]):
        p = opt._core.params[k]
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
            step = step_value(entry["step"], ew + "['step']", MAX_STEP)
        else:  # SGD and some Lion implementations keep no step
            step = 1 if values[0] is not None else 0
        if _arrays.has_momentum(algorithm, hyper):
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
    snap = _arrays.convert(snap, *opt._core.formats)
    restore(opt, snap)
    apply_groups(opt, groups, ref_group, lr_scales, engine_hyper)


@common.serialised(sync_before=True)
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
    snap = snapshot(opt)
    metadata = {"format": "pt", "tandem_algorithm": snap["algorithm"],
                "tandem_master": snap["master"], "tandem_step": str(snap["step"])}
    snap = _arrays.convert(snap, "f32", snap["momentum"], snap["variance"])
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
