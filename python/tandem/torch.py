"""PyTorch optimizers backed by Tandem's HybridOptimizer.

Usage::

    import tandem.torch
    opt = tandem.torch.AdamW(model.parameters(), lr=3e-4, weight_decay=0.1,
                             offload_fraction=0.5, master="bf16+ecc8",
                             momentum="q8", variance="q8")
    for batch in data:
        loss = model(batch).mean(); loss.backward()
        opt.step(); opt.zero_grad()

The optimizers subclass :class:`torch.optim.Optimizer`: ``param_groups`` carry the
per-group hyper-parameters, ``torch.optim.lr_scheduler`` schedulers work unchanged,
``state_dict``/``load_state_dict`` round-trip the engine state bit for bit.

Pointer contract (docs/python.md): the engine keeps raw pointers to every parameter and
to a gradient buffer that the optimizer allocates once per parameter and installs as
``p.grad``. Parameters must not be reallocated (``model.to(...)``, ``p.data = ...``)
after the optimizer is built; ``zero_grad`` zeroes the buffers in place whatever
``set_to_none`` says. A ``p.grad`` replaced by another tensor is copied into the buffer
at the next step (correct, but an extra copy).
"""

import collections
import math
import sys

import torch as _torch

from tandem import _C
from tandem import _state
from tandem._state import export_masters, from_torch_state, to_torch_state

__all__ = ["AdamW", "Adam", "Lion", "SGD", "StepResult", "TandemOptimizer", "export_masters",
           "from_torch_state", "to_torch_state"]

StepResult = collections.namedtuple("StepResult", ["applied", "grad_norm", "step"])

_DTYPE_NAMES = {
    _torch.float32: "f32",
    _torch.bfloat16: "bf16",
    _torch.float16: "f16",
}

_LR_RTOL = 1e-9


def _is_dtensor(t):
    """Whether t is a torch.distributed DTensor (without importing torch.distributed:
    a program that holds DTensors has imported their module already)."""
    for module in ("torch.distributed.tensor", "torch.distributed._tensor"):
        dtensor = getattr(sys.modules.get(module), "DTensor", None)
        if dtensor is not None and isinstance(t, dtensor):
            return True
    return any(c.__name__ == "DTensor" for c in type(t).__mro__)


class TandemOptimizer(_torch.optim.Optimizer):
    """Base class: a torch optimizer whose step runs in a Tandem HybridOptimizer.

    Subclasses set ``_ALGORITHM`` and implement ``_hyper(group)``, which maps a param
    group to the engine's hyper-parameter fields.

    Tandem options (keyword-only, shared by every algorithm):
      offload_fraction: fraction of the elements whose state lives in (pinned) host
        memory and is stepped by the host, in [0, 1]. GPU mode only; default 0.
      master: master weight format: "f32" (default), "bf16", "bf16+ecc8", "bf16+ecc16".
      momentum: first moment format: "f32" (default) or "q8".
      variance: second moment format (Adam/AdamW only): "f32" (default) or "q8".
      placement: "backward_order" (default), "forward_order" or "largest_first".
      host_threads: host threads for the host kernels; 0 (default) = all cores.
      chunk_elements: offload pipeline chunk, a multiple of 32 (default 2**21).
      pipeline_slots: pinned gradient slots in flight, >= 2 (default 4).
      max_grad_norm: > 0 clips the global gradient L2 norm at each step (default 0: off).
      early_start: call the engine's GradReady from a post-accumulate-grad hook as each
        gradient is final, so offloaded gradients start copying during backward. Only
        for one backward per step (see docs/python.md); default False.
      speculative_early_start: also update the offloaded state on the host during
        backward, speculatively, after ``begin_step()`` (implies ``early_start``); the
        step keeps the speculative results when every gradient is finite and clipping
        does not trigger, and otherwise restores them, so results are bit-identical
        either way. Costs a host backup of the offloaded state (``memory()["host"]
        ["speculation"]``). Default False.
      hyperparam_update: what to do when a group's hyper-parameters change after
        construction (per-group learning-rate ratios, betas, eps, weight decay):
        "restore" (default) passes the new values to the engine before the step
        (HybridOptimizer::SetHyperParams: cheap, no state is copied); "error" raises
        ValueError instead, for code that wants hyper-parameters frozen.
    """

    _ALGORITHM = None

    def __init__(self, params, defaults, *, offload_fraction=0.0, master="f32",
                 momentum="f32", variance="f32", placement="backward_order",
                 host_threads=0, chunk_elements=1 << 21, pipeline_slots=4,
                 max_grad_norm=0.0, early_start=False, speculative_early_start=False,
                 hyperparam_update="restore"):
        if hyperparam_update not in ("error", "restore"):
            raise ValueError("hyperparam_update must be 'error' or 'restore', got %r"
                             % (hyperparam_update,))
        self._building = True
        super().__init__(params, defaults)
        self._building = False
        self.max_grad_norm = float(max_grad_norm)
        self.speculative_early_start = bool(speculative_early_start)
        self.early_start = bool(early_start) or self.speculative_early_start
        self._begun = None     # (lr, max_grad_norm, loss_scale) between begin_step and step
        self.hyperparam_update = hyperparam_update
        self.last_result = None
        self._hook_handles = []
        self._grad_accumulators = []

        # Every parameter that trains, in param_groups order; frozen ones are left out.
        self._params = []      # engine tensor index -> parameter
        self._indices = []     # engine tensor index -> torch state_dict index
        self._grads = []       # engine tensor index -> persistent gradient buffer
        self._ptrs = []        # engine tensor index -> parameter data pointer at build
        specs = []
        device = None
        index = 0
        for g, group in enumerate(self.param_groups):
            for j, p in enumerate(group["params"]):
                if p.requires_grad:
                    device = self._check_param(p, "group %d param %d" % (g, j), device)
                    self._params.append(p)
                    self._indices.append(index)
                index += 1
        if not self._params:
            raise ValueError("optimizer got no parameter that requires grad")
        self._device = device
        self._cuda = device.type == "cuda"
        self._index_by_id = {id(p): k for k, p in enumerate(self._params)}

        group_of = {}
        for g, group in enumerate(self.param_groups):
            for p in group["params"]:
                group_of[id(p)] = g
        for k, p in enumerate(self._params):
            buf = self._grad_buffer(p)
            g = group_of[id(p)]
            specs.append(("g%d.p%d" % (g, k), p.numel(), _DTYPE_NAMES[p.dtype],
                          _DTYPE_NAMES[p.dtype], p.data_ptr(), buf.data_ptr(), g))
            self._grads.append(buf)
            self._ptrs.append(p.data_ptr())

        # One engine lr per step: lr_scale_g = lr_g / lr_ref, fixed (Note in _engine_lr).
        lrs = [float(group["lr"]) for group in self.param_groups]
        self._ref_group = max(range(len(lrs)), key=lambda i: lrs[i])
        ref = lrs[self._ref_group]
        self._lr_scales = [(lr / ref if ref > 0 else 1.0) for lr in lrs]
        self._engine_hyper = [self._hyper(group) for group in self.param_groups]
        engine_groups = [dict(h, lr_scale=s)
                         for h, s in zip(self._engine_hyper, self._lr_scales)]

        self._stream = 0
        with self._device_guard():
            if self._cuda:
                current = _torch.cuda.current_stream(self._device)
                self._stream = current.cuda_stream
                current.synchronize()  # the engine reads the parameters' initial values
            self._engine = _C.HybridOptimizer(
                specs, self._ALGORITHM, engine_groups, master=master, momentum=momentum,
                variance=variance, offload_fraction=float(offload_fraction),
                placement=placement, mode="gpu" if self._cuda else "host",
                host_threads=int(host_threads), chunk_elements=int(chunk_elements),
                pipeline_slots=int(pipeline_slots), cuda_stream=self._stream,
                speculative_early_start=self.speculative_early_start)
        self._formats = (master, momentum, variance)
        self._install_early_start_hooks()

    # ----------------------------------------------------------------------------------
    # Construction helpers

    @staticmethod
    def _check_param(p, where, device):
        if _is_dtensor(p):
            raise ValueError("%s: DTensor parameters are not supported by tandem.torch "
                             "(shard the model with FSDP's flat parameters or use one "
                             "optimizer per rank on local tensors)" % where)
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

    @staticmethod
    def _grad_buffer(p):
        buf = _torch.zeros(p.shape, dtype=p.dtype, device=p.device)
        if p.grad is not None:
            buf.copy_(p.grad)
        p.grad = buf
        return buf

    def _device_guard(self):
        if self._cuda:
            return _torch.cuda.device(self._device)
        return _NullContext()

    def _install_early_start_hooks(self):
        for k, p in enumerate(self._params):
            hook = self._make_grad_ready_hook(k)
            if hasattr(p, "register_post_accumulate_grad_hook"):  # torch >= 2.1
                self._hook_handles.append(
                    p.register_post_accumulate_grad_hook(lambda _p, hook=hook: hook()))
            else:
                # Older torch: a post-hook on the parameter's AccumulateGrad node, which
                # runs once the gradient has been accumulated into p.grad.
                with _torch.enable_grad():
                    acc = p.expand_as(p).grad_fn.next_functions[0][0]
                self._hook_handles.append(acc.register_hook(lambda *_a, hook=hook: hook()))
                self._grad_accumulators.append(acc)  # keeps the node (and hook) alive

    def _make_grad_ready_hook(self, k):
        def hook():
            if not self.early_start:
                return
            self._adopt_grad(k)
            with self._device_guard():
                self._engine.grad_ready(k)
        return hook

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
        """Zeroes the gradients in place.

        ``set_to_none`` is accepted for compatibility but ignored for the optimizer's
        parameters: the engine holds pointers to their gradient buffers, which are
        zeroed in place and stay installed as ``p.grad``.
        """
        del set_to_none
        for p, buf in zip(self._params, self._grads):
            buf.zero_()
            if p.grad is None or p.grad.data_ptr() != buf.data_ptr():
                p.grad = buf

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
        if self._engine.step_begun:
            raise ValueError("begin_step called twice without a step in between")
        lr = self._engine_lr()
        clip = self.max_grad_norm if max_grad_norm is None else float(max_grad_norm)
        with self._device_guard():
            self._engine.begin_step(lr, clip, float(loss_scale))
        self._begun = (lr, clip, float(loss_scale))

    @_torch.no_grad()
    def step(self, closure=None, *, max_grad_norm=None, loss_scale=None):
        """One optimizer step over every parameter.

        Args:
          closure: optional callable re-evaluating the model and returning the loss.
          max_grad_norm: overrides the constructor's clipping norm for this step.
          loss_scale: gradients are divided by this (for static loss scaling; default
            1, or the value given to ``begin_step``).

        Returns the closure's loss (or None). ``self.last_result`` holds the engine's
        StepResult(applied, grad_norm, step); ``applied`` is False when a non-finite
        gradient made the engine skip the step (nothing changed).
        """
        loss = None
        # (lr, clip, loss_scale) of begin_step while the engine's step is begun; the
        # engine's Step ends it whether it succeeds or raises.
        begun = self._begun if self._engine.step_begun else None
        self._begun = begun
        if begun is not None and closure is not None:
            # The engine would see gradients of a second backward after speculating on
            # the first; refuse before anything runs.
            raise ValueError("step() after begin_step() takes no closure")
        if closure is not None:
            with _torch.enable_grad():
                loss = closure()
        for k in range(len(self._params)):
            self._adopt_grad(k)
        if begun is not None:
            # The lr announced by begin_step; a differing clip norm or loss scale reaches
            # the engine, which undoes the speculation and raises.
            lr = begun[0]
            clip = begun[1] if max_grad_norm is None else float(max_grad_norm)
            loss_scale = begun[2] if loss_scale is None else loss_scale
        else:
            lr = self._engine_lr()
            clip = self.max_grad_norm if max_grad_norm is None else float(max_grad_norm)
            loss_scale = 1.0 if loss_scale is None else loss_scale
        with self._device_guard():
            if self._cuda:
                current = _torch.cuda.current_stream(self._device)
                if current.cuda_stream != self._stream:
                    # The engine runs on the stream it was built with; order it after the
                    # caller's stream and the caller's stream after it.
                    engine = (_torch.cuda.default_stream(self._device) if self._stream == 0
                              else _torch.cuda.ExternalStream(self._stream,
                                                              device=self._device))
                    engine.wait_stream(current)
                    result = self._engine.step(lr, clip, float(loss_scale))
                    current.wait_stream(engine)
                else:
                    result = self._engine.step(lr, clip, float(loss_scale))
            else:
                result = self._engine.step(lr, clip, float(loss_scale))
        self._begun = None
        self.last_result = StepResult(*result)
        return loss

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
        parameters are set from the restored master weights. Every field is checked
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
        any offload fraction) and restores it: masters (written to the parameters),
        moments, steps, hyper-parameters and param_groups, so that training resumes
        bit-identically. A file without param_groups (older tandem, C++) keeps this
        optimizer's, with a warning. Raises RuntimeError for a damaged or unreadable
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
        owned = {id(p) for p in self._params}
        handles = []
        for sub in module.modules():
            mine = [p for p in sub.parameters(recurse=False) if id(p) in owned]
            if mine:
                def pre_hook(_module, _inputs, mine=mine):
                    for p in mine:
                        self.wait_param(p)
                handles.append(sub.register_forward_pre_hook(pre_hook))
        return handles

    @property
    def mode(self):
        """"gpu" or "host"."""
        return self._engine.mode

    def placement(self):
        """The engine's placement: per tensor (numel, device_count), total, offloaded."""
        return self._engine.placement()

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

    def _adopt_grad(self, k):
        """Makes sure the engine's buffer holds parameter k's gradient."""
        p, buf = self._params[k], self._grads[k]
        if p.data_ptr() != self._ptrs[k]:
            raise RuntimeError("parameter %d (shape %s) was reallocated after the optimizer "
                               "was built (model.to(), p.data = ...?); the engine holds "
                               "its old address. Build the optimizer after moving the model."
                               % (self._indices[k], tuple(p.shape)))
        grad = p.grad
        if grad is None:
            buf.zero_()
            p.grad = buf
        elif grad.is_sparse or grad.layout != _torch.strided:
            raise ValueError("parameter %d: sparse gradients are not supported"
                             % self._indices[k])
        elif grad.data_ptr() != buf.data_ptr():
            buf.copy_(grad)
            p.grad = buf

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
                raise ValueError("group %d: learning rate must be finite and >= 0, got %r"
                                 % (g, lr))
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
    """SGD with momentum, dampening, Nesterov and L2 weight decay, as torch.optim.SGD."""

    _ALGORITHM = "sgd"

    def __init__(self, params, lr=1e-3, momentum=0.0, dampening=0.0, weight_decay=0.0,
                 nesterov=False, *, maximize=False, **options):
        if maximize:
            raise ValueError("maximize is not supported by tandem")
        defaults = dict(lr=lr, momentum=momentum, dampening=dampening,
                        weight_decay=weight_decay, nesterov=nesterov)
        super().__init__(params, defaults, **options)

    def _hyper(self, group):
        return dict(beta1=0.9, beta2=0.999, eps=1e-8,
                    weight_decay=float(group["weight_decay"]),
                    momentum=float(group["momentum"]), dampening=float(group["dampening"]),
                    nesterov=bool(group["nesterov"]))
