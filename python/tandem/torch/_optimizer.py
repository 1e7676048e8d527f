"""TandemOptimizer, the base of tandem.torch's optimizers (__init__.py):
torch.optim's interface over the front-end core (_core/engine.py), with its parts as
members: the LayoutFollower (_layout.py), the HandOver (_handover.py) and the gradient
hooks (_core/hooks.py)."""

import collections
import contextlib
import threading

import torch as _torch

from tandem._core import auto_fraction as _auto_fraction
from tandem._core import dist as _dist
from tandem._core import engine as _engine
from tandem._core import node as _node
from tandem._core import options as _options
from tandem._core.hooks import GradHooks
from tandem._core.warnings import TandemWarning, warn, warn_skipped
from tandem.torch import _state
from tandem.torch._handover import HandOver
from tandem.torch._layout import LayoutFollower
from tandem.torch._optim_state import serialised

StepResult = collections.namedtuple("StepResult",
                                    ["applied", "grad_norm", "step", "stepped_tensors"],
                                    defaults=(0,), module="tandem.torch")

# OptimizerConfig fields the optimizer sets itself (from the algorithm, param_groups,
# the parameters' device and stream, the format spellings and the node policy).
_SET_HERE = ("algorithm", "groups", "mode", "cuda_stream", "master", "momentum", "variance",
             "host_cpus", "pinned_budget_bytes", "device_allocator")


def _forward(member, name):
    """A property of TandemOptimizer that is attribute `name` of its member `member`."""
    return property(lambda self: getattr(getattr(self, member), name),
                    lambda self, value: setattr(getattr(self, member), name, value))


class TandemOptimizer(_torch.optim.Optimizer):
    """Base class: a torch optimizer whose step runs in a Tandem HybridOptimizer.

    Subclasses set ``_ALGORITHM`` and implement ``_hyper(group, where)``.

    params: parameters, ``(name, parameter)`` pairs (``model.named_parameters()``), or
    param groups whose "params" hold either (a list or tuple: a set raises TypeError);
    names are stored as "param_names" in ``param_groups`` (as torch >= 2.4 does) and
    name the engine's tensors. The same tensor twice raises ValueError, as does a
    parameter that requires grad with a dtype other than float32, bfloat16 or float16.
    Every group's hyper-parameters are checked here, at add_param_group, at each step
    and at every load, with the same messages (TypeError for a type, ValueError for a
    value, naming the group and the key).

    Tandem options (keyword-only; docs/python.md, "Options", has every one):
      the engine's: offload_fraction, offload_compute, machine_rates, placement,
        host_threads, chunk_elements, pipeline_slots, stream_chunk_bytes, stream_slots,
        speculative_early_start, speculative_stream_bytes, speculative_host_bytes,
        release_grads, in_place_grad_bytes (``tandem._C.OptimizerConfig.fields()``).
      master_format, momentum_format, variance_format (or master, momentum except for
        SGD, variance): the state formats; both spellings of one raise ValueError.
      max_grad_norm: > 0 clips the global gradient norm at each step (StepOptions).
      module: a module whose ``named_parameters()`` names plain parameters.
      host_cpus, pinned_budget: this rank's host CPUs and host-memory budget; "auto"
        (default) takes the rank's share of the node under torchrun (_core/node.py).
      early_start: call the engine's GradReady as each gradient is final (default
        False); speculative_early_start and release_grads imply it.
      release_grads: hand each gradient to the engine as soon as it is final and set
        ``p.grad = None`` (docs/python.md, "Gradient release"); refused: a second
        gradient of a parameter in one step outside ``accumulating()``, GradScaler, a
        p.grad set after the release.
      hyperparam_update: "restore" (default) hands changed per-group hyper-parameters to
        the engine; "error" raises ValueError instead.
      offload_fraction="auto" (_core/auto_fraction.py), grads_in_flight_bytes
        (_core/grads.py).

    Thread safety: step, begin_step, zero_grad, reload_params, state_dict,
    load_state_dict, save_checkpoint and load_checkpoint hold one lock, so a state dict
    taken from another thread sees the state between two steps. As with torch.optim,
    nothing may write p.grad while backward runs.

    Copies: copy.deepcopy and pickle give an independent optimizer (__reduce_ex__);
    copy.copy raises TypeError.
    """

    _ALGORITHM = None

    def __init__(self, params, defaults, *, module=None, master_format=None,
                 momentum_format=None, variance_format=None, master=None, momentum=None,
                 variance=None, max_grad_norm=None, early_start=False,
                 hyperparam_update="restore", host_cpus="auto", pinned_budget="auto",
                 grads_in_flight_bytes=1 << 30, **fields):
        # The Tandem options as given (copies and pickles rebuild the optimizer with them).
        options = {key: value for key, value in locals().items()
                   if key not in ("self", "params", "defaults", "module", "fields",
                                  "__class__")}
        options.update(fields)
        if hyperparam_update not in ("error", "restore"):
            raise ValueError("hyperparam_update must be 'error' or 'restore', got %r"
                             % (hyperparam_update,))
        in_flight = _options.byte_count(grads_in_flight_bytes, "grads_in_flight_bytes")
        auto = _options.auto_fraction(fields)
        formats = tuple(_options.pick_format(c, c + "_format", new, c, old) for c, new, old in (
            ("master", master_format, master), ("momentum", momentum_format, momentum),
            ("variance", variance_format, variance)))
        config = _options.config(formats, fields, _SET_HERE)
        clip = _options.max_grad_norm(max_grad_norm)
        groups = _options.normalize_params(params, module)
        self._building = True
        super().__init__(groups, defaults)
        self._building = False
        self._tandem_options = options
        self._group_values()  # every group's lr and hyper-parameters, checked
        self._lock = threading.RLock()
        self.max_grad_norm = clip
        self.speculative_early_start = config.speculative_early_start
        early_start = (bool(early_start) or self.speculative_early_start
                       or config.release_grads)
        if config.release_grads:
            # GradScaler then hands its scale to step() (found_inf, grad_scale) instead
            # of unscaling p.grad, which is None: step() refuses it with the reason.
            self._step_supports_amp_scaling = True
        self.hyperparam_update = hyperparam_update
        self._begun = None     # (lrs, hypers, max_grad_norm, loss_scale) of begin_step
        self.last_result = None
        self.skipped_steps = 0
        self._hooks = None
        device = next((p.device for g in self.param_groups for p in g["params"]
                       if p.requires_grad), None)
        config.host_cpus = _node.host_cpus(host_cpus, _dist.rank_device(self.param_groups))
        config.pinned_budget_bytes = _node.pinned_budget(pinned_budget)
        self.host_cpus = tuple(config.host_cpus)  # (): unrestricted
        if auto:
            config.offload_fraction = _auto_fraction.starting_fraction(device)
        self._core = _engine.Engine(self._ALGORITHM, config)
        self._handover = HandOver(self._core, self._lock, early_start, config.release_grads,
                                  in_flight)
        self._layout = LayoutFollower(self._core)
        # Every parameter that requires grad at construction, in param_groups order;
        # frozen ones are left out (no state) until they get a gradient (a rebind).
        self._layout.bind(self.param_groups, lambda p: p.requires_grad, self._group_values,
                          self._bound, fresh_values=True)
        self._auto = _auto_fraction.AutoFraction(self._core) if auto else _auto_fraction.OFF
        if self.release_grads and _dist.replicated(self._core.params[0]):
            warn("release_grads under HSDP: torch's FSDP2 keeps each group's all-reduced "
                 "gradient until the end of backward, so releasing frees no GPU memory "
                 "during backward (the steps stay exact)", TandemWarning)

    # ----------------------------------------------------------------------------------
    # torch.optim.Optimizer interface

    def add_param_group(self, param_group):
        """As torch.optim's; the group is checked now (TypeError or ValueError naming it,
        nothing changed). The engine takes its parameters in at the next step (or state
        load or save): a rebind that keeps every other parameter's state bit for bit."""
        if getattr(self, "_building", False):
            super().add_param_group(param_group)
            return
        with self._lock:
            g = len(self.param_groups)
            seen = {id(p): "group %d param %d" % (old, j)
                    for old, group in enumerate(self.param_groups)
                    for j, p in enumerate(group["params"])}
            group = _options.normalize_group(param_group, g, None, seen)
            _options.check_named(self.param_groups + [group])
            _options.group_values(self._ALGORITHM, self._hyper, g, dict(self.defaults, **group))
            given = _options.given_names(group)
            for j, p in enumerate(group["params"]):
                if p.requires_grad:  # a frozen one is checked when it joins
                    self._core.check_param(p, "'%s'" % given[j] if given else
                                           "group %d param %d" % (g, j), None)
            super().add_param_group(group)

    @_torch.no_grad()
    def zero_grad(self, set_to_none=True):
        """As torch.optim's; the engine's gradient buffers stay allocated either way and
        become ``p.grad`` again in the next backward. Like torch's, it must not run
        while backward accumulates."""
        with self._lock:
            core = self._core
            self._handover.drop_handed()
            if not set_to_none:  # buffers that fit moved parameters
                self._rebind_if_needed(added=False, follow=False)
            book = core.book
            for group in self.param_groups:
                for p in group["params"]:
                    if p.grad is None:
                        continue
                    k = core.index_by_id.get(id(p))
                    if set_to_none:
                        p.grad = None
                    elif k is not None and book.is_own_grad(k, p.grad):
                        book.grads[k].zero_()
                    else:  # torch.optim.Optimizer.zero_grad's own steps
                        if p.grad.grad_fn is not None:
                            p.grad.detach_()
                        else:
                            p.grad.requires_grad_(False)
                        p.grad.zero_()

    @contextlib.contextmanager
    def accumulating(self):
        """Context for the micro-batches of gradient accumulation but the last: inside
        it early start hands nothing over. A no-op without early start."""
        previous = self._handover.accumulating
        self._handover.accumulating = True
        try:
            yield self
        finally:
            self._handover.accumulating = previous

    @_torch.no_grad()
    def begin_step(self, *, max_grad_norm=None, loss_scale=1.0):
        """Announces the next step before its backward (speculative early start, which
        it requires): the param groups' values now and the clipping norm and loss scale
        the next ``step()`` uses. That step takes no closure; passing it another
        ``max_grad_norm`` or ``loss_scale`` raises ValueError, the speculation undone."""
        if not self.speculative_early_start:
            raise ValueError("begin_step needs the optimizer built with "
                             "speculative_early_start=True")
        with self._lock:
            if self._core.step_begun:
                raise ValueError("begin_step called twice without a step in between")
            # Parameters that require grad but are not in the engine get their gradient
            # in the backward that follows: rebind now.
            self._rebind_if_needed(anticipate=True)
            lrs, hypers = self._group_values()
            self._layout.follow_values(lrs, hypers, self.hyperparam_update)
            clip = self.max_grad_norm if max_grad_norm is None else max_grad_norm
            self._core.begin_step(lrs, hypers, clip, loss_scale)
            self._begun = (lrs, hypers, clip, loss_scale)

    @_torch.no_grad()
    def step(self, closure=None, *, max_grad_norm=None, loss_scale=None):
        """One optimizer step, as torch.optim's: the parameters whose ``p.grad`` is not
        None now are stepped with it (docs/python.md, "Semantics"). Every group and
        gradient is checked before anything changes.

        Args: closure (re-evaluates the model, returns the loss), max_grad_norm
        (overrides the constructor's for this step), loss_scale (gradients are divided by
        it; default 1, or begin_step's). Returns the closure's loss (or None).
        ``self.last_result`` is the engine's StepResult; ``applied`` is False when a
        non-finite gradient made the engine skip the step (nothing changed;
        ``skipped_steps`` counts those, with a SkippedStepWarning)."""
        loss = None
        if closure is not None:
            if self._core.step_begun:
                # The engine would see gradients of a second backward after speculating
                # on the first; refuse before anything runs.
                raise ValueError("step() after begin_step() takes no closure")
            # Outside the lock: backward's hooks take it (from autograd's threads).
            with _torch.enable_grad():
                loss = closure()
        with self._lock:
            self._handover.check_step()
            if self.release_grads:
                self._handover.check_scaler(self.__dict__.pop("found_inf", None),
                                            self.__dict__.pop("grad_scale", None))
            # begin_step's values, read only while the engine's step is begun (the
            # engine's Step ends it whether it succeeds or raises).
            begun = self._begun if self._core.step_begun else None
            # param_groups, unfrozen or reallocated parameters; after a step read at step()
            # for a layout change (HandOver.hand_over), every parameter that requires
            # grad, so that the next step hands its gradients over again.
            self._rebind_if_needed(anticipate=self._core.book.early_off)
            self._layout.check_begun(self.param_groups)
            if begun is None:
                lrs, hypers = self._group_values()
                self._layout.follow_values(lrs, hypers, self.hyperparam_update)
                begun = (lrs, hypers, self.max_grad_norm, 1.0)
            # A clip norm or loss scale other than begin_step's reaches the engine, which
            # undoes the speculation and raises.
            lrs, hypers, clip, scale = begun
            clip = clip if max_grad_norm is None else max_grad_norm
            loss_scale = scale if loss_scale is None else loss_scale
            try:
                result = self._core.step(lrs, hypers, [p.grad for p in self._core.params],
                                         clip, loss_scale)
            finally:
                self._begun = None
                self._core.prune_held()
            self.last_result = StepResult(*result)
            self._auto.after_step()
            if not self.last_result.applied:
                self.skipped_steps += 1
                warn_skipped(self.last_result.grad_norm, self.skipped_steps)
        return loss

    @serialised(sync_before=True)
    def state_dict(self):
        """The torch-style state dict with the engine's whole state (docs/python.md,
        "State dict")."""
        return _state.state_dict(self)

    @serialised(load=True)
    def load_state_dict(self, state_dict):
        """Restores a state dict of a tandem optimizer with the same parameters,
        algorithm and formats (versions 1 to 3), or a torch.optim state dict of the same
        algorithm (``tandem.torch.from_torch_state``). Every field is checked first:
        ValueError naming the first bad one, nothing changed."""
        _state.load_state_dict(self, state_dict)

    # ----------------------------------------------------------------------------------
    # Tandem extras

    @serialised(sync_before=True)
    def save_checkpoint(self, path, compression="none", sync=True):
        """Writes the engine's whole state and the param_groups to a Tandem checkpoint
        file (docs/checkpoint_format.md). compression: "none" (default), "auto" or "all";
        sync=False skips the fsyncs. Raises ValueError (nothing written) for a
        param_group value JSON cannot hold, naming it, and tandem.CheckpointIOError (a
        RuntimeError) on I/O failures."""
        _state.save_checkpoint(self, path, compression, sync)

    @serialised(load=True)
    def load_checkpoint(self, path):
        """Loads and fully verifies a checkpoint file of ``save_checkpoint``. Raises
        tandem.CheckpointCorruptError for a damaged file, CheckpointIOError for an
        unreadable one and ValueError for one that does not match this optimizer;
        nothing changes then."""
        _state.load_checkpoint(self, path)

    def wait_param(self, p, stream=None):
        """Makes ``stream`` (default: the current CUDA stream) wait until parameter p's
        update of the last step is final on the GPU. A no-op in host mode."""
        self._core.wait_param(p, stream)

    def register_forward_waits(self, module):
        """A forward pre-hook on every submodule of ``module`` that owns parameters of
        this optimizer, calling ``wait_param`` for them. Returns the hook handles."""
        owned = {id(p) for group in self.param_groups for p in group["params"]}
        handles = []
        for sub in module.modules():
            mine = [p for p in sub.parameters(recurse=False) if id(p) in owned]
            if mine:
                def pre_hook(_module, _inputs, mine=mine):
                    for p in mine:
                        if id(p) in self._core.index_by_id:
                            self.wait_param(p)
                handles.append(sub.register_forward_pre_hook(pre_hook))
        return handles

    @_torch.no_grad()
    def reload_params(self, params=None):
        """Re-reads the master weights of ``params`` (default: every parameter) from the
        parameters, for writes that bypass torch's version counter (``p.data.copy_``,
        raw pointers)."""
        with self._lock:
            self._rebind_if_needed()
            if isinstance(params, _torch.Tensor):
                params = [params]
            self._core.reload(list(range(len(self._core.params))) if params is None
                              else [self._core.index_of(p) for p in params])

    def tensor_step_counts(self):
        """Each engine parameter's own step count, in the engine's order (``param_names``)."""
        return self._core.tensor_step_counts()

    @property
    def param_names(self):
        """The engine's tensor names, in engine order: the parameters' names when named,
        otherwise "g<group>.p<index>" with the parameter's torch state_dict index."""
        return list(self._core.names)

    @property
    def mode(self):
        """"gpu" or "host"."""
        return self._core.mode

    def placement(self):
        """The engine's placement: per tensor (numel, device_count) and stream_counts,
        total, offloaded, streamed and stream_share."""
        return self._core.engine.placement()

    def compute_split(self):
        """Where the host-resident elements are computed: share (on the GPU), and for the
        rates used the modelled step_ms and its terms; zeros when no rates were used."""
        return self._core.engine.compute_split()

    def memory(self):
        """Bytes the engine holds, by category, on the device and on the host."""
        return self._core.engine.memory()

    def last_step_times(self):
        """Busy time of each stage of the last step, in milliseconds."""
        return self._core.engine.last_step_times()

    @property
    def step_count(self):
        return self._core.step_count

    # offload_fraction="auto"'s (fraction, why), once chosen; None before and without.
    auto_fraction = property(lambda self: self._auto.chosen)

    # The parts' options and counts, as attributes of the optimizer.
    early_start = _forward("_handover", "early_start")
    release_grads = _forward("_handover", "release_grads")
    grads_in_flight_bytes = _forward("_handover", "grads_in_flight_bytes")
    rebinds = _forward("_layout", "rebinds")

    def _sync_params(self):
        """Follows param_groups and reallocations, then reloads the parameters written
        since the engine last wrote them (Note [The parameter is the source of truth])."""
        self._rebind_if_needed()
        self._core.sync_params()

    # ----------------------------------------------------------------------------------
    # The parts at work

    def _group_values(self, groups=None):
        """(lrs, hypers) of every group (default: param_groups), each checked
        (_options.group_values)."""
        checked = [_options.group_values(self._ALGORITHM, self._hyper, g, group)
                   for g, group in enumerate(self.param_groups if groups is None else groups)]
        return [lr for lr, _ in checked], [h for _, h in checked]

    def _rebind_if_needed(self, anticipate=False, added=True, follow=True):
        """Hooks the parameters that require grad now, then LayoutFollower's."""
        self._hooks.hook_pending()
        self._layout.rebind_if_needed(self.param_groups, self._group_values, self._bound,
                                      anticipate, added, follow)

    def _rebind_for_load(self, state_dict=None):
        """Before a load: follows param_groups and reallocations, then takes in the
        parameters outside the engine that `state_dict` holds state for."""
        if not self._core.step_begun:
            self._rebind_if_needed(added=False)
            self._layout.rebind(self.param_groups, self._group_values, self._bound,
                                self._layout.stated(self.param_groups, state_dict))

    def _bound(self, before):
        """After each bind (`before`: the ids of the engine's parameters before it): the
        gradient hooks, the hand-overs and torch's per-parameter state entries follow."""
        core = self._core
        if self._hooks is not None:
            self._hooks.remove()
        self._hooks = GradHooks(self, core.params, self.early_start,
                                lambda opt, k: opt._on_grad_arriving(k),
                                lambda opt, k: opt._on_grad_accumulated(k))
        self._handover.follow_layout(self)
        # torch.distributed.checkpoint runs a step with zero gradients to create the state
        # of an optimizer whose `state` is empty; Tandem's state exists from the start.
        for p in list(self.state):
            if id(p) in before and id(p) not in core.index_by_id:
                del self.state[p]
        for p in core.params:
            self.state.setdefault(p, {})

    # The gradient hooks' calls (looked up at each call, so a wrapper set on the
    # optimizer sees them: bench/bench_args.py's HookTimer) and CopiedGrads'.
    def _on_grad_arriving(self, k):
        self._handover.arriving(k)

    def _on_grad_accumulated(self, k):
        self._handover.accumulated(k, self._layout_pending)

    def _hand_over(self, k, grad):
        self._handover.hand_over(k, grad, self._layout_pending)

    def _layout_pending(self):
        return self._layout.pending(self.param_groups)

    def __reduce_ex__(self, protocol):
        """copy.deepcopy and pickle: the optimizer rebuilt over (copies of) its
        param_groups with the same options and loaded with its state_dict(). Copy the
        model and the optimizer together (``copy.deepcopy((model, opt))``) to get one
        whose parameters are the copied model's."""
        del protocol
        with self._lock:
            groups = [dict(group, params=list(group["params"]))
                      for group in self.param_groups]
            return (_rebuilt, (type(self), groups, dict(self.defaults),
                               dict(self._tandem_options), self.state_dict()))

    def __copy__(self):
        raise TypeError("a shallow copy of a tandem optimizer would share its engine; use "
                        "copy.deepcopy (a new optimizer with the same state)")

    def _hyper(self, group, where="param group"):
        """The engine's hyper-parameters of param group `group` (HyperParams fields but
        lr_scale), each value checked for its type (TypeError naming `where` and the key;
        a missing key raises KeyError)."""
        raise NotImplementedError


def _rebuilt(cls, groups, defaults, options, state_dict):
    """The optimizer TandemOptimizer.__reduce_ex__ describes."""
    opt = cls.__new__(cls)
    TandemOptimizer.__init__(opt, groups, defaults, **options)
    opt.load_state_dict(state_dict)
    return opt


_rebuilt.__module__ = "tandem.torch"  # pickles name tandem.torch._rebuilt, which stays
