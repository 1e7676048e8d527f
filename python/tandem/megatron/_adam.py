"""TandemAdam, FusedAdam's interface over Tandem's engine, and the hook that builds
Megatron-Core's optimizers around it: what tandem.megatron (the distributed optimizer)
and tandem.megatron_fsdp (Megatron-FSDP) share. docs/megatron.md.
"""

import copy
import threading
from unittest import mock

import torch as _torch

from tandem._core import dist as _dist
from tandem._core import engine as _engine
from tandem._core import options as _options
from tandem._core.warnings import RebindWarning, warn, warn_skipped
from tandem.megatron._state import StateAccess, StateView

_SET_HERE = ("algorithm", "groups", "mode", "cuda_stream", "master", "momentum", "variance")


def _format_from_dtype(what, dtype, argument):
    if dtype is None or dtype == _torch.float32:
        return "f32"
    if what != "master" and dtype == _torch.uint8:
        return "q8"
    raise ValueError("%s=%s has no Tandem equivalent (fp32 -> 'f32'%s); pass Tandem's "
                     "%s_format instead" % (argument, dtype,
                                            "" if what == "master" else ", uint8 -> 'q8'",
                                            what))


class TandemAdam(_torch.optim.AdamW):
    """TransformerEngine FusedAdam's precision-aware interface over a Tandem engine (its
    state methods forward to the StateAccess it holds, _state.py). Takes FusedAdam's
    arguments as Megatron passes them and Tandem's options, keyword-only (docs/megatron.md,
    "Options"); raises ValueError for the FusedAdam options the engine has no equivalent
    for. Gradients are read from ``param.decoupled_grad`` (``use_decoupled_grad=False``:
    ``param.grad``); param groups keep Megatron's extra keys, and get "step".

    A parameter whose gradient is None at a step is not stepped. The engine skips a step in
    which any gradient is non-finite (on any rank of ``grad_stats_group`` when set), and
    counts it in ``skipped_steps`` with a SkippedStepWarning.

    Not thread-safe beyond what Megatron needs: one thread steps and checkpoints.
    """

    # Note [Every rank steps] in fsdp.py: a subclass that sets this steps every parameter,
    # empty shards included, at every step.
    _every_rank_steps = False

    def __init__(self, params, lr=1e-3, bias_correction=True, betas=(0.9, 0.999), eps=1e-8,
                 weight_decay=0.0, amsgrad=False, *, adam_w_mode=True, set_grad_none=True,
                 capturable=False, master_weights=True, master_weight_dtype=_torch.float32,
                 exp_avg_dtype=_torch.float32, exp_avg_sq_dtype=_torch.float32,
                 use_decoupled_grad=True, store_param_remainders=False, master_format=None,
                 momentum_format=None, variance_format=None, state_device="param",
                 **fields):
        for refused, why in (
                (not bias_correction, "bias_correction=False is not supported by tandem"),
                (amsgrad, "amsgrad is not supported by tandem"),
                (capturable, "capturable=True (CUDA graphs) is not supported by tandem"),
                (not master_weights, "master_weights=False is not supported: the engine "
                 "always keeps masters; use master_format='bf16' for bf16-only masters"),
                (store_param_remainders, "store_param_remainders=True is not supported; "
                 "master_format='bf16+ecc16' keeps 16 extra bits per parameter the same way"),
                (state_device not in ("cpu", "param"),
                 "state_device must be 'cpu' or 'param', got %r" % (state_device,))):
            if refused:
                raise ValueError(why)
        formats = (
            master_format or _format_from_dtype("master", master_weight_dtype,
                                                "master_weight_dtype"),
            momentum_format or _format_from_dtype("momentum", exp_avg_dtype, "exp_avg_dtype"),
            variance_format or _format_from_dtype("variance", exp_avg_sq_dtype,
                                                  "exp_avg_sq_dtype"))
        self._config = _options.config(formats, fields, _SET_HERE)
        self._formats = tuple(formats)
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
        self.offload_fraction = self._config.offload_fraction
        self.state_device = state_device
        self.grad_stats_group = None  # a process group: skip decisions agree over it
        self.skipped_steps = 0
        self.rebuilds = 0  # engines rebuilt to carry state to moved gradient buffers
        self.last_result = None
        self._lock = threading.RLock()
        self._combine = (None, None)  # (group, callable) of the step's collective
        self._core = None
        self._access = StateAccess(self)

    def _grad_of(self, p):
        if self.use_decoupled_grad:
            return getattr(p, "decoupled_grad", None)
        return p.grad

    def _hyper(self, group, where):
        b1, b2 = _options.pair(group["betas"], where + ": betas")
        return dict(beta1=b1, beta2=b2,
                    eps=_options.number(group["eps"], where + ": eps"),
                    weight_decay=_options.number(group["weight_decay"], where + ": weight_decay"),
                    momentum=0.0, dampening=0.0, nesterov=False)

    def _group_values(self):
        checked = [_options.group_values(self.algorithm, self._hyper, g, group)
                   for g, group in enumerate(self.param_groups)]
        return [lr for lr, _ in checked], [h for _, h in checked]

    def _ensure_engine(self):
        """Builds the engine over the parameters with elements (a data-parallel rank may own
        none of a group, or of any; _every_rank_steps: over every parameter) when there is
        none, or anew when they changed (Megatron swaps in the shard views after
        construction), which only a fresh state allows. Returns False, building nothing,
        when there is no such parameter."""
        placed = [(p, g) for g, group in enumerate(self.param_groups) for p in group["params"]
                  if self._every_rank_steps or p.numel() > 0]
        params = [p for p, _ in placed]
        core = self._core
        if core is not None and len(params) == len(core.params) and all(
                a is b for a, b in zip(params, core.params)):
            return True
        if core is not None and not self._access.fresh:
            raise ValueError("the parameters of TandemAdam's param_groups changed after its "
                             "state was created (stepped or loaded); build a new optimizer")
        self._core = None  # free its memory before the new one takes its own
        self._access.reset()
        self.state.clear()
        if not params:
            return False
        # Megatron all-gathers into the parameters itself: writes it makes are not the
        # user's (reload_params() takes weights written outside a checkpoint load).
        core = _engine.Engine(self.algorithm, self._config, borrow_grads=True,
                              follow_writes=False)
        lrs, hypers = self._group_values()
        entries = [(p, "t%d" % k, g) for k, (p, g) in enumerate(placed)]
        core.bind(entries, hypers, grads=[self._grad_of(p) for p in params])
        self._core = core
        self.state.update((p, StateView(self, p)) for p in params)
        return True

    @_torch.no_grad()
    def step(self, closure=None):
        """One AdamW (Adam) update of every parameter whose gradient is not None, with
        the groups' lr, betas, eps and weight_decay as they are now. Megatron has already
        unscaled and clipped the gradients. Returns the closure's loss."""
        loss = None
        if closure is not None:
            with _torch.enable_grad():
                loss = closure()
        with self._lock:
            if not self._ensure_engine():
                return loss  # this rank owns no element
            core, was_fresh = self._core, self._access.fresh
            grads = [self._grad_of(p) for p in core.params]
            if not self._every_rank_steps and all(g is None for g in grads):
                return loss  # nothing to step: e.g. Megatron's dummy initialisation step
            lrs, hypers = self._group_values()
            self._access.flush()
            if self._access.fresh:
                core.reload(list(range(len(core.params))))
                self._access.fresh = False
            before = core.grad_rebinds
            result = core.step(lrs, hypers, grads, combine=self._combine_fn())
            if core.grad_rebinds != before and not was_fresh:
                self.rebuilds += 1
                if self.rebuilds == 2:
                    warn("tandem: the gradient buffers moved again since the last step; each "
                         "move rebuilds the engine with a copy of its whole state. Keep "
                         "decoupled_grad in the same memory from step to step (Megatron's "
                         "gradient buffer does)", RebindWarning)
            self._access.forget_snapshot()
            self.last_result = result
            applied, grad_norm, step = result[0], result[1], result[2]
            if applied:
                for group in self.param_groups:
                    group["step"] = int(step)
            else:
                self.skipped_steps += 1
                warn_skipped(grad_norm, self.skipped_steps)
        return loss

    def _combine_fn(self):
        """The step's gradient-statistics collective over grad_stats_group (one small
        all-gather), so that every rank skips a step with a non-finite gradient."""
        group = self.grad_stats_group
        if self._combine[0] is not group:
            import torch.distributed as dist
            fn = (_dist.make_combine(group, self._core.device)
                  if group is not None and dist.get_world_size(group) > 1 else None)
            self._combine = (group, fn)
        return self._combine[1]

    def zero_grad(self, set_to_none=True):
        """Drops every parameter's gradient (``decoupled_grad`` and ``grad``); Megatron
        zeroes its gradient buffer itself."""
        for group in self.param_groups:
            for p in group["params"]:
                if getattr(p, "decoupled_grad", None) is not None:
                    p.decoupled_grad = None
                p.grad = None

    def reload_params(self):
        """Re-reads every master from its parameter (weights written into the model after
        the optimizer state exists, outside a checkpoint load)."""
        with self._lock:
            if not self._ensure_engine():
                return
            self._access.flush()
            self._core.reload(list(range(len(self._core.params))))
            self._access.forget_snapshot()

    def initialize_state(self, param, store_param_remainders=False):
        """Creates the optimizer state (StateAccess.initialize_state)."""
        return self._access.initialize_state(param, store_param_remainders)

    def get_unscaled_state(self, param, state_name):
        """State ``state_name`` of ``param`` in fp32 (StateAccess.get_unscaled_state)."""
        return self._access.get_unscaled_state(param, state_name)

    def set_scaled_state(self, param, state_name, unscaled_state):
        """Sets state ``state_name`` of ``param`` (StateAccess.set_scaled_state)."""
        return self._access.set_scaled_state(param, state_name, unscaled_state)

    def state_dict(self):
        """torch-style state dict of the engine's arrays (StateAccess.state_dict)."""
        return self._access.state_dict()

    def load_state_dict(self, state_dict):
        """Restores param_groups and the state (StateAccess.load_state_dict)."""
        return self._access.load_state_dict(state_dict)

    def memory(self):
        """The engine's memory report (tandem._C), or None before the state exists."""
        return None if self._core is None else self._core.engine.memory()

    def last_step_times(self):
        return None if self._core is None else self._core.engine.last_step_times()

    @property
    def mode(self):
        return None if self._core is None else self._core.mode


# ----------------------------------------------------------------------------------------
# Megatron-Core versions
#
# Note [Megatron-Core versions]: the front ends replace attributes of Megatron's optimizer
# module (build_with) and set methods on its DistributedOptimizer instances (install):
# releases older than OLDEST_MEGATRON_CORE, or without one of those, are refused rather
# than a hook skipped silently (docs/megatron.md, "Versions").

OLDEST_MEGATRON_CORE = (0, 16, 1)

_MODULE_ATTRIBUTES = ("get_megatron_optimizer", "Adam", "USING_PYTORCH_OPTIMIZER",
                      "is_te_min_version")
_DISTRIBUTED_OPTIMIZER_METHODS = (
    "get_grad_stats_parallel_group", "reload_model_params", "sharded_state_dict",
    "_init_optimizer_states_with_dummy_values", "sharded_param_state_fsdp_dtensor",
    "_param_name", "_param_groups_to_param2group_meta")


def megatron_core_version():
    """(major, minor, patch) of the installed megatron-core (megatron.core.__version__;
    pre-release suffixes dropped)."""
    import re
    import megatron.core
    text = str(getattr(megatron.core, "__version__", ""))
    found = re.match(r"(\d+)\.(\d+)(?:\.(\d+))?", text)
    if found is None:
        raise RuntimeError("tandem.megatron cannot read megatron-core's version "
                           "(megatron.core.__version__ is %r)" % (text,))
    return tuple(int(x or 0) for x in found.groups())


def require_megatron_core():
    """Raises RuntimeError, naming the version or the missing attribute, when the installed
    megatron-core is not one the Megatron front ends support (Note [Megatron-Core
    versions]). Returns its (major, minor, patch)."""
    version = megatron_core_version()
    dotted = lambda v: ".".join(map(str, v))  # noqa: E731
    if version < OLDEST_MEGATRON_CORE:
        raise RuntimeError("tandem.megatron needs megatron-core %s or newer; %s is installed "
                           "(docs/megatron.md, \"Versions\")"
                           % (dotted(OLDEST_MEGATRON_CORE), dotted(version)))
    import megatron.core.optimizer as mco
    from megatron.core.optimizer.distrib_optimizer import DistributedOptimizer
    missing = [("megatron.core.optimizer", n) for n in _MODULE_ATTRIBUTES
               if not hasattr(mco, n)]
    missing += [("DistributedOptimizer", n) for n in _DISTRIBUTED_OPTIMIZER_METHODS
                if not callable(getattr(DistributedOptimizer, n, None))]
    if missing:
        raise RuntimeError("megatron-core %s is not supported by tandem.megatron: it has no "
                           "%s.%s, which tandem replaces or calls (docs/megatron.md, "
                           "\"Versions\")" % ((dotted(version),) + missing[0]))
    return version


# ----------------------------------------------------------------------------------------
# Building Megatron's optimizer

_BUILD_LOCK = threading.Lock()


def inner_optimizers(megatron_optimizer, cls):
    """[(optimizer, its inner optimizer)] of the optimizers of a Megatron optimizer (those of
    a ChainedOptimizer, or itself) whose inner optimizer is a `cls`."""
    chained = getattr(megatron_optimizer, "chained_optimizers", None)
    parts = list(chained) if chained is not None else [megatron_optimizer]
    return [(o, o.optimizer) for o in parts if isinstance(getattr(o, "optimizer", None), cls)]


def refuse_config(config):
    """ValueError for the optimizer configurations neither front end supports."""
    if config.optimizer != "adam":
        raise ValueError("tandem.megatron supports config.optimizer='adam' only (got %r)"
                         % (config.optimizer,))
    if getattr(config, "fp8_recipe", None) is not None:
        raise ValueError("fp8 parameters (config.fp8_recipe=%r) are not supported: their "
                         "casts live in TransformerEngine's optimizer kernels"
                         % (config.fp8_recipe,))


# What OptimizerConfig.__post_init__ sets with use_precision_aware_optimizer and no fp8
# parameters (refuse_config): the inner optimizer's gradients are param.decoupled_grad,
# and Megatron's gradient norm reads them there.
PRECISION_AWARE = dict(use_precision_aware_optimizer=True,
                       use_precision_aware_optimizer_no_fp8_or_ds_fp8=True)


def build_with(make_adam, config, model_chunks, megatron_kwargs, **changes):
    """megatron.core.optimizer.get_megatron_optimizer(config with `changes`, model_chunks,
    **megatron_kwargs) with ``make_adam(params, **FusedAdam's keyword arguments)`` where it
    would build FusedAdam (its module-level ``Adam``), whether TransformerEngine is
    installed or not. `config` itself is not changed."""
    import megatron.core.optimizer as mco

    cfg = copy.copy(config)  # not dataclasses.replace: __post_init__ would want TE
    for name, value in changes.items():
        setattr(cfg, name, value)
    with _BUILD_LOCK, mock.patch.multiple(
            mco, Adam=make_adam,
            USING_PYTORCH_OPTIMIZER=False,                # FusedAdam's keyword arguments
            is_te_min_version=lambda *a, **k: False):     # no store_param_remainders
        return mco.get_megatron_optimizer(cfg, model_chunks, **megatron_kwargs)
