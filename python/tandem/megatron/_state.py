"""tandem.megatron.TandemAdam's state half: TransformerEngine FusedAdam's precision-aware
interface (``optimizer.state[p]``, ``get_unscaled_state``, ``set_scaled_state``,
``initialize_state``) and Megatron's state dicts, over the front-end core's snapshots
(_core/engine.py).

Note [Engine state between steps]: Megatron's checkpoint code reads and writes the state
one tensor at a time, in fp32. One engine snapshot, taken at the first such call after a
step, serves them until the next step: a read decodes one tensor's arrays, a write
encodes into the snapshot, which is restored into the engine once, before the next step
(docs/megatron.md, "Checkpoints").

Note [Masters of a fresh engine]: as TransformerEngine creates its masters at the first
step, the engine, until it has stepped or had state loaded, re-reads its masters from
the parameters before it steps and before a snapshot (docs/megatron.md, "When the state
is created").
"""

import numpy as np
import torch

from tandem._core import dist as _dist
from tandem._core.state import COMPONENTS, NAMES, decode_f32, encode_f32, snapshot_array

# Megatron's state names -> the snapshot component they live in.
_STATE_NAMES = ("master_param", "exp_avg", "exp_avg_sq")
_COMPONENT = {"master_param": "master", "exp_avg": "momentum", "exp_avg_sq": "variance"}
_STATE_DICT_VERSION = 1


def _check_state_name(state_name):
    if state_name not in _STATE_NAMES:
        raise KeyError("unknown state %r (master_param, exp_avg, exp_avg_sq)" % (state_name,))


def numbered_groups(param_groups):
    """torch's state-dict form of param_groups: every key, "params" as indices numbered
    over all groups."""
    groups, index = [], 0
    for group in param_groups:
        n = len(group["params"])
        groups.append(dict({key: value for key, value in group.items() if key != "params"},
                           params=list(range(index, index + n))))
        index += n
    return groups


def check_groups(groups, param_groups):
    """ValueError unless the saved `groups` (a list) are as many as param_groups and each
    holds as many params as its counterpart."""
    if not isinstance(groups, (list, tuple)) or len(groups) != len(param_groups):
        raise ValueError("state dict has %s param groups, optimizer %d" % (
            len(groups) if isinstance(groups, (list, tuple)) else "no", len(param_groups)))
    for g, (saved, group) in enumerate(zip(groups, param_groups)):
        keys = saved.get("params", [])
        if len(keys) != len(group["params"]):
            raise ValueError("param group %d has %d params in the state dict, %d here"
                             % (g, len(keys), len(group["params"])))


class StateView:
    """``optimizer.state[p]``: the three state names of one engine tensor, read as decoded
    fp32 copies (``get_unscaled_state``) and encoded when assigned (``set_scaled_state``)."""

    __slots__ = ("_opt", "_param")

    def __init__(self, opt, param):
        self._opt = opt
        self._param = param

    def __getitem__(self, name):
        if name not in _STATE_NAMES:
            raise KeyError(name)
        return self._opt.get_unscaled_state(self._param, name)

    def __setitem__(self, name, value):
        self._opt.set_scaled_state(self._param, name, value)

    def __contains__(self, name):
        return name in _STATE_NAMES

    def __iter__(self):
        return iter(_STATE_NAMES)

    def __len__(self):
        return len(_STATE_NAMES)

    def keys(self):
        return list(_STATE_NAMES)

    def items(self):
        return [(n, self[n]) for n in _STATE_NAMES]

    def values(self):
        return [self[n] for n in _STATE_NAMES]

    def get(self, name, default=None):
        return self[name] if name in _STATE_NAMES else default

    def __repr__(self):
        return "TandemAdam state view (%s)" % ", ".join(_STATE_NAMES)


class StateAccess:
    """The state half of a TandemAdam ``opt``, which holds it as ``opt._access`` and
    forwards its state methods here. Reaches the optimizer through ``opt`` only: its
    ``_lock``, ``_core`` (built by ``_ensure_engine()``), ``_formats``, ``algorithm``,
    ``state_device`` and ``param_groups``; keeps the snapshot cache itself."""

    def __init__(self, opt):
        self._opt = opt
        self.reset()

    def reset(self):
        """Forgets everything (a new engine)."""
        self._issued = None        # (snapshot, {k: entry}) of the last state_dict()
        self._snap = None          # Note [Engine state between steps]
        self._snap_dirty = False   # the cached snapshot differs from the engine
        self._decoded = {}         # k -> {state name: fp32 numpy array}
        self._pending = {}         # k -> {state name: fp32 tensor} from load_state_dict
        self.fresh = True          # Note [Masters of a fresh engine]

    def forget_snapshot(self):
        self._snap = None
        self._decoded = {}

    def _engine_index(self, param):
        """The engine's index of `param`, the engine built first when there is none (call
        with ``_lock`` held); KeyError for a tensor that is not a parameter."""
        self._opt._ensure_engine()
        core = self._opt._core
        k = core.index_by_id.get(id(param)) if core is not None else None
        if k is None or core.params[k] is not param:
            raise KeyError("tensor of shape %s is not a parameter of this TandemAdam"
                           % (tuple(param.shape),))
        return k

    def initialize_state(self, param, store_param_remainders=False):
        """Creates the optimizer state (the engine's, for every parameter at once; masters
        from the parameters: Note [Masters of a fresh engine])."""
        if store_param_remainders:
            raise ValueError("store_param_remainders=True is not supported")
        with self._opt._lock:
            self._engine_index(param)

    def snapshot(self):
        """The engine state with set_scaled_state's writes (Note [Engine state between
        steps]; load_state_dict's placeholders are not in it: flush); cached
        until the next step."""
        if self._snap is None:
            if self.fresh:
                self._opt._core.reload(list(range(len(self._opt._core.params))))
            self._snap = self._opt._core.snapshot()
            self._snap_dirty = False
        return self._snap

    def _decode(self, k):
        """{state name: fp32 numpy array} of engine tensor k."""
        got = self._decoded.get(k)
        if got is None:
            snap = self.snapshot()
            if _dist.local(self._opt._core.params[k]).numel() == 0:  # an empty shard
                got = {name: np.zeros(0, np.float32) for name in _STATE_NAMES}
            else:
                f32 = decode_f32(snap, snap["tensors"][k], self._opt._core.formats_of(k))
                got = {name: f32[_COMPONENT[name]] for name in _STATE_NAMES}
            self._decoded[k] = got
        return got

    def get_unscaled_state(self, param, state_name):
        """State ``state_name`` ("master_param", "exp_avg", "exp_avg_sq") of ``param`` as a
        new fp32 tensor of the parameter's shape, on the CPU or the parameter's device
        (state_device); for a DTensor parameter, its local shard as a DTensor placed like
        the parameter."""
        _check_state_name(state_name)
        with self._opt._lock:
            k = self._engine_index(param)
            pending = self._pending.get(k, {}).get(state_name)
            if pending is not None:
                out = pending.detach().to(device="cpu", dtype=torch.float32, copy=True)
            else:
                out = torch.from_numpy(self._decode(k)[state_name].copy())
            out = out.view(_dist.local(param).shape)
            if self._opt.state_device == "param" and param.device.type != "cpu":
                out = out.to(param.device)
            if _dist.is_dtensor(param):  # this rank's shard, placed as the parameter
                out = _dist.wrap_like(out, param, tuple(param.shape))
            return out

    def set_scaled_state(self, param, state_name, unscaled_state):
        """Sets state ``state_name`` of ``param`` from fp32 values (any device and float
        dtype, ``param.numel()`` elements), encoded in the engine's format; the engine gets
        it before the next step (and the parameter its master then). "padding" (the flag
        Megatron's dp_reshardable checkpoints keep beside the states) is ignored."""
        if state_name == "padding":
            return
        _check_state_name(state_name)
        with self._opt._lock:
            k = self._engine_index(param)
            value = self._as_values(k, state_name, unscaled_state)
            self.snapshot()
            self._encode(k, {state_name: value})
            self._pending.get(k, {}).pop(state_name, None)
            self.fresh = False

    def _as_values(self, k, state_name, value):
        p = self._opt._core.params[k]
        if isinstance(value, torch.Tensor):
            value = _dist.local(value)  # a DTensor: this rank's shard
        if not isinstance(value, torch.Tensor):
            raise TypeError("state %r of tensor %d must be a tensor, got %s"
                            % (state_name, k, type(value).__name__))
        if not value.is_floating_point():
            raise ValueError("state %r of tensor %d has dtype %s; give fp32 values (int16 "
                             "param remainders are not supported)" % (state_name, k,
                                                                     value.dtype))
        if value.numel() != _dist.local(p).numel():
            raise ValueError("state %r of tensor %d (%s) has %d elements, expected %d"
                             % (state_name, k, self._opt._core.label(k), value.numel(),
                                _dist.local(p).numel()))
        return value.detach().to(device="cpu", dtype=torch.float32).reshape(-1).numpy()

    def _encode(self, k, values):
        """Writes {state name: fp32 numpy array} into tensor k of the cached snapshot in
        the engine's formats (the other components are copied exactly)."""
        self._snap["tensors"][k] = encode_f32(
            self._snap, self._snap["tensors"][k], self._opt._core.formats_of(k),
            {_COMPONENT[name]: value for name, value in values.items()})
        self._snap_dirty = True
        self._decoded.pop(k, None)

    def flush(self):
        """Encodes the values load_state_dict kept aside into the cached snapshot, and
        restores it into the engine if anything was written to it."""
        if self._pending:
            pending, self._pending = self._pending, {}
            self.snapshot()
            for k, values in sorted(pending.items()):
                if values:
                    self._encode(k, {n: self._as_values(k, n, v) for n, v in values.items()})
        if self._snap is not None and self._snap_dirty:
            self._snap["groups"] = self._opt._core.engine_groups()
            self._opt._core.restore(self._snap)
            self._snap_dirty = False

    def state_dict(self):
        """torch-style: ``param_groups`` (their keys, "params" as indices, and "step") and
        ``state[i]`` for parameter i (numbering over param_groups, parameters with no
        elements included and empty) with the engine's arrays for that tensor as CPU
        tensors (the dtypes of tandem._C.state_arrays(), bf16 bit patterns as int16) and
        "step" (a float tensor). "tandem" holds the version, algorithm and formats. The
        arrays share memory with the cached snapshot: treat them as read-only. A tensor
        that holds values load_state_dict kept aside (see there) is given in the fp32
        layout instead, those values as they came."""
        with self._opt._lock:
            groups = numbered_groups(self._opt.param_groups)
            state, issued = {}, {}
            if self._opt._core is None:
                # No state yet (it is created at the first step): each parameter's step
                # is 0 (Megatron's DistributedOptimizer.state_dict reads one per entry).
                state = {i: {"step": torch.tensor(0.0)} for g in groups for i in g["params"]}
            else:
                indices = {id(p): i for i, p in enumerate(
                    p for group in self._opt.param_groups for p in group["params"])}
                snap = self.snapshot()
                for k, p in enumerate(self._opt._core.params):
                    t = snap["tensors"][k]
                    entry = {"step": torch.tensor(float(t["step"]))}
                    pending = self._pending.get(k)
                    if pending:
                        # Values load_state_dict kept aside (Megatron's placeholders, to be
                        # replaced by set_scaled_state): handed back as they came.
                        for name in _STATE_NAMES:
                            entry[name] = pending[name] if name in pending else \
                                torch.from_numpy(self._decode(k)[name].copy())
                    else:
                        entry.update((key, torch.from_numpy(np.asarray(t[key])))
                                     for key in NAMES if key in t)
                        issued[k] = entry
                    state[indices[id(p)]] = entry
                self._issued = (snap, issued)
                for g in groups:
                    g["step"] = int(snap["step"])
            return {"state": state, "param_groups": groups,
                    "tandem": dict(version=_STATE_DICT_VERSION, algorithm=self._opt.algorithm,
                                   **dict(zip(COMPONENTS, self._opt._formats)))}

    def load_state_dict(self, state_dict):
        """Restores ``param_groups`` (every key but "params") and the state.

        ``state`` entries may hold the engine's arrays (from ``state_dict``; the formats
        must be this optimizer's) or fp32 values under "master_param", "exp_avg",
        "exp_avg_sq" (FusedAdam's unscaled layout; Megatron passes placeholders here and
        sets the real values with ``set_scaled_state`` afterwards, so these are kept
        aside and encoded only at the next step if nothing replaced them), and "step".
        Steps: an entry's "step" in a state dict of ours (with its "tandem" entry), else
        the group's "step" (Megatron's), else the entry's. Raises ValueError naming the
        first mismatch; nothing changes then."""
        with self._opt._lock:
            groups = state_dict["param_groups"]
            state = state_dict.get("state", {})
            header = state_dict.get("tandem")
            check_groups(groups, self._opt.param_groups)
            if header is not None:
                mine = (self._opt.algorithm,) + self._opt._formats
                theirs = tuple(header.get(key) for key in ("algorithm",) + COMPONENTS)
                if theirs != mine:
                    raise ValueError("state dict has algorithm and formats %s, optimizer %s"
                                     % (theirs, mine))
            plan = self._plan_load(groups, state, header is not None) if state else []
            if not plan:
                self._load_groups(groups)
                return
            snap = self.snapshot()
            backup = (list(snap["tensors"]), snap["step"], self._snap_dirty,
                      dict(self._decoded))
            try:
                pending = {}
                snap["step"] = max(int(snap["step"]), max(step for _, step, _, _ in plan))
                for k, step, unscaled, arrays in plan:
                    t = dict(snap["tensors"][k], step=step)
                    if arrays:  # the saved arrays replace the engine's
                        t = {key: v for key, v in t.items() if key not in NAMES}
                        t.update((key, snapshot_array(key, v)) for key, v in arrays.items())
                    snap["tensors"][k] = t
                    if unscaled:
                        pending[k] = {n: v.detach() for n, v in unscaled.items()}
                    self._decoded.pop(k, None)
                self._snap_dirty = True
                if any(arrays for _, _, _, arrays in plan):
                    # Validates now (sizes, formats, values) so a bad entry raises here.
                    core = self._opt._core
                    core.engine.restore(dict(snap, groups=core.engine_groups()))
                    self._snap_dirty = False
            except Exception:
                snap["tensors"], snap["step"], self._snap_dirty, self._decoded = backup
                raise
            self._load_groups(groups)
            for g in self._opt.param_groups:
                g["step"] = int(snap["step"])
            self._pending.update(pending)
            self.fresh = False

    def _plan_load(self, groups, state, own):
        """[(k, step, fp32 values, arrays)] for the entries of `state` to load, checked
        before anything changes."""
        plan = []
        for g, (saved, group) in enumerate(zip(groups, self._opt.param_groups)):
            for sid, p in zip(saved["params"], group["params"]):
                if sid not in state or p.numel() == 0:
                    continue
                entry = state[sid]
                step = self._entry_step(entry, saved, own)
                unscaled = {n: entry[n] for n in _STATE_NAMES if n in entry}
                arrays = {key: entry[key] for key in NAMES if key in entry}
                if not unscaled and not arrays and step == 0 and self.fresh:
                    continue  # state_dict() of an optimizer without state yet
                k = self._engine_index(p)
                if (self._issued is not None and self._issued[0] is self._snap
                        and self._issued[1].get(k) is entry and not self._snap_dirty
                        and k not in self._pending
                        and step == int(self._snap["tensors"][k]["step"])):
                    continue  # our own state_dict() entry, state unchanged since
                if unscaled and arrays:
                    raise ValueError("state entry %r mixes fp32 state names and engine "
                                     "arrays" % (sid,))
                for n, v in unscaled.items():
                    if not isinstance(v, torch.Tensor) or v.numel() != p.numel():
                        raise ValueError("state entry %r: %r must be a tensor of %d elements"
                                         % (sid, n, p.numel()))
                plan.append((k, step, unscaled, arrays))
        return plan

    @staticmethod
    def _entry_step(entry, group, own):
        """The step a state entry loads with: the entry's in our own state dicts (with their
        "tandem" header), else the group's (Megatron's DistributedOptimizer passes the
        checkpoint's step there, as TE FusedAdam keeps it, and may hand back entries of an
        earlier state_dict() with a stale "step"), else the entry's."""
        step = entry.get("step") if own else None
        if step is None:
            step = group.get("step")
        if step is None:
            step = entry.get("step")
        if isinstance(step, torch.Tensor):
            step = step.item()
        return int(step or 0)

    def _load_groups(self, groups):
        """Every key of the saved groups but "params" (Megatron keeps its scheduler's
        max_lr, min_lr, lr_mult, wd_mult... there)."""
        for saved, group in zip(groups, self._opt.param_groups):
            group.update((key, value) for key, value in saved.items() if key != "params")
