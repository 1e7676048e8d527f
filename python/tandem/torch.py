"""PyTorch optimizers backed by Tandem's HybridOptimizer.

Usage::

    import tandem.torch
    opt = tandem.torch.AdamW(model.named_parameters(), lr=3e-4, weight_decay=0.1,
                             offload_fraction=0.5, master_format="bf16+ecc8",
                             momentum_format="q8", variance_format="q8")
    for batch in data:
        loss = model(batch).mean(); loss.backward()
        opt.step(); opt.zero_grad()

The optimizers subclass :class:`torch.optim.Optimizer` and follow torch.optim's
semantics (docs/python.md, "Semantics"): ``param_groups`` carry the per-group
hyper-parameters, schedulers work unchanged, ``zero_grad()`` sets ``p.grad = None``, a
parameter without a gradient is not stepped, each parameter keeps its own step count,
and weights written in place after construction (``model.load_state_dict``,
``nn.init``, ``p.copy_``) are picked up by the next step.

Pointer contract: the engine keeps raw pointers to every parameter and to a gradient
buffer the optimizer allocates once per parameter (installed as ``p.grad`` when a
gradient arrives). A parameter reallocated after the optimizer is built (same shape
and dtype: ``model.to(device)``, ``p.data = ...``), or one frozen at construction that
gets a gradient, makes the next step rebuild the engine over the current parameters,
carrying the state over (a full state copy, warned once: RebindWarning); a changed
shape or dtype raises. Writes that bypass torch's version counter
(``p.data.copy_(...)``, raw pointers) need ``opt.reload_params()``.

DTensor parameters (FSDP2's ``fully_shard``, HSDP) are stepped shard by shard, with one
gradient-statistics collective per step and a DCP-ready state dict (docs/distributed.md;
Note [Sharded parameters] in _dist.py).
"""

import collections
import contextlib
import functools
import math
import sys
import threading
import warnings
import weakref

try:
    import torch as _torch
except ImportError as _e:  # depends on the machine
    raise ImportError(
        "tandem.torch needs PyTorch, which is not importable here (%s). Install the torch "
        "build matching your CUDA version (pip install torch), or install Tandem with its "
        "torch extra from its source tree: pip install '.[torch]' (the distribution is "
        "tandem-optim; 'tandem' on PyPI is another project)." % (_e,)) from _e

from tandem import _C
from tandem import _dist
from tandem import _node
from tandem import _options
from tandem import _state
from tandem._state import export_masters, from_torch_state, to_torch_state

__all__ = ["AdamW", "Adam", "Lion", "SGD", "StepResult", "TandemOptimizer", "TandemWarning",
           "SkippedStepWarning", "EarlyStartAccumulationWarning", "RebindWarning",
           "export_masters", "from_torch_state", "to_torch_state"]

StepResult = collections.namedtuple("StepResult",
                                    ["applied", "grad_norm", "step", "stepped_tensors"],
                                    defaults=(0,))


class TandemWarning(UserWarning):
    """Base class of the warnings tandem.torch emits."""


class SkippedStepWarning(TandemWarning):
    """A step found a non-finite gradient and changed nothing (``opt.skipped_steps``
    counts them). Silence with
    ``warnings.simplefilter("ignore", tandem.torch.SkippedStepWarning)``."""


class RebindWarning(TandemWarning):
    """The optimizer rebuilt its engine (parameters reallocated after construction, or a
    parameter frozen at construction got a gradient), copying its whole state: cheap
    once, costly every step. ``opt.rebinds`` counts rebinds."""


class EarlyStartAccumulationWarning(TandemWarning):
    """early_start saw a second gradient for a parameter in one step (gradient
    accumulation): the engine redoes the early work, so results are exact but the first
    copies were wasted. Run the micro-batches but the last in ``opt.accumulating()``."""


_DTYPE_NAMES = {
    _torch.float32: "f32",
    _torch.bfloat16: "bf16",
    _torch.float16: "f16",
}

_LR_RTOL = 1e-9


_local = _dist.local  # a DTensor's local shard, or the tensor itself


def _warn(message, category):
    """warnings.warn attributed to the caller's line: the first frame outside this file
    and torch (whose optimizer wrappers differ between versions)."""
    skip = (__file__, _torch.__file__.rsplit("/", 1)[0])
    frame, level = sys._getframe(1), 2
    while frame is not None and frame.f_code.co_filename.startswith(skip):
        frame, level = frame.f_back, level + 1
    warnings.warn(message, category, stacklevel=level)


class TandemOptimizer(_torch.optim.Optimizer):
    """Base class: a torch optimizer whose step runs in a Tandem HybridOptimizer.

    Subclasses set ``_ALGORITHM`` and implement ``_hyper(group)``, which maps a param
    group to the engine's hyper-parameter fields.

    params: parameters, ``(name, parameter)`` pairs (``model.named_parameters()``), or
    param groups whose "params" hold either; names are stored as "param_names" in
    ``param_groups`` (as torch >= 2.4 does) and name the engine's tensors (errors,
    checkpoints). The same tensor twice raises ValueError.

    Tandem options (keyword-only, shared by every algorithm):
      module: a module whose ``named_parameters()`` names plain parameters.
      offload_fraction: fraction of the elements whose state lives in (pinned) host
        memory, in [0, 1]; default 0 (where they are computed: offload_compute).
      master_format (or master): master weight format: "f32" (default), "bf16",
        "bf16+ecc8", "bf16+ecc16".
      momentum_format (or momentum, except for SGD whose momentum is the
        hyper-parameter): first moment format: "f32" (default) or "q8".
      variance_format (or variance): second moment format (Adam/AdamW only): "f32"
        (default) or "q8". Giving both spellings of one format raises ValueError.
      placement: "backward_order" (default), "forward_order" or "largest_first".
      host_threads: host threads for the host kernels, 0 (default: all cores) up to
        ``tandem._C.max_host_threads()``.
      host_cpus, pinned_budget: this rank's host CPUs and host-memory budget; "auto"
        (default) takes the rank's share of the node under torchrun, else no limit
        (tandem/_node.py; docs/node_sharing.md). ``opt.host_cpus``, ``memory()``.
      chunk_elements: offload pipeline chunk, a positive multiple of 32 (default 2**21).
      pipeline_slots: pinned gradient slots in flight, >= 2 (default 4).
      offload_compute: where the host-resident elements are computed: "host" (the host
        kernels), "gpu" (their state streamed through the GPU kernel in chunks), a share
        in [0, 1] of them computed on the GPU, or "auto" (default): the share that
        minimises the modelled step for ``machine_rates`` (measured at construction in
        GPU mode when None). Bit-identical whatever the choice; ``compute_split()`` says
        what was chosen (docs/user_guide.md, "Where offloaded elements are computed").
      machine_rates: None or {"h2d_gbps", "d2h_gbps", "host_gparams", "gpu_gparams"}.
      stream_chunk_bytes, stream_slots: streaming chunk size (default 64 MiB) and device
        slots (default 3).
      max_grad_norm: > 0 clips the global gradient L2 norm at each step (default 0: off).
      early_start: call the engine's GradReady from a post-accumulate-grad hook as each
        gradient is final, so offloaded gradients start copying during backward. Exact
        under gradient accumulation too (the engine redoes a tensor whose gradient
        changes), but wasteful: run all micro-batches but the last inside
        ``with opt.accumulating():``. Default False.
      speculative_early_start: also update the offloaded state on the host during
        backward, speculatively, after ``begin_step()`` (implies ``early_start``); the
        step keeps the speculative results when every gradient is finite and clipping
        does not trigger, and otherwise restores them, so results are bit-identical
        either way. Costs a host backup of the offloaded state (``memory()["host"]
        ["speculation"]``). Default False. Streamed chunks (``offload_compute``) are
        speculated on the GPU, from the last registered, up to
        ``speculative_stream_bytes`` of their state (default 1 GiB; each such chunk
        also takes its size in pinned memory and a place on the GPU for its updated
        parameters, ``memory()[...]["speculation"]``; 0: none).
      hyperparam_update: what to do when a group's hyper-parameters change after
        construction (per-group learning-rate ratios, betas, eps, weight decay):
        "restore" (default) passes the new values to the engine before the step
        (HybridOptimizer::SetHyperParams: cheap, no state is copied); "error" raises
        ValueError instead, for code that wants hyper-parameters frozen.

    Thread safety: step, begin_step, zero_grad, reload_params, state_dict,
    load_state_dict, save_checkpoint and load_checkpoint hold one lock, so a state dict
    taken from another thread sees the state between two steps.
    """

    _ALGORITHM = None

    def __init__(self, params, defaults, *, module=None, offload_fraction=0.0,
                 master_format=None, momentum_format=None, variance_format=None,
                 master=None, momentum=None, variance=None, placement="backward_order",
                 host_threads=0, chunk_elements=1 << 21, pipeline_slots=4,
                 max_grad_norm=0.0, early_start=False, speculative_early_start=False,
                 hyperparam_update="restore", host_cpus="auto", pinned_budget="auto",
                 offload_compute="auto", machine_rates=None, stream_chunk_bytes=64 << 20,
                 stream_slots=3, speculative_stream_bytes=1 << 30):
        if hyperparam_update not in ("error", "restore"):
            raise ValueError("hyperparam_update must be 'error' or 'restore', got %r"
                             % (hyperparam_update,))
        _options.check_options(offload_fraction, host_threads, chunk_elements,
                               pipeline_slots, max_grad_norm)
        offload_compute = _options.offload_compute_text(offload_compute)
        _options.check_stream_options(stream_chunk_bytes, stream_slots, machine_rates,
                                      speculative_stream_bytes)
        formats = (
            _options.pick_format("master", "master_format", master_format, "master", master),
            _options.pick_format("momentum", "momentum_format", momentum_format, "momentum",
                                 momentum),
            _options.pick_format("variance", "variance_format", variance_format, "variance",
                                 variance))
        groups = _options.normalize_params(params, module)
        self._building = True
        super().__init__(groups, defaults)
        self._building = False
        _options.check_lrs(self.param_groups)
        self._lock = threading.RLock()
        self.max_grad_norm = float(max_grad_norm)
        self.speculative_early_start = bool(speculative_early_start)
        self.early_start = bool(early_start) or self.speculative_early_start
        self._begun = None     # (lr, max_grad_norm, loss_scale) between begin_step and step
        self.hyperparam_update = hyperparam_update
        self.last_result = None
        self.skipped_steps = 0
        self._accumulating = False
        self._warned_accumulation = False
        self._hook_handles = []
        self._grad_accumulators = []

        # Every parameter that requires grad at construction, in param_groups order;
        # frozen ones are left out (no state) until they get a gradient (_rebind).
        self._layout(lambda p: p.requires_grad)
        # Gradient bookkeeping, per engine tensor (Note [Which parameters have a gradient]).
        self._grad_versions = [buf._version for buf in self._grads]
        self._fresh = [p.grad is not None for p in self._params]  # computed before build
        self._ready = [False] * len(self._params)   # grad_ready called in this step

        # One engine lr per step: lr_scale_g = lr_g / lr_ref, fixed (Note in _engine_lr).
        lrs = [float(group["lr"]) for group in self.param_groups]
        self._ref_group = max(range(len(lrs)), key=lambda i: lrs[i])
        ref = lrs[self._ref_group]
        self._lr_scales = [(lr / ref if ref > 0 else 1.0) for lr in lrs]
        self._engine_hyper = [self._hyper(group) for group in self.param_groups]

        self._engine_options = dict(
            master=formats[0], momentum=formats[1], variance=formats[2],
            offload_fraction=float(offload_fraction), placement=placement,
            host_threads=int(host_threads), chunk_elements=int(chunk_elements),
            pipeline_slots=int(pipeline_slots),
            speculative_early_start=self.speculative_early_start,
            host_cpus=_node.host_cpus(host_cpus, self._device),
            pinned_budget=_node.pinned_budget(pinned_budget),
            offload_compute=offload_compute,
            machine_rates=dict(machine_rates) if machine_rates is not None else None,
            stream_chunk_bytes=int(stream_chunk_bytes), stream_slots=int(stream_slots),
            speculative_stream_bytes=int(speculative_stream_bytes))
        self.host_cpus = tuple(self._engine_options["host_cpus"])  # (): unrestricted
        self.rebinds = 0
        self._rebind_step = None
        self._warned_rebind = 0
        self._formats = formats
        self._engine = self._new_engine()
        # torch.distributed.checkpoint runs a step with zero gradients to create the state
        # of an optimizer whose `state` is empty; Tandem's state exists from construction.
        for p in self._params:
            self.state[p] = {}
        self._record_param_versions()
        self._install_hooks()
        # Removes the hooks of the optimizer's last engine layout (_rebind edits the list).
        weakref.finalize(self, _remove_hooks, self._hook_handles)

    # ----------------------------------------------------------------------------------
    # Construction helpers

    def _layout(self, include):
        """Lays out the engine's tensors: every parameter of param_groups for which
        include(p) holds, in param_groups order, with a new zeroed gradient buffer each;
        the others are kept as frozen (no state). Sets the per-engine-tensor tables."""
        params, names, indices, frozen, group_of = [], [], [], [], []
        device = None
        index = 0
        for g, group in enumerate(self.param_groups):
            given = group.get("param_names")
            for j, p in enumerate(group["params"]):
                name = given[j] if given else None
                where = "'%s'" % name if name else "group %d param %d" % (g, j)
                if include(p):
                    device = self._check_param(p, where, device)
                    params.append(p)
                    # Unnamed: the torch state_dict index, which no rebind changes.
                    names.append(name if name else "g%d.p%d" % (g, index))
                    indices.append(index)
                    group_of.append(g)
                else:
                    frozen.append((where, p))
                index += 1
        if not params:
            raise ValueError("optimizer got no parameter that requires grad")
        self._layout_shards(params, names)
        if len(set(names)) != len(names):
            dup = sorted({n for n in names if names.count(n) > 1})
            raise ValueError("parameter names must be unique, got %s more than once" % dup)
        self._params = params      # engine tensor index -> parameter
        self._names = names        # engine tensor index -> engine tensor name
        self._indices = indices    # engine tensor index -> torch state_dict index
        self._group_of = group_of  # engine tensor index -> group
        self._frozen = frozen      # parameters left out: (label, parameter)
        self._device = device
        self._cuda = device.type == "cuda"
        self._index_by_id = {id(p): k for k, p in enumerate(params)}
        # Gradient buffers: the engine reads self._grads[k]; p.grad gets a separate alias
        # of it (self._alias_of), so nothing the user does to p.grad (p.grad.data = ...,
        # p.grad = None) can take the engine's buffer away.
        self._grads = [_torch.zeros(_local(p).shape, dtype=p.dtype, device=p.device)
                       for p in params]
        # The engine holds raw pointers: keep each parameter's storage alive, so that a
        # parameter reallocated behind our back (p.data = ..., model.to()) leaves the old
        # memory readable until _rebind takes the state from it, and no new tensor can
        # get the old address (a changed data_ptr() always means a reallocation).
        self._ptrs = [_local(p).data_ptr() for p in params]
        self._storages = [_local(p).detach() for p in params]

    def _layout_shards(self, params, names):
        """Note [Sharded parameters] (_dist.py): either every parameter is a DTensor on
        one mesh, or none is. Sets _sharded, _shard_signatures and _combine (the step's
        collective; None when nothing is sharded or the shard group has one rank)."""
        labels = ["'%s'" % n for n in names]
        dtensors = [_dist.is_dtensor(p) for p in params]
        self._sharded = any(dtensors)
        self._combine = None
        if not self._sharded:
            return
        if not all(dtensors):
            plain = labels[dtensors.index(False)]
            raise ValueError("%s is a plain tensor while other parameters are DTensors; "
                             "shard every parameter of the optimizer (fully_shard the root "
                             "module too) or none" % plain)
        if self.early_start:
            raise ValueError("early_start and speculative_early_start are not available "
                             "with DTensor parameters: FSDP2 assigns the sharded gradients "
                             "after its reduce-scatter, outside autograd's hooks")
        signatures = [_dist.check_param(p, label) for p, label in zip(params, labels)]
        _dist.check_same_mesh(signatures, labels)
        group = _dist.shard_group(signatures)
        if group is not None:
            import torch.distributed as dist
            if dist.get_world_size(group) > 1:
                self._combine = _dist.make_combine(group, params[0].device)

    def _tensor_formats(self, k):
        """Engine tensor k's formats override (Note [Shard-safe quantization groups] in
        _dist.py), or None for the optimizer's formats."""
        p = self._params[k]
        sharded = self._sharded and _dist.shard_dim(p) is not None
        return _dist.tensor_formats(self._formats, tuple(p.shape), sharded)

    def _new_engine(self):
        """A HybridOptimizer over the current layout (_layout), with the options and
        engine groups of construction; on CUDA it runs on the current stream."""
        specs = []
        for k, p in enumerate(self._params):
            mine = _local(p)
            spec = (self._names[k], mine.numel(), _DTYPE_NAMES[p.dtype], _DTYPE_NAMES[p.dtype],
                    mine.data_ptr(), self._grads[k].data_ptr(), self._group_of[k],
                    list(mine.shape))
            override = self._tensor_formats(k)
            # A 1-D shard may end at any element: the exact norm sums its elements one by
            # one (TensorSpec::norm_unit); other shards end between rows (the default).
            unit = 1 if self._sharded and p.dim() == 1 and _dist.shard_dim(p) is not None else 0
            specs.append(spec + (override, unit))
        engine_groups = [dict(h, lr_scale=s)
                         for h, s in zip(self._engine_hyper, self._lr_scales)]
        self._stream = 0
        with self._device_guard():
            if self._cuda:
                current = _torch.cuda.current_stream(self._device)
                self._stream = current.cuda_stream
                current.synchronize()  # the engine reads the parameters' initial values
            return _C.HybridOptimizer(
                specs, self._ALGORITHM, engine_groups, mode="gpu" if self._cuda else "host",
                cuda_stream=self._stream, **self._engine_options)

    @staticmethod
    def _check_param(p, where, device):
        if p.is_sparse or p.layout != _torch.strided:
            raise ValueError("%s: only dense (strided) parameters are supported, got %s"
                             % (where, p.layout))
        if p.dtype not in _DTYPE_NAMES:
            raise ValueError("%s: unsupported dtype %s (tandem supports float32, bfloat16 "
                             "and float16)" % (where, p.dtype))
        if not p.is_contiguous():
            raise ValueError("%s: parameter of shape %s is not contiguous; the engine "
                             "needs one dense buffer per parameter" % (where, tuple(p.shape)))
        if p.grad is not None and p.grad.is_sparse:
            raise ValueError("%s: sparse gradients are not supported" % where)
        if device is not None and p.device != device:
            if p.device.type != device.type:
                raise ValueError("%s: mixed devices: parameter on %s, but earlier ones are "
                                 "on %s; one optimizer needs all parameters on one CUDA "
                                 "device, or all on the CPU" % (where, p.device, device))
            raise ValueError("%s: parameter on %s, but the first parameter is on %s; one "
                             "optimizer serves one GPU" % (where, p.device, device))
        if p.device.type not in ("cpu", "cuda"):
            raise ValueError("%s: parameters on device '%s' are not supported (cpu or cuda)"
                             % (where, p.device))
        if p.device.type == "cuda" and p.device.index is None:
            return _torch.device("cuda", _torch.cuda.current_device())
        return p.device if device is None else device

    def _device_guard(self):
        if self._cuda:
            return _torch.cuda.device(self._device)
        return _NullContext()

    def _install_hooks(self):
        """Per parameter: a tensor hook that installs the engine's buffer as p.grad before
        autograd accumulates into it (when p.grad is None), and a post-accumulate hook
        that marks the gradient fresh and, with early start, calls grad_ready.

        The hooks hold the optimizer weakly and are removed when it is collected, so an
        optimizer that is dropped (a new one built for the same model) frees its engine
        and stops touching the parameters' gradients.

        A parameter that does not require grad now (one taken in from a state dict
        before it was unfrozen) cannot take hooks: it gets them at the first step or
        begin_step that finds it requiring grad (_hook_pending); until then its
        gradient is autograd's own, copied into the buffer at the step."""
        ref = weakref.ref(self)
        self._unhooked = []
        for k, p in enumerate(self._params):
            if not p.requires_grad:
                self._unhooked.append(k)
                continue
            self._hook_param(ref, k, p)

    def _hook_pending(self):
        """Hooks the parameters _install_hooks had to leave out that require grad now."""
        if self._unhooked and any(self._params[k].requires_grad for k in self._unhooked):
            ref = weakref.ref(self)
            pending = []
            for k in self._unhooked:
                if self._params[k].requires_grad:
                    self._hook_param(ref, k, self._params[k])
                else:
                    pending.append(k)
            self._unhooked = pending

    def _hook_param(self, ref, k, p):
        self._hook_handles.append(p.register_hook(
            lambda _grad, k=k: _call(ref, "_on_grad_arriving", k)))
        if hasattr(p, "register_post_accumulate_grad_hook"):  # torch >= 2.1
            self._hook_handles.append(p.register_post_accumulate_grad_hook(
                lambda _p, k=k: _call(ref, "_on_grad_accumulated", k)))
        else:
            # Older torch: a post-hook on the parameter's AccumulateGrad node, which
            # runs once the gradient has been accumulated into p.grad.
            with _torch.enable_grad():
                acc = p.expand_as(p).grad_fn.next_functions[0][0]
            self._hook_handles.append(acc.register_hook(
                lambda *_a, k=k: _call(ref, "_on_grad_accumulated", k)))
            self._grad_accumulators.append(acc)  # keeps the node (and hook) alive

    def _on_grad_arriving(self, k):
        # A reallocated parameter (perhaps on another device now) gets autograd's own
        # gradient; the next step's rebind adopts it into a new buffer.
        if self._params[k].grad is None and not self._moved(k):
            with _torch.no_grad():
                self._install_zeroed(k)

    def _on_grad_accumulated(self, k):
        self._fresh[k] = True
        if not self.early_start or self._accumulating or self._moved(k):
            return  # a reallocated parameter: the next step rebinds, then steps it
        with self._lock:
            with _torch.no_grad():
                self._adopt_grad(k)
            if self._ready[k] and not self._warned_accumulation:
                self._warned_accumulation = True
                _warn("early_start: parameter %s got a second gradient in one step "
                      "(gradient accumulation); the engine redoes its early work, so "
                      "results are exact but the first copies were wasted. Run every "
                      "micro-batch but the last inside `with opt.accumulating():`."
                      % self._label(k), EarlyStartAccumulationWarning)
            self._ready[k] = True
            with self._device_guard():
                self._engine.grad_ready(k)

    # ----------------------------------------------------------------------------------
    # torch.optim.Optimizer interface

    def add_param_group(self, param_group):
        """Adds a group while the optimizer is being built; later calls raise ValueError
        (the engine's tensor set is fixed at construction)."""
        if not getattr(self, "_building", False):
            raise ValueError("tandem optimizers cannot take new parameter groups after "
                             "construction; build a new optimizer with every group")
        super().add_param_group(param_group)

    @_torch.no_grad()
    def zero_grad(self, set_to_none=True):
        """As torch.optim: ``set_to_none=True`` (the default) sets every ``p.grad`` to
        None, so a parameter that gets no gradient before the next step is not stepped;
        ``False`` zeroes the gradients in place (a write: the parameters are stepped
        with zero gradients, as torch does). The engine's gradient buffers stay
        allocated either way and are installed again as ``p.grad`` when backward next
        produces a gradient."""
        with self._lock:
            if not set_to_none:
                self._rebind_if_needed(added=False)  # buffers that fit moved parameters
            for k, p in enumerate(self._params):
                if set_to_none:
                    p.grad = None
                    self._fresh[k] = False
                    self._grad_versions[k] = self._grads[k]._version
                elif p.grad is not None:
                    self._grads[k].zero_()
                    if not self._is_own_grad(k, p.grad):
                        p.grad = self._alias_of(k)
            for _where, p in self._frozen:
                if p.grad is not None:
                    if set_to_none:
                        p.grad = None
                    else:
                        if p.grad.grad_fn is not None:
                            p.grad.detach_()
                        else:
                            p.grad.requires_grad_(False)
                        p.grad.zero_()

    @contextlib.contextmanager
    def accumulating(self):
        """Context for the micro-batches of gradient accumulation but the last: inside
        it the gradient hooks do not call the engine's grad_ready (early start), so
        the early work runs once, on the last micro-batch's backward outside it. A no-op
        without early start. Example::

            for micro in batches[:-1]:
                with opt.accumulating():
                    model(micro).mean().backward()
            model(batches[-1]).mean().backward()
            opt.step(); opt.zero_grad()
        """
        previous = self._accumulating
        self._accumulating = True
        try:
            yield self
        finally:
            self._accumulating = previous

    @_torch.no_grad()
    def begin_step(self, *, max_grad_norm=None, loss_scale=1.0):
        """Announces the next step before its backward (speculative early start).

        Takes the learning rate from the param groups now (schedulers step before
        this), and the clipping norm and loss scale the next ``step()`` will use. Each
        gradient hook then queues its offloaded chunks for a speculative host update.
        The next ``step()`` must be called without a closure; passing it a different
        ``max_grad_norm`` or ``loss_scale`` raises ValueError after undoing the
        speculation. Requires ``speculative_early_start=True``.
        """
        if not self.speculative_early_start:
            raise ValueError("begin_step needs the optimizer built with "
                             "speculative_early_start=True")
        with self._lock:
            if self._engine.step_begun:
                raise ValueError("begin_step called twice without a step in between")
            # Parameters that require grad but are not in the engine get their gradient
            # in the backward that follows: rebind now.
            self._rebind_if_needed(anticipate=True)
            self._sync_params(rebind=False)  # parameters written since the last step
            lr = self._engine_lr()
            clip = self.max_grad_norm if max_grad_norm is None else float(max_grad_norm)
            with self._device_guard():
                self._engine.begin_step(lr, clip, float(loss_scale))
            self._begun = (lr, clip, float(loss_scale))

    @_torch.no_grad()
    def step(self, closure=None, *, max_grad_norm=None, loss_scale=None):
        """One optimizer step over every parameter that has a gradient.

        Args:
          closure: optional callable re-evaluating the model and returning the loss.
          max_grad_norm: overrides the constructor's clipping norm for this step.
          loss_scale: gradients are divided by this (for static loss scaling; default
            1, or the value given to ``begin_step``).

        A parameter is stepped when it got a gradient since the last step (backward
        accumulated into it, ``p.grad`` was assigned, or written in place); one whose
        ``p.grad`` is None, or that got none, keeps its weight, state and step count.
        Parameters written since the last step are reloaded into the engine first
        (``reload_params``).

        Returns the closure's loss (or None). ``self.last_result`` holds the engine's
        StepResult(applied, grad_norm, step, stepped_tensors); ``applied`` is False when
        a non-finite gradient made the engine skip the step (nothing changed;
        ``skipped_steps`` counts those, with a SkippedStepWarning).
        """
        loss = None
        if closure is not None:
            if self._engine.step_begun:
                # The engine would see gradients of a second backward after speculating
                # on the first; refuse before anything runs.
                raise ValueError("step() after begin_step() takes no closure")
            # Outside the lock: backward's hooks take it (from autograd's threads).
            with _torch.enable_grad():
                loss = closure()
        with self._lock:
            # (lr, clip, loss_scale) of begin_step while the engine's step is begun; the
            # engine's Step ends it whether it succeeds or raises.
            begun = self._begun if self._engine.step_begun else None
            self._begun = begun
            self._rebind_if_needed()  # unfrozen or reallocated parameters (not when begun)
            self._check_frozen()
            active = bytearray(len(self._params))
            for k in range(len(self._params)):
                active[k] = 1 if self._take_grad(k) else 0
            self._sync_params(rebind=False)
            if begun is not None:
                # The lr announced by begin_step; a differing clip norm or loss scale
                # reaches the engine, which undoes the speculation and raises.
                lr = begun[0]
                clip = begun[1] if max_grad_norm is None else float(max_grad_norm)
                loss_scale = begun[2] if loss_scale is None else loss_scale
            else:
                lr = self._engine_lr()
                clip = self.max_grad_norm if max_grad_norm is None else float(max_grad_norm)
                loss_scale = 1.0 if loss_scale is None else loss_scale
            active = bytes(active)
            try:
                result = self._engine_step(lr, clip, float(loss_scale), active)
            finally:
                self._begun = None
                self._ready = [False] * len(self._params)
            for k in range(len(self._params)):
                self._fresh[k] = False
                self._grad_versions[k] = self._grads[k]._version
            self.last_result = StepResult(*result)
            if not self.last_result.applied:
                self.skipped_steps += 1
                _warn("tandem: non-finite gradient (norm %r): step skipped, nothing "
                      "changed (%d skipped so far)"
                      % (self.last_result.grad_norm, self.skipped_steps), SkippedStepWarning)
        return loss

    def _engine_step(self, lr, clip, loss_scale, active):
        with self._device_guard():
            if self._cuda:
                current = _torch.cuda.current_stream(self._device)
                if current.cuda_stream != self._stream:
                    # The engine runs on the stream it was built with; order it after the
                    # caller's stream and the caller's stream after it.
                    engine = self._engine_stream()
                    engine.wait_stream(current)
                    result = self._engine.step(lr, clip, loss_scale, active,
                                               self._combine)
                    current.wait_stream(engine)
                    return result
            return self._engine.step(lr, clip, loss_scale, active, self._combine)

    def _engine_stream(self):
        return (_torch.cuda.default_stream(self._device) if self._stream == 0
                else _torch.cuda.ExternalStream(self._stream, device=self._device))

    def state_dict(self):
        """The torch-style state dict with the engine's whole state.

        ``state[i]`` holds the engine snapshot arrays of parameter i (torch's numbering
        over param_groups), as CPU tensors: ``master_f32``/``m_f32``/``v_f32`` float32,
        ``master_bf16``/``m_scales``/``v_scales`` bfloat16 (bit patterns), ``ecc8`` and
        ``m_codes`` int8, ``ecc16`` int16, ``v_codes`` uint8; plus ``step``, the
        updates that parameter has received (a float tensor, as torch keeps it). The
        ``tandem`` entry carries the version (2), algorithm, formats, the optimizer's
        step, the engine groups and per tensor its name, numel, shape, dtypes and group.
        """
        return _state.state_dict(self)

    def load_state_dict(self, state_dict):
        """Restores a state dict written by ``state_dict`` of a tandem optimizer with the
        same parameters, algorithm and formats (any offload fraction, placement, chunk
        size or thread count; versions 1 and 2), or a torch.optim state dict of the same
        algorithm (no ``tandem`` entry: ``tandem.torch.from_torch_state``). The
        parameters are set from the restored master weights, except those never stepped,
        which keep their weights (Note in _state.py). Every field is checked
        first: ValueError naming the first bad or missing one, nothing changed."""
        _state.load_state_dict(self, state_dict)

    # ----------------------------------------------------------------------------------
    # Tandem extras

    def save_checkpoint(self, path, compression="none", sync=True):
        """Writes the engine's whole state to a Tandem checkpoint file (atomic, every
        section CRC-checked; docs/checkpoint_format.md), without going through Python
        objects, with the param_groups (every key but ``params``) and the binding's
        learning-rate bookkeeping as JSON metadata. compression: "none" (default),
        "auto" or "all"; sync=False skips the fsyncs. Save the scheduler's state beside
        it. Raises ValueError (nothing written) for a param_group value JSON cannot
        hold, naming it, and RuntimeError on I/O failures."""
        _state.save_checkpoint(self, path, compression, sync)

    def load_checkpoint(self, path):
        """Loads and fully verifies a checkpoint file written by ``save_checkpoint`` (at
        any offload fraction) and restores it: masters (written to the parameters
        stepped at least once), moments, steps, hyper-parameters and param_groups, so
        that training resumes bit-identically. A file without param_groups (older
        tandem, C++) keeps this optimizer's, with a warning. Raises RuntimeError for a damaged or unreadable
        file and ValueError for one that does not match this optimizer; nothing changes
        then."""
        _state.load_checkpoint(self, path)

    @staticmethod
    def _require_checkpoint():
        if not _C.has_checkpoint:
            raise RuntimeError("this build of tandem has no checkpoint support "
                               "(built without the checkpoint/ library)")

    def wait_param(self, p, stream=None):
        """Makes ``stream`` (default: the current CUDA stream) wait until parameter p's
        update of the last step is final on the GPU. A no-op in host mode."""
        if not self._cuda:
            return
        k = self._index_of(p)
        if stream is None:
            stream = _torch.cuda.current_stream(self._device)
        handle = stream if isinstance(stream, int) else stream.cuda_stream
        with self._device_guard():
            self._engine.wait_param(k, handle)

    def register_forward_waits(self, module):
        """Registers a forward pre-hook on every submodule of ``module`` that owns
        parameters of this optimizer, calling ``wait_param`` for them on the current
        stream before the submodule runs. Returns the hook handles."""
        # Every parameter of param_groups: one frozen at construction may join the engine
        # later (_rebind); the hook waits for those in the engine when it runs.
        owned = {id(p) for group in self.param_groups for p in group["params"]}
        handles = []
        for sub in module.modules():
            mine = [p for p in sub.parameters(recurse=False) if id(p) in owned]
            if mine:
                def pre_hook(_module, _inputs, mine=mine):
                    for p in mine:
                        if id(p) in self._index_by_id:
                            self.wait_param(p)
                handles.append(sub.register_forward_pre_hook(pre_hook))
        return handles

    @_torch.no_grad()
    def reload_params(self, params=None):
        """Re-reads the master weights of ``params`` (default: every parameter) from the
        parameters' current values, for writes the optimizer cannot see.

        Writes through torch ops on the parameter (``model.load_state_dict``,
        ``nn.init.*``, ``p.copy_`` under ``torch.no_grad()``) bump the parameter's version
        counter and are reloaded by the next step without this call. ``p.data.copy_``,
        ``p.detach()`` of an older version counter, or writes through raw pointers
        (NCCL, custom kernels) bypass the counter: call this after them."""
        with self._lock:
            self._rebind_if_needed()
            if params is None:
                indices = list(range(len(self._params)))
            else:
                if isinstance(params, _torch.Tensor):
                    params = [params]
                indices = [self._index_of(p) for p in params]
            self._reload(indices)

    def tensor_step_counts(self):
        """Each parameter's own step count (the updates it received), in the order of
        the engine's parameters in ``param_groups`` (those that required grad at
        construction, and those that got a gradient since: ``param_names``);
        torch.optim keeps the same per parameter (``state[p]["step"]``)."""
        return list(self._engine.tensor_step_counts())

    @property
    def param_names(self):
        """The engine's tensor names, in engine order: the parameters' names when named
        (``named_parameters()``, ``module=``), otherwise "g<group>.p<index>" with the
        parameter's index over all groups (its torch state_dict index)."""
        return list(self._names)

    @property
    def mode(self):
        """"gpu" or "host"."""
        return self._engine.mode

    def placement(self):
        """The engine's placement: per tensor (numel, device_count) and stream_counts,
        total, offloaded, streamed (host-resident elements computed on the GPU) and
        stream_share."""
        return self._engine.placement()

    def compute_split(self):
        """Where the host-resident elements are computed: share (on the GPU), and for
        the rates used the modelled step_ms, its terms (d2h_ms, h2d_ms, host_ms,
        gpu_ms) and bound; zeros when no rates were used."""
        return self._engine.compute_split()

    def memory(self):
        """Bytes the engine holds, by category, on the device and on the host."""
        return self._engine.memory()

    def last_step_times(self):
        """Busy time of each stage of the last step, in milliseconds."""
        return self._engine.last_step_times()

    @property
    def step_count(self):
        return self._engine.step_count

    # ----------------------------------------------------------------------------------
    # Internals

    def _index_of(self, p):
        k = self._index_by_id.get(id(p))
        if k is None:
            raise ValueError("parameter is not stepped by this optimizer")
        return k

    def _label(self, k):
        return _options.label(self._names[k], self._params[k])

    def _alias_of(self, k):
        """A new tensor sharing the storage of engine buffer k (what p.grad gets): a
        DTensor like the parameter for a DTensor parameter."""
        p = self._params[k]
        if self._sharded:
            return _dist.wrap_like(self._grads[k].detach(), p, tuple(p.shape))
        return self._grads[k].detach()

    def _is_own_grad(self, k, grad):
        buf = self._grads[k]
        grad = _local(grad)
        return (grad.data_ptr() == buf.data_ptr() and grad.shape == buf.shape
                and grad.dtype == buf.dtype and grad.device == buf.device
                and grad.layout == _torch.strided and grad.is_contiguous())

    def _install_zeroed(self, k):
        buf = self._grads[k]
        buf.zero_()
        self._params[k].grad = self._alias_of(k)
        self._grad_versions[k] = buf._version  # installing is no gradient yet

    def _moved(self, k):
        """Whether parameter k was reallocated since the engine was built over it (its
        old storage is kept alive, so no new tensor can have the old address)."""
        return _local(self._params[k]).data_ptr() != self._ptrs[k]

    def _check_realloc(self, k):
        """Reached with the engine's step begun (begin_step): no rebind can run then."""
        if _local(self._params[k]).data_ptr() != self._ptrs[k]:
            raise RuntimeError("%s was reallocated (model.to(), p.data = ...?) between "
                               "begin_step() and step(); move the model before begin_step()"
                               % self._label(k))

    def _adopt_grad(self, k):
        """Makes the engine's buffer hold parameter k's gradient; returns False when
        p.grad is None. Note [Which parameters have a gradient].

        A p.grad that is not the engine's buffer (assigned, stolen by autograd,
        ``p.grad.data = ...``, resized) is copied into the buffer, which is installed
        again as p.grad; another shape, dtype or device raises ValueError."""
        p, buf = self._params[k], self._grads[k]
        self._check_realloc(k)
        grad = p.grad
        if grad is None:
            return False
        if grad.is_sparse or grad.layout != _torch.strided:
            raise ValueError("%s: sparse gradients are not supported" % self._label(k))
        if self._is_own_grad(k, grad):
            return True
        if (grad.shape != p.shape or grad.device != p.device
                or _local(grad).shape != buf.shape):
            raise ValueError("%s: p.grad was replaced by a tensor of shape %s, %s on %s "
                             "(p.grad.data = ... or resize_?); the gradient must keep the "
                             "parameter's shape and device"
                             % (self._label(k), tuple(grad.shape), grad.dtype, grad.device))
        if grad.dtype != p.dtype and not self._sharded:
            raise ValueError("%s: p.grad has dtype %s, the parameter %s; the gradient must "
                             "keep the parameter's dtype" % (self._label(k), grad.dtype,
                                                             p.dtype))
        buf.copy_(_local(grad))  # a sharded gradient in another dtype (FSDP2's reduce
        # dtype) is converted here
        p.grad = self._alias_of(k)
        self._fresh[k] = True  # an assigned gradient is a gradient
        return True

    def _take_grad(self, k):
        """Whether parameter k has a gradient for this step (and its buffer holds it).

        Note [Which parameters have a gradient]: torch.optim steps the parameters whose
        p.grad is not None. We step those that got a gradient since the last step: a
        post-accumulate hook fired (backward), p.grad was assigned another tensor
        (copied into the engine buffer), or the buffer was written in place (its
        version counter moved: p.grad.copy_, clip_grad_norm_, torch's zero_grad with
        set_to_none=False). Ours with set_to_none=True sets p.grad = None; the buffer
        stays alive in self._grads and is installed again by the tensor hook before
        autograd accumulates. A second step() without any new gradient steps nothing
        (torch would step again with the old gradients)."""
        if not self._adopt_grad(k):
            return False
        return self._fresh[k] or self._grads[k]._version != self._grad_versions[k]

    def _check_frozen(self):
        """Reached with the engine's step begun (otherwise _rebind_if_needed has taken the
        unfrozen parameters in): refuse to silently skip one (torch.optim would step
        it)."""
        for where, p in self._frozen:
            if p.grad is not None and p.requires_grad:
                raise ValueError(
                    "parameter %s (shape %s, %s) was unfrozen between begin_step() and "
                    "step(), so it has no optimizer state in this step; unfreeze it before "
                    "begin_step()" % (where, tuple(p.shape), p.dtype))

    def _rebind_if_needed(self, anticipate=False, added=True):
        """Rebinds the engine (_rebind) when a parameter left out of it now has a
        gradient (unfrozen after construction; with ``anticipate``, from begin_step, one
        that requires grad: its gradient comes during the backward that follows) or an
        engine parameter was reallocated (same shape and dtype, new address or device).
        ``added=False`` looks for reallocations only. A no-op while the engine's step is
        begun. Note [Rebinding]."""
        self._hook_pending()
        if self._engine.step_begun:
            return
        new = [p for _where, p in self._frozen
               if added and p.requires_grad and (anticipate or p.grad is not None)]
        self._rebind_checked({id(p) for p in new})

    def _rebind_for_load(self, state_dict=None):
        """Before load_state_dict/load_checkpoint: rebinds for reallocated parameters (the
        restore writes the weights through the engine's pointers), and, for a state dict
        that holds state for parameters frozen at construction (written after they were
        unfrozen: resuming progressive unfreezing), takes those in first, so that the
        tensor sets match."""
        if self._engine.step_begun:
            return
        new = set()
        state = state_dict.get("state") if isinstance(state_dict, dict) else None
        if isinstance(state, dict):
            params = [p for group in self.param_groups for p in group["params"]]
            for i in state:
                if (isinstance(i, int) and 0 <= i < len(params)
                        and id(params[i]) not in self._index_by_id):
                    new.add(id(params[i]))
        self._rebind_checked(new)

    def _rebind_checked(self, new_ids):
        """Rebinds when new_ids (parameters to take in) is not empty or a parameter was
        reallocated; a reallocation to another shape or dtype raises RuntimeError."""
        moved = [k for k in range(len(self._params)) if self._moved(k)]
        if not new_ids and not moved:
            return
        for k in moved:
            p, buf = self._params[k], self._grads[k]
            if p.shape != buf.shape or p.dtype != buf.dtype:
                raise RuntimeError(
                    "%s: the optimizer was built for shape %s, %s; the parameter changed "
                    "shape or dtype since (model.half(), p.data = ...?) and its optimizer "
                    "state cannot follow. Build the optimizer after converting the model."
                    % (self._label(k), tuple(buf.shape), buf.dtype))
        self._rebind(new_ids, moved)

    def _rebind(self, new_ids, moved):
        """Note [Rebinding]: the engine holds raw pointers to the parameters and state for
        the tensors it was built with. When parameters are reallocated (same shape and
        dtype: model.to(device), p.data = ..., Accelerate's prepare) or parameters left
        out at construction (frozen) get a gradient, we build a new engine over the
        current parameters (the old tensors plus the new ones, in param_groups order; the
        mode follows their device) and restore into it the old engine's snapshot entries
        by tensor name: masters, moments and per-tensor steps carry over bit for bit;
        new tensors keep their fresh state (step 0, zero moments, master from the
        parameter). The restore writes the masters to the parameters; their values
        before it are put back (a never-stepped parameter need not hold its decoded
        master), so a rebind changes no weight. The old storages are kept alive until
        here (_layout), so the snapshot reads valid memory (masters that alias the
        parameters included). Costs a full state copy: warned (RebindWarning)."""
        old = dict(params=self._params, grads=self._grads, fresh=self._fresh,
                   grad_versions=self._grad_versions, param_versions=self._param_versions,
                   frozen=self._frozen, hooks=list(self._hook_handles))
        with self._device_guard():
            if self._cuda:
                _torch.cuda.synchronize(self._device)  # the last step's state is final
            snap = self._engine.snapshot()
        keep = set(self._index_by_id) | new_ids
        # Weights written by torch ops since the engine last wrote them: reloaded below.
        written = {id(p) for k, p in enumerate(self._params)
                   if _local(p)._version != self._param_versions[k]}
        old_tables = {key: getattr(self, key) for key in (
            "_params", "_names", "_indices", "_group_of", "_frozen", "_device", "_cuda",
            "_index_by_id", "_grads", "_ptrs", "_storages", "_stream")}
        try:
            self._layout(lambda p: id(p) in keep)
            engine = self._new_engine()
            with self._device_guard():
                # The restore writes the masters to the parameters; a parameter need not
                # hold its decoded master (never stepped, new, written, reloaded), so its
                # value is put back after: a rebind leaves every weight as it was. The
                # values wait in host memory: on a GPU a second copy of the model may not
                # fit (the rebind Accelerate's prepare causes comes before training).
                values = [_local(p).detach().to("cpu", copy=True) for p in self._params]
                if new_ids:
                    # New tensors start fresh: the new engine's own entries for them.
                    fresh = engine.snapshot()
                    by_name = {t["name"]: t for t in snap["tensors"]}
                    fresh["tensors"] = [by_name.get(t["name"], t) for t in fresh["tensors"]]
                    for key in ("step", "groups", "metadata"):
                        if key in snap:
                            fresh[key] = snap[key]
                else:
                    # Reallocated only: the same tensors in the same order (_layout), so
                    # the old snapshot restores as it is; one state copy fewer.
                    fresh = snap
                engine.restore(fresh)
                if self._cuda:
                    _torch.cuda.synchronize(self._device)
                for p, value in zip(self._params, values):
                    _local(p).data.copy_(value)  # .data: the version counter stays
                del values
        except BaseException:
            for key, value in old_tables.items():  # no state change on a failed call
                setattr(self, key, value)
            raise
        old_index = {id(p): k for k, p in enumerate(old["params"])}
        # Gradients: the engine's old buffers (p.grad aliases them) move into the new ones.
        self._fresh, self._grad_versions, self._param_versions = [], [], []
        for k, p in enumerate(self._params):
            buf = self._grads[k]
            o = old_index.get(id(p))
            if o is None:  # a new tensor: autograd's p.grad is adopted by _take_grad
                self._fresh.append(p.grad is not None)
                self._param_versions.append(_local(p)._version)
            else:
                old_buf = old["grads"][o]
                self._fresh.append(old["fresh"][o]
                                   or old_buf._version != old["grad_versions"][o])
                grad = p.grad
                if grad is not None and _local(grad).data_ptr() == old_buf.data_ptr():
                    buf.copy_(old_buf)
                    p.grad = self._alias_of(k)
                self._param_versions.append(old["param_versions"][o])
            self._grad_versions.append(buf._version)
        self._ready = [False] * len(self._params)
        _remove_hooks(old["hooks"])
        del self._hook_handles[:]
        del self._grad_accumulators[:]
        self._install_hooks()
        self._engine = engine  # the old one is freed here
        if written:
            self._reload([k for k, p in enumerate(self._params) if id(p) in written])
        self.rebinds += 1
        self._warn_rebind(len(new_ids), len(moved))

    def _warn_rebind(self, added, moved):
        """Warns at the first rebind, and once more if rebinds come at consecutive steps
        (a loop that reallocates parameters every step)."""
        step = self._engine.step_count
        repeated = self._rebind_step is not None and step - self._rebind_step <= 1
        self._rebind_step = step
        if self._warned_rebind == 0 or (repeated and self._warned_rebind == 1):
            self._warned_rebind += 1
            what = []
            if added:
                what.append("%d parameter(s) frozen at construction got a gradient (or "
                            "state from a state dict)" % added)
            if moved:
                what.append("%d parameter(s) were reallocated (model.to(), p.data = ...)"
                            % moved)
            _warn("tandem: %s; the optimizer rebuilt its engine over the current "
                  "parameters, copying its whole state (a full snapshot and restore)%s. "
                  "Fine once; build the optimizer after moving the model to avoid it."
                  % ("; ".join(what),
                     ", at consecutive steps: something reallocates parameters every "
                     "step" if repeated else ""), RebindWarning)

    def _record_param_versions(self):
        self._param_versions = [_local(p)._version for p in self._params]

    def _sync_params(self, rebind=True):
        """Reloads the parameters written (by torch ops) since the engine last wrote
        them, after rebinding the engine if parameters were unfrozen or reallocated
        (with ``rebind``; the common entry of step, begin_step and the state calls).
        Note [The parameter is the source of truth]: the engine writes parameters
        through raw pointers, which leaves their version counters alone, so a counter
        that moved means the user wrote the weight."""
        if rebind:
            self._rebind_if_needed()
        changed = [k for k, p in enumerate(self._params)
                   if _local(p)._version != self._param_versions[k]]
        if changed:
            self._reload(changed)

    def _reload(self, indices):
        for k in indices:
            self._check_realloc(k)
        if indices:
            with self._device_guard():
                if self._cuda:
                    current = _torch.cuda.current_stream(self._device)
                    if current.cuda_stream != self._stream:
                        self._engine_stream().wait_stream(current)
                self._engine.reload_params(list(indices))
        self._record_param_versions()

    def _engine_lr(self):
        """The one lr the engine's Step takes.

        Note [One lr per step]: the engine multiplies the step's lr by each group's
        lr_scale, fixed at construction. We step with the reference group's current lr
        and lr_scale_g = lr_g / lr_ref from construction, which is exact as long as every
        group's lr keeps its ratio to the reference (schedulers that scale all groups
        alike); a change of ratio or of any other hyper-parameter is refused, or
        passed to the engine (SetHyperParams) with hyperparam_update="restore".
        """
        lrs = [float(group["lr"]) for group in self.param_groups]
        for g, lr in enumerate(lrs):
            if not math.isfinite(lr) or lr < 0:
                raise ValueError("group %d: lr must be finite and >= 0, got %r (the "
                                 "group's learning rate)" % (g, lr))
        ref = lrs[self._ref_group]
        hyper = [self._hyper(group) for group in self.param_groups]
        ratio_ok = all(math.isclose(lr, ref * s, rel_tol=_LR_RTOL, abs_tol=0.0)
                       for lr, s in zip(lrs, self._lr_scales))
        if ratio_ok and hyper == self._engine_hyper:
            return ref
        if self.hyperparam_update != "restore":
            what = ("the ratio between the groups' learning rates changed (now %s, built "
                    "with ratios %s to group %d)" % (lrs, self._lr_scales, self._ref_group)
                    if not ratio_ok else
                    "a hyper-parameter other than lr changed (now %s, built with %s)"
                    % (hyper, self._engine_hyper))
            raise ValueError(what + "; the engine takes one lr per step and fixed per-group "
                             "hyper-parameters. Pass hyperparam_update='restore' (the "
                             "default) to apply such changes.")
        self._ref_group = max(range(len(lrs)), key=lambda i: lrs[i])
        ref = lrs[self._ref_group]
        scales = [(lr / ref if ref > 0 else 1.0) for lr in lrs]
        with self._device_guard():
            if self._cuda:
                _torch.cuda.current_stream(self._device).synchronize()
            self._engine.set_groups([dict(h, lr_scale=s) for h, s in zip(hyper, scales)])
        self._lr_scales = scales
        self._engine_hyper = hyper
        return ref

    def _hyper(self, group):
        raise NotImplementedError


def _call(ref, method, k):
    """Calls ref().method(k) while the optimizer lives (gradient hooks)."""
    opt = ref()
    if opt is not None:
        getattr(opt, method)(k)


def _remove_hooks(handles):
    for handle in handles:
        handle.remove()


class _NullContext:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


def _betas(group):
    b1, b2 = group["betas"]
    return float(b1), float(b2)


class AdamW(TandemOptimizer):
    """AdamW (decoupled weight decay), as torch.optim.AdamW.

    Args:
      params: parameters or parameter groups.
      lr, betas, eps, weight_decay: as torch.optim.AdamW (per group).
      amsgrad, maximize: must be False (not supported).
      **options: the Tandem options of TandemOptimizer.
    """

    _ALGORITHM = "adamw"
    _DEFAULT_WEIGHT_DECAY = 1e-2

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=None,
                 *, amsgrad=False, maximize=False, **options):
        if amsgrad:
            raise ValueError("amsgrad is not supported by tandem")
        if maximize:
            raise ValueError("maximize is not supported by tandem")
        if weight_decay is None:
            weight_decay = self._DEFAULT_WEIGHT_DECAY
        defaults = dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay)
        super().__init__(params, defaults, **options)

    def _hyper(self, group):
        b1, b2 = _betas(group)
        return dict(beta1=b1, beta2=b2, eps=float(group["eps"]),
                    weight_decay=float(group["weight_decay"]), momentum=0.0,
                    dampening=0.0, nesterov=False)


class Adam(AdamW):
    """Adam with L2 weight decay (added to the gradient), as torch.optim.Adam."""

    _ALGORITHM = "adam"
    _DEFAULT_WEIGHT_DECAY = 0.0


class Lion(TandemOptimizer):
    """Lion (Chen et al. 2023) with decoupled weight decay.

    betas = (beta1, beta2): beta1 interpolates the update direction, beta2 decays the
    momentum. ``variance`` must stay "f32" (Lion keeps no second moment).
    """

    _ALGORITHM = "lion"

    def __init__(self, params, lr=1e-4, betas=(0.9, 0.99), weight_decay=0.0, **options):
        defaults = dict(lr=lr, betas=betas, weight_decay=weight_decay)
        super().__init__(params, defaults, **options)

    def _hyper(self, group):
        b1, b2 = _betas(group)
        return dict(beta1=b1, beta2=b2, eps=1e-8, weight_decay=float(group["weight_decay"]),
                    momentum=0.0, dampening=0.0, nesterov=False)


class SGD(TandemOptimizer):
    """SGD with momentum, dampening, Nesterov and L2 weight decay, as torch.optim.SGD.

    ``momentum`` is the momentum factor; the momentum buffer's format is
    ``momentum_format`` ("f32" or "q8")."""

    _ALGORITHM = "sgd"

    def __init__(self, params, lr=1e-3, momentum=0.0, dampening=0.0, weight_decay=0.0,
                 nesterov=False, *, maximize=False, **options):
        if maximize:
            raise ValueError("maximize is not supported by tandem")
        if isinstance(momentum, str):
            raise ValueError("SGD's momentum is the momentum factor (a number), got %r; "
                             "choose the momentum buffer's format with momentum_format="
                             % (momentum,))
        defaults = dict(lr=lr, momentum=momentum, dampening=dampening,
                        weight_decay=weight_decay, nesterov=nesterov)
        super().__init__(params, defaults, **options)

    def _hyper(self, group):
        return dict(beta1=0.9, beta2=0.999, eps=1e-8,
                    weight_decay=float(group["weight_decay"]),
                    momentum=float(group["momentum"]), dampening=float(group["dampening"]),
                    nesterov=bool(group["nesterov"]))


def _serialised(method, sync_before=False, record_after=False):
    """``method`` under the optimizer's lock; with sync_before, parameters written since
    the last step are reloaded first (so the saved masters are the live weights; this
    rebinds first when needed); with record_after (the loads), the engine is rebound
    first for reallocated parameters and parameters the state dict has state for
    (_rebind_for_load), and the parameters' version counters are recorded after the
    engine wrote them (Note [The parameter is the source of truth])."""
    @functools.wraps(method)
    def wrapper(self, *args, **kwargs):
        with self._lock:
            if sync_before and not self._engine.step_begun:
                self._sync_params()
            if record_after:
                self._rebind_for_load(args[0] if args else None)
            result = method(self, *args, **kwargs)
            if record_after:
                self._record_param_versions()
            return result
    return wrapper


# The state methods, serialised with step() (thread safety in TandemOptimizer).
for _name, _before, _after in (("state_dict", True, False), ("save_checkpoint", True, False),
                               ("load_state_dict", False, True),
                               ("load_checkpoint", False, True)):
    setattr(TandemOptimizer, _name,
            _serialised(getattr(TandemOptimizer, _name), _before, _after))
del _name, _before, _after
