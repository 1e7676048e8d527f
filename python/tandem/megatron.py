"""Megatron-Core's distributed optimizer stepping through Tandem's engine.

Usage (docs/megatron.md)::

    import tandem.megatron
    optimizer = tandem.megatron.get_megatron_optimizer(
        config, model_chunks, offload_fraction=0.5,
        master_format="bf16+ecc8", momentum_format="q8", variance_format="q8")
    # then Megatron's usual loop: optimizer.zero_grad(); forward/backward; optimizer.step()

Megatron-Core's DistributedOptimizer, with ``use_precision_aware_optimizer``, hands its
inner optimizer the bf16 shard views of the parameters (slices of its parameter buffer)
and the fp32 gradient shards as ``param.decoupled_grad`` (views of its gradient buffer),
and keeps no fp32 copy of the parameters itself: the inner optimizer owns the masters.
TransformerEngine's FusedAdam is that inner optimizer normally; :class:`TandemAdam`
takes its place with the same interface, and runs the step in a Tandem HybridOptimizer
whose parameter pointers are the bf16 shards and whose gradient pointers are the
``decoupled_grad`` buffers, so the only masters and moments are the engine's, in its
formats, on the GPU and (``offload_fraction``) in host memory.

Megatron owns everything around the update: gradient reduce-scatter, loss scaling and
unscaling, the gradient norm and clipping (it scales the gradients before ``step()``),
the parameter all-gather, the learning-rate schedule (written into ``param_groups``
before each step) and checkpoint layout; the engine steps with clipping off and a loss
scale of 1.

Note [Engine state between steps]: Megatron's checkpoint code reads and writes the
state one tensor at a time (``get_unscaled_state`` / ``set_scaled_state``, fp32 values).
The adapter takes one engine snapshot when the first such call comes after a step and
keeps it until the next step; reads decode that tensor's arrays (tandem._C.
convert_snapshot on a one-tensor snapshot: O(tensor)); writes encode into the cached
snapshot, which is restored into the engine once, before the next step. A checkpoint
thus costs one host copy of the encoded state, not a snapshot per tensor.

Note [Masters of a fresh engine]: TransformerEngine creates its master weights at the
first step (or initialize_state), from the parameters as they are then, so weights
loaded into the model after the optimizer was built are picked up. The engine is built
when first needed (its masters are taken from the parameters then) and, until it has
stepped or had state loaded, re-reads its masters from the parameters before it steps
and before a snapshot, which gives the same behaviour.
"""

import math
import threading
import warnings

import numpy as _np
import torch as _torch

from tandem import _C
from tandem import _dist
from tandem import _options

__all__ = ["TandemAdam", "get_megatron_optimizer", "tandem_optimizers",
           "SkippedStepWarning"]

_DTYPE_NAMES = {_torch.float32: "f32", _torch.bfloat16: "bf16", _torch.float16: "f16"}

# Megatron's state names -> the snapshot component they live in.
_STATE_NAMES = ("master_param", "exp_avg", "exp_avg_sq")
_COMPONENT = {"master_param": "master", "exp_avg": "momentum", "exp_avg_sq": "variance"}
_F32_KEY = {"master_param": "master_f32", "exp_avg": "m_f32", "exp_avg_sq": "v_f32"}
_ARRAYS = {"master": ("master_f32", "master_bf16", "ecc8", "ecc16"),
           "momentum": ("m_f32", "m_codes", "m_scales"),
           "variance": ("v_f32", "v_codes", "v_scales")}
# Snapshot array -> the torch dtype it crosses as in state_dict() (same element size).
_ARRAY_DTYPES = {"master_f32": _torch.float32, "m_f32": _torch.float32,
                 "v_f32": _torch.float32, "master_bf16": _torch.int16,
                 "ecc16": _torch.int16, "m_scales": _torch.int16, "v_scales": _torch.int16,
                 "ecc8": _torch.int8, "m_codes": _torch.int8, "v_codes": _torch.uint8}
_NP_DTYPES = {"master_f32": _np.float32, "m_f32": _np.float32, "v_f32": _np.float32,
              "master_bf16": _np.int16, "ecc16": _np.int16, "m_scales": _np.int16,
              "v_scales": _np.int16, "ecc8": _np.int8, "m_codes": _np.int8,
              "v_codes": _np.uint8}
_STATE_DICT_VERSION = 1


class SkippedStepWarning(UserWarning):
    """A step found a non-finite gradient on some rank and changed nothing on any rank
    (``TandemAdam.skipped_steps`` counts them)."""


def _check_state_name(state_name):
    if state_name not in _STATE_NAMES:
        raise KeyError("unknown state %r (master_param, exp_avg, exp_avg_sq)" % (state_name,))


def _format_from_dtype(what, dtype, argument):
    if dtype is None or dtype == _torch.float32:
        return "f32"
    if what != "master" and dtype == _torch.uint8:
        return "q8"
    raise ValueError("%s=%s has no Tandem equivalent (fp32 -> 'f32'%s); pass Tandem's "
                     "%s_format instead" % (argument, dtype,
                                            "" if what == "master" else ", uint8 -> 'q8'",
                                            what))


class _StateView:
    """``optimizer.state[p]``: the three state names of one engine tensor. Reading one
    returns a decoded fp32 copy (``get_unscaled_state``); assigning one encodes it
    (``set_scaled_state``)."""

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


class TandemAdam(_torch.optim.AdamW):
    """TransformerEngine FusedAdam's precision-aware interface over a Tandem engine.

    Args (FusedAdam's, as Megatron passes them):
      params: parameters or param groups (Megatron's groups keep their extra keys:
        wd_mult, lr_mult, max_lr, ...; the adapter adds "step").
      lr, betas, eps, weight_decay: per group, read at every step (schedulers write them).
      bias_correction: must be True. amsgrad, capturable: must be False.
      adam_w_mode: True (default) for AdamW, False for Adam with L2 weight decay.
      master_weights: must be True (the engine always keeps masters; pick their format
        with master_format). set_grad_none: accepted, zero_grad always sets None.
      master_weight_dtype, exp_avg_dtype, exp_avg_sq_dtype: the state formats when the
        Tandem formats below are not given: float32 -> "f32", uint8 -> "q8" (moments).
      use_decoupled_grad: True (default): gradients are read from
        ``param.decoupled_grad`` (Megatron's fp32 grad-buffer shards); False: ``p.grad``.
      store_param_remainders: accepted when False (use master_format="bf16+ecc16" for
        the same memory).

    Tandem options (keyword-only): offload_fraction, master_format, momentum_format,
    variance_format, placement, host_threads, chunk_elements, pipeline_slots (as
    tandem.torch's optimizers); state_device: where ``get_unscaled_state`` puts its fp32
    copies: "param" (default: the parameter's device, as FusedAdam, which Megatron's
    checkpoint code expects) or "cpu" (host memory: a checkpoint then needs no GPU
    memory for them; with Megatron's default torch_dist format).

    A parameter whose gradient (``decoupled_grad``) is None at a step is not stepped.
    The engine skips a step in which any gradient is non-finite (on any rank of
    ``grad_stats_group`` when set: tandem.megatron.get_megatron_optimizer sets it), and
    counts it in ``skipped_steps`` with a SkippedStepWarning.

    Not thread-safe beyond what Megatron needs: one thread steps and checkpoints.
    """

    def __init__(self, params, lr=1e-3, bias_correction=True, betas=(0.9, 0.999), eps=1e-8,
                 weight_decay=0.0, amsgrad=False, *, adam_w_mode=True, set_grad_none=True,
                 capturable=False, master_weights=True, master_weight_dtype=_torch.float32,
                 exp_avg_dtype=_torch.float32, exp_avg_sq_dtype=_torch.float32,
                 use_decoupled_grad=True, store_param_remainders=False,
                 offload_fraction=0.0, master_format=None, momentum_format=None,
                 variance_format=None, placement="backward_order", host_threads=0,
                 chunk_elements=1 << 21, pipeline_slots=4, state_device="param"):
        if not bias_correction:
            raise ValueError("bias_correction=False is not supported by tandem")
        if amsgrad:
            raise ValueError("amsgrad is not supported by tandem")
        if capturable:
            raise ValueError("capturable=True (CUDA graphs) is not supported by tandem")
        if not master_weights:
            raise ValueError("master_weights=False is not supported: the engine always keeps "
                             "masters; use master_format='bf16' for bf16-only masters")
        if store_param_remainders:
            raise ValueError("store_param_remainders=True is not supported; "
                             "master_format='bf16+ecc16' keeps 16 extra bits per parameter "
                             "the same way")
        if state_device not in ("cpu", "param"):
            raise ValueError("state_device must be 'cpu' or 'param', got %r" % (state_device,))
        _options.check_options(offload_fraction, host_threads, chunk_elements,
                               pipeline_slots, 0.0)
        self._formats = (
            master_format or _format_from_dtype("master", master_weight_dtype,
                                                "master_weight_dtype"),
            momentum_format or _format_from_dtype("momentum", exp_avg_dtype, "exp_avg_dtype"),
            variance_format or _format_from_dtype("variance", exp_avg_sq_dtype,
                                                  "exp_avg_sq_dtype"))
        for f in self._formats:
            if not isinstance(f, str):
                raise ValueError("state formats are names (str), got %r" % (f,))
        defaults = dict(lr=lr, bias_correction=True, betas=betas, eps=eps,
                        weight_decay=weight_decay, step=0)
        # torch.optim.Optimizer's constructor, not AdamW's: AdamW's defaults (foreach,
        # fused, ...) mean nothing here. AdamW is the base class because Megatron's
        # DistributedOptimizer accepts (TE FusedAdam, torch AdamW) instances only.
        _torch.optim.Optimizer.__init__(self, params, defaults)
        self.adam_w_mode = bool(adam_w_mode)
        self.algorithm = "adamw" if self.adam_w_mode else "adam"
        self.master_weights = True
        self.use_decoupled_grad = bool(use_decoupled_grad)
        self.store_param_remainders = False
        self.set_grad_none = bool(set_grad_none)
        self.capturable = False
        self.master_weight_dtype = master_weight_dtype
        self.exp_avg_dtype = exp_avg_dtype
        self.exp_avg_sq_dtype = exp_avg_sq_dtype
        self.offload_fraction = float(offload_fraction)
        self.state_device = state_device
        self._engine_options = dict(
            master=self._formats[0], momentum=self._formats[1], variance=self._formats[2],
            offload_fraction=float(offload_fraction), placement=placement,
            host_threads=int(host_threads), chunk_elements=int(chunk_elements),
            pipeline_slots=int(pipeline_slots))
        self.grad_stats_group = None  # a process group: skip decisions agree over it
        self.skipped_steps = 0
        self.rebuilds = 0  # engines rebuilt to carry state to moved gradient buffers
        self.last_result = None
        self._lock = threading.RLock()
        self._engine = None
        self._clear_engine_tables()

    # ------------------------------------------------------------------------------------
    # Engine layout

    def _clear_engine_tables(self):
        self._params = []          # engine tensor k -> parameter (the bf16 shard)
        self._index = {}           # id(parameter) -> k
        self._group_of = []        # k -> param group
        self._pptrs = []           # k -> parameter data_ptr the engine holds
        self._gptrs = []           # k -> gradient data_ptr the engine holds (0: placeholder)
        self._gdtypes = []         # k -> gradient dtype the engine was built with
        self._placeholder = None   # zero gradient buffer for tensors without one at build
        self._engine_groups = None  # the group dicts last given to the engine
        self._combine = (None, None)  # (group, callable) of the step's collective
        self._issued = None        # (snapshot, {k: entry}) of the last state_dict()
        self._snap = None          # Note [Engine state between steps]
        self._snap_dirty = False   # the cached snapshot differs from the engine
        self._decoded = {}         # k -> {state name: fp32 numpy array}
        self._pending = {}         # k -> {state name: fp32 tensor} from load_state_dict
        self._fresh = True         # Note [Masters of a fresh engine]
        self._carry = None         # the state of an engine being rebuilt (_rebuild)

    def _layout_params(self):
        """(params, group_of) of the current param_groups: every parameter with elements
        (a data-parallel rank may own no element of a group, or of any group)."""
        params, group_of = [], []
        for g, group in enumerate(self.param_groups):
            for p in group["params"]:
                if p.numel() > 0:
                    params.append(p)
                    group_of.append(g)
        return params, group_of

    def _grad_of(self, p):
        if self.use_decoupled_grad:
            return getattr(p, "decoupled_grad", None)
        return p.grad

    def _check_param(self, p, where, device):
        if p.dtype not in _DTYPE_NAMES:
            raise ValueError("%s has dtype %s; tandem takes float32, bfloat16 or float16"
                             % (where, p.dtype))
        if not p.is_contiguous():
            raise ValueError("%s is not contiguous" % where)
        if device is not None and p.device != device:
            raise ValueError("%s is on %s, other parameters on %s; one device per optimizer"
                             % (where, p.device, device))
        if p.device.type not in ("cpu", "cuda"):
            raise ValueError("%s is on %s; tandem runs on CUDA or on the host"
                             % (where, p.device))
        return p.device

    def _check_grad(self, k, g):
        p = self._params[k]
        where = "gradient of tensor %d (%s)" % (k, self._label(k))
        if g.numel() != p.numel():
            raise ValueError("%s has %d elements, the parameter %d" % (where, g.numel(),
                                                                      p.numel()))
        if g.dtype not in _DTYPE_NAMES:
            raise ValueError("%s has dtype %s (float32, bfloat16, float16)" % (where, g.dtype))
        if g.device != p.device:
            raise ValueError("%s is on %s, the parameter on %s" % (where, g.device, p.device))
        if not g.is_contiguous():
            raise ValueError("%s is not contiguous" % where)

    def _label(self, k):
        p = self._params[k]
        return "group %d, shape %s, %s" % (self._group_of[k], tuple(p.shape), p.dtype)

    def _build(self, carry=None):
        """A new engine over the current param_groups and gradients. carry: a snapshot
        dict to restore into it (the previous engine's state), or None (fresh state)."""
        params, group_of = self._layout_params()
        device = None
        for k, p in enumerate(params):
            device = self._check_param(p, "parameter %d of group %d" % (k, group_of[k]),
                                       device)
        grads = [self._grad_of(p) for p in params]
        placeholder = None
        missing = [p.numel() for p, g in zip(params, grads) if g is None]
        if missing:
            # The engine takes its gradient pointers now; tensors whose gradient does not
            # exist yet (Megatron sets decoupled_grad at its first step) read a zero
            # buffer until a step brings theirs (then the engine is rebuilt, once).
            dtype = _torch.float32 if self.use_decoupled_grad else params[0].dtype
            placeholder = _torch.zeros(max(missing), dtype=dtype, device=device)
        specs, pptrs, gptrs, gdtypes = [], [], [], []
        self._params = params
        self._group_of = group_of
        for k, (p, g) in enumerate(zip(params, grads)):
            if g is not None:
                self._check_grad(k, g)
                gptr, gdtype = g.data_ptr(), g.dtype
            else:
                gptr, gdtype = 0, placeholder.dtype
            specs.append(("t%d" % k, p.numel(), _DTYPE_NAMES[p.dtype], _DTYPE_NAMES[gdtype],
                          p.data_ptr(), gptr or placeholder.data_ptr(), group_of[k],
                          list(p.shape)))
            pptrs.append(p.data_ptr())
            gptrs.append(gptr)
            gdtypes.append(gdtype)
        groups = self._groups_for_engine()[1]
        cuda = device.type == "cuda"
        stream = 0
        if cuda:
            with _torch.cuda.device(device):
                current = _torch.cuda.current_stream(device)
                stream = current.cuda_stream
                current.synchronize()  # the engine reads the parameters now
                engine = _C.HybridOptimizer(specs, self.algorithm, groups, mode="gpu",
                                            cuda_stream=stream, **self._engine_options)
        else:
            engine = _C.HybridOptimizer(specs, self.algorithm, groups, mode="host",
                                        **self._engine_options)
        if carry is not None:
            carry = dict(carry, groups=groups)
            engine.restore(carry)
        self._engine = engine
        self._engine_groups = groups
        self._device = device
        self._stream = stream
        self._placeholder = placeholder
        self._pptrs, self._gptrs, self._gdtypes = pptrs, gptrs, gdtypes
        self._index = {id(p): k for k, p in enumerate(params)}
        self._snap = carry
        self._snap_dirty = False
        self._decoded = {}
        self._issued = None
        self.state.clear()
        for p in params:
            self.state[p] = _StateView(self, p)

    def _ensure_engine(self):
        """Builds the engine when there is none, or rebuilds it when param_groups hold
        other tensors than it was built over (Megatron replaces its params with the
        shard views after construction): allowed only while its state is fresh. Returns
        False, building nothing, when no parameter has an element (nothing to step)."""
        params, _ = self._layout_params()
        if self._engine is None:
            if not params:
                return False
            self._build(carry=self._carry)  # a rebuild that failed left its state here
            self._carry = None
            return True
        if len(params) == len(self._params) and all(
                a is b for a, b in zip(params, self._params)):
            return True
        if not self._fresh:
            raise ValueError("the parameters of TandemAdam's param_groups changed after its "
                             "state was created (stepped or loaded); build a new optimizer")
        self._engine = None  # free its memory before the new one takes its own
        if not params:
            self._clear_engine_tables()
            self.state.clear()
            return False
        self._build()
        return True

    def _groups_for_engine(self):
        """(lr, engine group dicts) from param_groups now: Note [One lr per step] in
        tandem/torch.py; the ratios are recomputed every step (Megatron's schedules give
        groups different min/max lrs, so ratios change)."""
        lrs, hypers = [], []
        for g, group in enumerate(self.param_groups):
            lr = group["lr"]
            if isinstance(lr, _torch.Tensor):
                lr = lr.item()
            lr = float(lr)
            if not math.isfinite(lr) or lr < 0:
                raise ValueError("group %d: lr must be finite and >= 0, got %r" % (g, lr))
            b1, b2 = group["betas"]
            lrs.append(lr)
            hypers.append(dict(beta1=float(b1), beta2=float(b2), eps=float(group["eps"]),
                               weight_decay=float(group["weight_decay"]), momentum=0.0,
                               dampening=0.0, nesterov=False))
        ref = max(lrs)
        return ref, [dict(h, lr_scale=(lr / ref if ref > 0 else 1.0))
                     for h, lr in zip(hypers, lrs)]

    # ------------------------------------------------------------------------------------
    # Step

    @_torch.no_grad()
    def step(self, closure=None):
        """One AdamW (Adam) update of every parameter whose gradient is not None, with
        the groups' lr, betas, eps and weight_decay as they are now. Megatron has
        already unscaled and clipped the gradients. Returns the closure's loss."""
        loss = None
        if closure is not None:
            with _torch.enable_grad():
                loss = closure()
        with self._lock:
            if not self._ensure_engine():
                return loss  # this rank owns no element
            active = bytearray(len(self._params))
            rebuild = False
            for k, p in enumerate(self._params):
                g = self._grad_of(p)
                if g is None:
                    continue
                active[k] = 1
                if (g.data_ptr() != self._gptrs[k] or g.dtype != self._gdtypes[k]
                        or p.data_ptr() != self._pptrs[k]):
                    self._check_grad(k, g)
                    rebuild = True
            if not any(active):
                return loss  # nothing to step (e.g. Megatron's dummy initialisation step)
            if rebuild:
                self._rebuild()
            self._flush()
            if self._fresh:
                self._engine.reload_params(list(range(len(self._params))))
                self._fresh = False
            lr, groups = self._groups_for_engine()
            if groups != self._engine_groups:
                self._engine.set_groups(groups)
                self._engine_groups = groups
            result = self._engine_step(lr, bytes(active), self._combine_fn())
            self._snap = None
            self._decoded = {}
            self.last_result = result
            applied, grad_norm, step = result[0], result[1], result[2]
            if applied:
                for group in self.param_groups:
                    group["step"] = int(step)
            else:
                self.skipped_steps += 1
                warnings.warn("tandem: non-finite gradient (norm %r): step skipped, nothing "
                              "changed (%d skipped so far)" % (grad_norm, self.skipped_steps),
                              SkippedStepWarning, stacklevel=3)
        return loss

    def _combine_fn(self):
        """The step's gradient-statistics collective over grad_stats_group (one small
        all-gather), so that every rank skips a step with a non-finite gradient."""
        group = self.grad_stats_group
        if self._combine[0] is not group:
            fn = None
            if group is not None:
                import torch.distributed as dist
                if dist.get_world_size(group) > 1:
                    fn = _dist.make_combine(group, self._device)
            self._combine = (group, fn)
        return self._combine[1]

    def _engine_step(self, lr, active, combine):
        if self._device.type != "cuda":
            return self._engine.step(lr, 0.0, 1.0, active, combine)
        with _torch.cuda.device(self._device):
            current = _torch.cuda.current_stream(self._device)
            if current.cuda_stream == self._stream:
                return self._engine.step(lr, 0.0, 1.0, active, combine)
            # The engine runs on the stream it was built with; order it after the
            # caller's stream and the caller's stream after it.
            engine = (_torch.cuda.default_stream(self._device) if self._stream == 0 else
                      _torch.cuda.ExternalStream(self._stream, device=self._device))
            engine.wait_stream(current)
            result = self._engine.step(lr, 0.0, 1.0, active, combine)
            current.wait_stream(engine)
            return result

    def _rebuild(self):
        """A new engine over the current gradient pointers, carrying the state over."""
        if self._fresh:
            self._engine = None
            self._build()
            return
        self._apply_pending()
        # The old engine goes first (its memory, host and device, is needed by the new
        # one); its state waits in _carry until a build succeeds.
        self._carry = self._snapshot()
        self._engine = None
        self._build(carry=self._carry)
        self._carry = None
        self._fresh = False
        self.rebuilds += 1
        if self.rebuilds == 2:
            warnings.warn("tandem: the gradient buffers moved again since the last step; "
                          "each move rebuilds the engine with a copy of its whole state. "
                          "Keep decoupled_grad in the same memory from step to step "
                          "(Megatron's gradient buffer does)", UserWarning, stacklevel=4)

    def zero_grad(self, set_to_none=True):
        """Drops every parameter's gradient (``decoupled_grad`` and ``grad``); Megatron
        zeroes its gradient buffer itself."""
        for group in self.param_groups:
            for p in group["params"]:
                if getattr(p, "decoupled_grad", None) is not None:
                    p.decoupled_grad = None
                if p.grad is not None:
                    p.grad = None

    def reload_params(self):
        """Re-reads every master from its parameter (weights written into the model after
        the optimizer state exists, outside a checkpoint load)."""
        with self._lock:
            if not self._ensure_engine():
                return
            self._flush()
            self._engine.reload_params(list(range(len(self._params))))
            self._snap = None
            self._decoded = {}

    # ------------------------------------------------------------------------------------
    # State access (FusedAdam's precision-aware interface)

    def _k(self, param):
        k = self._index.get(id(param))
        if k is None or self._params[k] is not param:
            raise KeyError("tensor of shape %s is not a parameter of this TandemAdam"
                           % (tuple(param.shape),))
        return k

    def initialize_state(self, param, store_param_remainders=False):
        """Creates the optimizer state (the engine's, for every parameter at once; masters
        from the parameters: Note [Masters of a fresh engine])."""
        if store_param_remainders:
            raise ValueError("store_param_remainders=True is not supported")
        with self._lock:
            self._ensure_engine()
            self._k(param)

    def _snapshot(self):
        """The engine state with set_scaled_state's writes (Note [Engine state between
        steps]; load_state_dict's placeholders are not in it: _apply_pending); cached
        until the next step."""
        if self._snap is None:
            if self._fresh:
                self._engine.reload_params(list(range(len(self._params))))
            self._snap = self._engine.snapshot()
            self._snap_dirty = False
        return self._snap

    def _mini(self, tensor, formats):
        """A one-tensor snapshot dict of `tensor` (a snapshot tensor dict) whose arrays
        are in `formats` (master, momentum, variance)."""
        s = self._snap
        named = dict(zip(("master", "momentum", "variance"), formats))
        return {"algorithm": s["algorithm"], "groups": s["groups"], "step": s["step"],
                "metadata": "", "tensors": [dict(tensor, formats=named)], **named}

    def _convert(self, tensor, have, want):
        """Snapshot tensor dict `tensor` (arrays in formats `have`) in formats `want`."""
        named = dict(zip(("master", "momentum", "variance"), want))
        return _C.convert_snapshot(self._mini(tensor, have), *want,
                                   tensor_formats=[named])["tensors"][0]

    def _decode(self, k):
        """{state name: fp32 numpy array} of engine tensor k."""
        got = self._decoded.get(k)
        if got is None:
            t = self._snapshot()["tensors"][k]
            if self._formats != ("f32", "f32", "f32"):
                t = self._convert(t, self._formats, ("f32", "f32", "f32"))
            got = {name: _np.asarray(t[_F32_KEY[name]], dtype=_np.float32)
                   for name in _STATE_NAMES}
            self._decoded[k] = got
        return got

    def get_unscaled_state(self, param, state_name):
        """State ``state_name`` ("master_param", "exp_avg", "exp_avg_sq") of ``param`` as a
        new fp32 tensor of the parameter's shape, on the CPU or the parameter's device
        (state_device)."""
        _check_state_name(state_name)
        with self._lock:
            self._ensure_engine()
            k = self._k(param)
            pending = self._pending.get(k, {}).get(state_name)
            if pending is not None:
                out = pending.detach().to(device="cpu", dtype=_torch.float32, copy=True)
            else:
                out = _torch.from_numpy(self._decode(k)[state_name].copy())
            out = out.view(param.shape)
            if self.state_device == "param" and param.device.type != "cpu":
                out = out.to(param.device)
            return out

    def set_scaled_state(self, param, state_name, unscaled_state):
        """Sets state ``state_name`` of ``param`` from fp32 values (any device and float
        dtype, ``param.numel()`` elements), encoded in the engine's format; the engine
        gets it before the next step (and the parameter its master then). "padding"
        (the flag Megatron's dp_reshardable checkpoints keep beside the states) is
        ignored."""
        if state_name == "padding":
            return
        _check_state_name(state_name)
        with self._lock:
            self._ensure_engine()
            k = self._k(param)
            value = self._as_values(k, state_name, unscaled_state)
            self._snapshot()
            self._encode(k, {state_name: value})
            self._pending.get(k, {}).pop(state_name, None)
            self._fresh = False

    def _as_values(self, k, state_name, value):
        if not isinstance(value, _torch.Tensor):
            raise TypeError("state %r of tensor %d must be a tensor, got %s"
                            % (state_name, k, type(value).__name__))
        if not value.is_floating_point():
            raise ValueError("state %r of tensor %d has dtype %s; give fp32 values (int16 "
                             "param remainders are not supported)" % (state_name, k,
                                                                     value.dtype))
        if value.numel() != self._params[k].numel():
            raise ValueError("state %r of tensor %d (%s) has %d elements, expected %d"
                             % (state_name, k, self._label(k), value.numel(),
                                self._params[k].numel()))
        return value.detach().to(device="cpu", dtype=_torch.float32).reshape(-1).numpy()

    def _encode(self, k, values):
        """Writes {state name: fp32 numpy array} into tensor k of the cached snapshot in
        the engine's formats (the other components are copied exactly)."""
        t = dict(self._snap["tensors"][k])
        formats = list(self._formats)
        for name, value in values.items():
            component = _COMPONENT[name]
            for key in _ARRAYS[component]:
                t.pop(key, None)
            t[_F32_KEY[name]] = _np.ascontiguousarray(value, dtype=_np.float32)
            formats[("master", "momentum", "variance").index(component)] = "f32"
        if tuple(formats) != self._formats:
            t = self._convert(t, tuple(formats), self._formats)
        self._snap["tensors"][k] = t
        self._snap_dirty = True
        self._decoded.pop(k, None)

    def _apply_pending(self):
        if not self._pending:
            return
        pending, self._pending = self._pending, {}
        self._snapshot()
        for k, values in sorted(pending.items()):
            if values:
                self._encode(k, {n: self._as_values(k, n, v) for n, v in values.items()})

    def _flush(self):
        """Restores the cached snapshot into the engine if anything was written to it."""
        self._apply_pending()
        if self._snap is not None and self._snap_dirty:
            self._snap["groups"] = self._engine_groups
            self._engine.restore(self._snap)
            self._snap_dirty = False

    # ------------------------------------------------------------------------------------
    # State dicts

    def state_dict(self):
        """torch-style: ``param_groups`` (their keys, "params" as indices, and "step") and
        ``state[i]`` for parameter i (numbering over param_groups, parameters with no
        elements included and empty) with the engine's arrays for that tensor as CPU
        tensors (master_f32/m_f32/v_f32 float32, master_bf16/ecc16/m_scales/v_scales
        int16 bit patterns, ecc8/m_codes int8, v_codes uint8) and "step" (a float
        tensor). "tandem" holds the version, algorithm and formats. The arrays share
        memory with the cached snapshot: treat them as read-only. A tensor that holds
        values load_state_dict kept aside (see there) is given in the fp32 layout
        instead, those values as they came."""
        with self._lock:
            groups, index, indices = [], 0, {}
            for group in self.param_groups:
                g = {key: value for key, value in group.items() if key != "params"}
                g["params"] = list(range(index, index + len(group["params"])))
                for p in group["params"]:
                    indices[id(p)] = index
                    index += 1
                groups.append(g)
            state, issued = {}, {}
            if self._engine is None:
                # No state yet (it is created at the first step): each parameter's step
                # is 0 (Megatron's DistributedOptimizer.state_dict reads one per entry).
                for index in indices.values():
                    state[index] = {"step": _torch.tensor(0.0)}
            else:
                snap = self._snapshot()
                for k, p in enumerate(self._params):
                    t = snap["tensors"][k]
                    entry = {"step": _torch.tensor(float(t["step"]))}
                    pending = self._pending.get(k)
                    if pending:
                        # Values load_state_dict kept aside (Megatron's placeholders, to be
                        # replaced by set_scaled_state): handed back as they came, in the
                        # fp32 layout, not encoded.
                        for name in _STATE_NAMES:
                            entry[name] = pending[name] if name in pending else \
                                _torch.from_numpy(self._decode(k)[name].copy())
                        state[indices[id(p)]] = entry
                        continue
                    for key, np_dtype in _NP_DTYPES.items():
                        if key in t:
                            entry[key] = _torch.from_numpy(
                                _np.asarray(t[key]).view(np_dtype)).view(_ARRAY_DTYPES[key])
                    state[indices[id(p)]] = entry
                    issued[k] = entry
                self._issued = (snap, issued)
                step = int(snap["step"])
                for g in groups:
                    g["step"] = step
            return {"state": state, "param_groups": groups,
                    "tandem": {"version": _STATE_DICT_VERSION, "algorithm": self.algorithm,
                               "master": self._formats[0], "momentum": self._formats[1],
                               "variance": self._formats[2]}}

    def load_state_dict(self, state_dict):
        """Restores ``param_groups`` (every key but "params") and the state.

        ``state`` entries may hold the engine's arrays (from ``state_dict``; the formats
        must be this optimizer's) or fp32 values under "master_param", "exp_avg",
        "exp_avg_sq" (FusedAdam's unscaled layout; Megatron passes placeholders here and
        sets the real values with ``set_scaled_state`` afterwards, so these are kept
        aside and encoded only at the next step if nothing replaced them), and "step".
        Steps: an entry's "step" in a state dict of ours (with its "tandem" entry), else
        the group's "step" (Megatron's), else the entry's. Raises ValueError naming
        the first mismatch; nothing changes then."""
        with self._lock:
            groups = state_dict["param_groups"]
            state = state_dict.get("state", {})
            header = state_dict.get("tandem")
            if len(groups) != len(self.param_groups):
                raise ValueError("state dict has %d param groups, optimizer %d"
                                 % (len(groups), len(self.param_groups)))
            for g, (saved, group) in enumerate(zip(groups, self.param_groups)):
                if len(saved["params"]) != len(group["params"]):
                    raise ValueError("param group %d has %d params in the state dict, %d here"
                                     % (g, len(saved["params"]), len(group["params"])))
            if header is not None:
                mine = (self.algorithm,) + self._formats
                theirs = (header.get("algorithm"), header.get("master"),
                          header.get("momentum"), header.get("variance"))
                if theirs != mine:
                    raise ValueError("state dict has algorithm and formats %s, optimizer %s"
                                     % (theirs, mine))
            # Which entry goes to which engine tensor, checked before anything changes.
            plan = []
            if state:
                for g, (saved, group) in enumerate(zip(groups, self.param_groups)):
                    for sid, p in zip(saved["params"], group["params"]):
                        if sid not in state or p.numel() == 0:
                            continue
                        entry = state[sid]
                        step = self._entry_step(entry, saved, header is not None)
                        unscaled = {n: entry[n] for n in _STATE_NAMES if n in entry}
                        arrays = {key: entry[key] for key in _NP_DTYPES if key in entry}
                        if not unscaled and not arrays and step == 0 and self._fresh:
                            continue  # state_dict() of an optimizer without state yet
                        self._ensure_engine()
                        k = self._k(p)
                        if (self._issued is not None and self._issued[0] is self._snap
                                and self._issued[1].get(k) is entry
                                and not self._snap_dirty and k not in self._pending
                                and step == int(self._snap["tensors"][k]["step"])):
                            continue  # our own state_dict() entry, state unchanged since
                        if unscaled and arrays:
                            raise ValueError("state entry %r mixes fp32 state names and "
                                             "engine arrays" % (sid,))
                        for n, v in unscaled.items():
                            if not isinstance(v, _torch.Tensor) or v.numel() != p.numel():
                                raise ValueError("state entry %r: %r must be a tensor of %d "
                                                 "elements" % (sid, n, p.numel()))
                        plan.append((k, step, unscaled, arrays))
            if not plan:
                self._load_groups(groups)
                return
            snap = self._snapshot()
            backup = (list(snap["tensors"]), snap["step"], self._snap_dirty,
                      dict(self._decoded))
            try:
                pending = {}
                top = max(step for _, step, _, _ in plan)
                snap["step"] = max(int(snap["step"]), top)
                for k, step, unscaled, arrays in plan:
                    t = dict(snap["tensors"][k])
                    t["step"] = step
                    if arrays:
                        for key in _NP_DTYPES:
                            t.pop(key, None)
                        for key, v in arrays.items():
                            t[key] = v.detach().cpu().contiguous().numpy().view(
                                _NP_DTYPES[key]).reshape(-1)
                    snap["tensors"][k] = t
                    if unscaled:
                        pending[k] = {n: v.detach() for n, v in unscaled.items()}
                    self._decoded.pop(k, None)
                self._snap_dirty = True
                if any(arrays for _, _, _, arrays in plan):
                    # Validates now (sizes, formats, values) so a bad entry raises here.
                    self._engine.restore(dict(snap, groups=self._engine_groups))
                    self._snap_dirty = False
            except Exception:
                snap["tensors"], snap["step"], self._snap_dirty, self._decoded = backup
                raise
            self._load_groups(groups)
            for g in self.param_groups:
                g["step"] = int(snap["step"])
            self._pending.update(pending)
            self._fresh = False

    @staticmethod
    def _entry_step(entry, group, own):
        """The step a state entry loads with. Our own state dicts (with their "tandem"
        header) keep each parameter's step in its entry. Megatron's DistributedOptimizer
        passes the checkpoint's step in the groups (TE FusedAdam keeps it there) and
        hands back entries of an earlier state_dict() whose "step" is stale when TE is
        installed (without TE it writes the same step into the entries): the group's
        wins."""
        step = entry.get("step") if own else None
        if step is None:
            step = group.get("step")
        if step is None:
            step = entry.get("step")
        if isinstance(step, _torch.Tensor):
            step = step.item()
        return int(step or 0)

    def _load_groups(self, groups):
        """Every key of the saved groups but "params" (Megatron keeps its scheduler's
        max_lr, min_lr, lr_mult, wd_mult... there)."""
        for saved, group in zip(groups, self.param_groups):
            for key, value in saved.items():
                if key != "params":
                    group[key] = value

    # ------------------------------------------------------------------------------------
    # Reports

    def memory(self):
        """The engine's memory report (tandem._C), or None before the state exists."""
        return None if self._engine is None else self._engine.memory()

    def last_step_times(self):
        return None if self._engine is None else self._engine.last_step_times()

    @property
    def mode(self):
        return None if self._engine is None else self._engine.mode


# ----------------------------------------------------------------------------------------
# Building Megatron's optimizer

_BUILD_LOCK = threading.Lock()


def tandem_optimizers(megatron_optimizer):
    """The TandemAdam instances inside a Megatron optimizer (ChainedOptimizer or one)."""
    found = []
    chained = getattr(megatron_optimizer, "chained_optimizers", None)
    for o in (chained if chained is not None else [megatron_optimizer]):
        inner = getattr(o, "optimizer", None)
        if isinstance(inner, TandemAdam):
            found.append(inner)
    return found


def _refuse(config, model_chunks):
    """ValueError for the configurations the adapter does not support, and why."""
    if config.optimizer != "adam":
        raise ValueError("tandem.megatron supports config.optimizer='adam' only (got %r)"
                         % (config.optimizer,))
    if not config.use_distributed_optimizer:
        raise ValueError("tandem.megatron needs config.use_distributed_optimizer=True: "
                         "Megatron passes its inner optimizer bf16 shards with fp32 "
                         "gradients only in the distributed optimizer's precision-aware mode")
    if not (config.bf16 or config.fp16):
        raise ValueError("tandem.megatron needs bf16 or fp16 parameters (config.bf16 or "
                         "config.fp16); fp32 models need no adapter: use tandem.torch")
    if config.optimizer_cpu_offload:
        raise ValueError("config.optimizer_cpu_offload is Megatron's own CPU offload; use "
                         "tandem.megatron's offload_fraction instead, and leave it False")
    if getattr(config, "fp8_recipe", None) is not None:
        raise ValueError("fp8 parameters (config.fp8_recipe=%r) are not supported: their "
                         "casts live in TransformerEngine's optimizer kernels"
                         % (config.fp8_recipe,))
    ddp = getattr(model_chunks[0], "ddp_config", None)
    if ddp is None:
        raise ValueError("model chunks must be wrapped in Megatron's DistributedDataParallel "
                         "(megatron.core.distributed.DistributedDataParallel)")
    if getattr(ddp, "use_megatron_fsdp", False):
        raise ValueError("Megatron-FSDP (ddp_config.use_megatron_fsdp) is not supported: it "
                         "keeps its own fp32 main weights and hands the optimizer DTensors")
    if not getattr(ddp, "use_distributed_optimizer", True):
        raise ValueError("ddp_config.use_distributed_optimizer must be True (the gradient "
                         "buffer is then reduce-scattered into the optimizer's shards)")


def get_megatron_optimizer(config, model_chunks, config_overrides=None,
                           use_gloo_process_groups=True, pg_collection=None,
                           dump_param_to_param_group_map=None, *, offload_fraction=0.0,
                           master_format=None, momentum_format=None, variance_format=None,
                           placement="backward_order", host_threads=0,
                           chunk_elements=1 << 21, pipeline_slots=4, state_device="param"):
    """megatron.core.optimizer.get_megatron_optimizer with TandemAdam as the inner optimizer.

    Megatron's own function builds the param groups, the DistributedOptimizer(s) and
    the ChainedOptimizer (dense and expert groups, overlapped param gather), with the
    precision-aware settings switched on in a copy of ``config`` (so TransformerEngine
    need not be installed): bf16 shards as the optimizer's params, fp32 gradient shards
    as ``decoupled_grad``, no fp32 copies outside the engine. ``config`` itself is not
    changed. The Tandem options are TandemAdam's. Every TandemAdam's
    ``grad_stats_group`` is set to its DistributedOptimizer's gradient-statistics group,
    so a non-finite gradient anywhere skips the step everywhere.

    Raises ValueError for what is not supported (see docs/megatron.md): other optimizers
    than Adam, no distributed optimizer, Megatron-FSDP, fp8 parameters, Megatron's own
    CPU offload, fp32 models.
    """
    import copy
    import megatron.core.optimizer as mco

    if not model_chunks:
        raise ValueError("model_chunks is empty")
    _refuse(config, model_chunks)
    cfg = copy.copy(config)  # not dataclasses.replace: __post_init__ would want TE
    cfg.use_precision_aware_optimizer = True
    cfg.use_precision_aware_optimizer_no_fp8_or_ds_fp8 = True
    cfg.main_params_dtype = _torch.float32
    cfg.exp_avg_dtype = _torch.float32      # placeholders Megatron allocates at load
    cfg.exp_avg_sq_dtype = _torch.float32
    cfg.store_param_remainders = False
    options = dict(offload_fraction=offload_fraction, master_format=master_format,
                   momentum_format=momentum_format, variance_format=variance_format,
                   placement=placement, host_threads=host_threads,
                   chunk_elements=chunk_elements, pipeline_slots=pipeline_slots,
                   state_device=state_device)

    def make_adam(params, **kwargs):
        for key in ("exp_avg_dtype", "exp_avg_sq_dtype", "master_weight_dtype"):
            kwargs.pop(key, None)  # placeholders of cfg; the formats come from options
        return TandemAdam(params, **kwargs, **options)

    names = ("Adam", "USING_PYTORCH_OPTIMIZER", "is_te_min_version")
    with _BUILD_LOCK:
        saved = {n: getattr(mco, n) for n in names}
        try:
            mco.Adam = make_adam
            mco.USING_PYTORCH_OPTIMIZER = False      # FusedAdam's keyword arguments
            mco.is_te_min_version = lambda *a, **k: False  # no store_param_remainders
            optimizer = mco.get_megatron_optimizer(
                cfg, model_chunks, config_overrides=config_overrides,
                use_gloo_process_groups=use_gloo_process_groups, pg_collection=pg_collection,
                dump_param_to_param_group_map=dump_param_to_param_group_map)
        finally:
            for n, v in saved.items():
                setattr(mco, n, v)
    chained = getattr(optimizer, "chained_optimizers", None)
    for o in (chained if chained is not None else [optimizer]):
        inner = getattr(o, "optimizer", None)
        if isinstance(inner, TandemAdam) and hasattr(o, "get_grad_stats_parallel_group"):
            inner.grad_stats_group = o.get_grad_stats_parallel_group()
    return optimizer
