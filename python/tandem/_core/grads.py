"""The gradient bookkeeping of the front-end core (engine.py): where the engine reads each
tensor's gradient at a step, early start with its check at the step, and gradient release
(docs/python.md, "Gradient release").

Note [Released gradients]: with release_grads, a front end hands a gradient over as soon
as it is final (``grad_ready``) and sets ``p.grad = None``; the engine has then enqueued
every read it will make of it (Note [Gradient release] in tandem/optimizer.h). The
tensor is kept (``hold``) until the engine says those reads completed (``grad_consumed``,
checked at every later hand-over and step: ``prune_held``), so the caching allocator
reuses its memory with no stream coupling. The step steps a released tensor from what
the engine took (pointer 0); a ``p.grad`` set again after the release is refused.

Note [Gradients in flight]: the held gradients' bytes are bounded (``bound_held``, the
front end's ``grads_in_flight_bytes``): past the bound, the hand-over waits on the host
for the oldest held gradients' reads and lets them go, so backward runs at the link's
pace and the GPU holds at most the bound plus the gradient just handed over."""

import contextlib

import torch

from tandem._core import dist as _dist
from tandem._core import options as _options

local = _dist.local


def storage_ptr(t):
    """The address of tensor t's storage (the start of the allocation it views)."""
    storage = t.untyped_storage() if hasattr(t, "untyped_storage") else t.storage()
    return storage.data_ptr()


def device_guard(device):
    """torch.cuda.device(device) for a CUDA device, else a context that does nothing."""
    if device is not None and device.type == "cuda":
        return torch.cuda.device(device)
    return contextlib.nullcontext()


class GradientBook:
    """The gradients of an Engine's tensors (see the module docstring): ``grads``, each
    tensor's own or borrowed gradient buffer (None while it has none); ``ready``,
    ``handed`` and ``early_off``, the early hand-overs of the step under way; ``held``,
    the released gradients the engine still reads. borrow_grads, release: the Engine's.
    ``lay_out`` takes the Engine's tensors at each bind; ``engine`` is the HybridOptimizer
    the gradients go to. Not thread-safe, as the Engine."""

    def __init__(self, borrow_grads, release):
        self.borrow_grads, self.release = borrow_grads, release
        self.engine = None
        self.params, self.names, self.sharded, self.device = [], [], False, None
        self.grads = []
        self._seen = []          # gather's last checked gradient, per tensor
        self.ready, self._ready_at = [], []  # early start (reset_ready)
        self.handed, self.early_off = 0, False
        self.held = []           # released gradients still read (Note [Released gradients])
        self._waiter = None      # a stream bound_held waits on (Note [Gradients in flight])

    def lay_out(self, params, names, sharded, device, grads=None):
        """Takes the Engine's tensors and makes each one's gradient buffer (Note
        [Gradients read where they are] in engine.py): borrowed, grads[k] (a shared zero
        placeholder where None; ValueError for one that cannot be the gradient); own, a
        new zeroed buffer, or none for DTensor parameters and with release."""
        self.params, self.names, self.sharded, self.device = params, names, sharded, device
        if self.borrow_grads:
            given = list(grads) if grads is not None else [None] * len(params)
            missing = [local(p).numel() for p, g in zip(params, given) if g is None]
            placeholder = (torch.zeros(max(missing), dtype=torch.float32, device=device)
                           if missing else None)
            self.grads = [g if g is not None else placeholder for g in given]
            for k, g in enumerate(given):
                if g is not None:
                    self.check_grad(k, g)
        elif self.sharded or self.release:
            self.grads = [None] * len(params)  # Note [Gradients read where they are]
        else:
            # The engine reads self.grads[k]; p.grad gets a separate alias of it
            # (alias_of), so nothing done to p.grad can take the buffer away.
            self.grads = [torch.zeros(local(p).shape, dtype=p.dtype, device=p.device)
                          for p in params]
        self._seen = [None] * len(params)

    def layout(self):
        """What lay_out set, for restore_layout (a rebind that failed)."""
        return self.params, self.names, self.sharded, self.device, self.grads

    def restore_layout(self, layout):
        self.params, self.names, self.sharded, self.device, self.grads = layout

    def label(self, k):
        return _options.label(self.names[k], self.params[k])

    def grad_dtype(self, k):
        """The dtype of engine tensor k's gradient in its spec: its buffer's, or (no buffer
        yet) its parameter's."""
        buf = self.grads[k]
        return buf.dtype if buf is not None else self.params[k].dtype

    def own_buffer(self, k):
        """Gradient buffer k, allocated on first use (Note [Gradients read where they
        are] in engine.py)."""
        if self.grads[k] is None:
            p = self.params[k]
            self.grads[k] = torch.zeros(local(p).shape, dtype=p.dtype, device=p.device)
        return self.grads[k]

    def alias_of(self, k):
        """A new tensor sharing the storage of buffer k (what p.grad gets): a DTensor like
        the parameter for a DTensor parameter."""
        p, buf = self.params[k], self.own_buffer(k).detach()
        return _dist.wrap_like(buf, p, tuple(p.shape)) if self.sharded else buf

    def is_own_grad(self, k, grad):
        buf, grad = self.grads[k], local(grad)
        return buf is not None and (
            grad.data_ptr() == buf.data_ptr() and grad.shape == buf.shape
            and grad.dtype == buf.dtype and grad.device == buf.device
            and grad.layout == torch.strided and grad.is_contiguous())

    def install_zeroed(self, k):
        """Installs buffer k, zeroed, as parameter k's p.grad (before backward)."""
        self.own_buffer(k).zero_()
        self.params[k].grad = self.alias_of(k)

    def check_grad(self, k, grad):
        """ValueError naming parameter k when `grad` cannot be its gradient."""
        p, g = self.params[k], local(grad)
        if grad.layout != torch.strided:
            raise ValueError("%s: sparse gradients are not supported" % self.label(k))
        if self.borrow_grads:
            n = local(p).numel()
            if g.numel() != n or grad.device != p.device:
                raise ValueError("%s: the gradient has %d elements on %s, the parameter %d "
                                 "on %s" % (self.label(k), g.numel(), grad.device, n,
                                            p.device))
            if grad.dtype not in _options.DTYPE_NAMES or not g.is_contiguous():
                raise ValueError("%s: the gradient must be a contiguous float32, bfloat16 or "
                                 "float16 tensor, got %s" % (self.label(k), grad.dtype))
            return
        if grad.shape != p.shape or grad.device != p.device or g.shape != local(p).shape:
            raise ValueError("%s: p.grad was replaced by a tensor of shape %s, %s on %s "
                             "(p.grad.data = ... or resize_?); the gradient must keep the "
                             "parameter's shape and device"
                             % (self.label(k), tuple(grad.shape), grad.dtype, grad.device))
        if grad.dtype != p.dtype and not self.sharded:
            raise ValueError("%s: p.grad has dtype %s, the parameter %s; the gradient must "
                             "keep the parameter's dtype" % (self.label(k), grad.dtype,
                                                             p.dtype))

    def adoptable(self, k, grad):
        """Whether the engine can read `grad` (parameter k's gradient) where it is: dense,
        contiguous, of the dtype and on the device its spec was built with. Checked
        gradients only (check_grad)."""
        g = local(grad)
        return (g.layout == torch.strided and g.is_contiguous()
                and g.dtype == self.grad_dtype(k) and g.device == self.params[k].device)

    def gather(self, grads, ptrs, check_realloc):
        """(active, pointers, sources, rebind) for a step whose gradients are grads[k] (a
        tensor, or None): a bytearray of one flag per engine tensor saying whether it is
        stepped, the gradient pointer the engine reads for it (0 when inactive), the
        tensor that pointer is in, and whether the caller must rebind before stepping (a
        parameter whose data pointer is not ptrs[k]: check_realloc(k) raises for it while
        the engine's step is begun; a borrowed gradient of another dtype). Every gradient
        is checked before anything is copied (ValueError naming it).

        Note [Which parameters have a gradient] (docs/python.md, "Gradients and the
        pointer contract"): as torch.optim, a tensor is stepped when it has a gradient at
        the step. The engine reads each gradient where it is, by its pointer; only one it
        cannot read in place (another dtype, not contiguous) is copied into the tensor's
        own buffer.

        Note [Swapped gradients]: a gradient may be another tensor's buffer (``a.grad,
        b.grad = b.grad, a.grad``); one in the storage of a buffer a copy writes is
        cloned first, so nothing is read after a copy wrote over it."""
        n = len(self.params)
        active, pointers, sources = bytearray(n), [0] * n, [None] * n
        copies, rebind = [], False
        # A reallocated parameter rebinds (the caller), except while the engine's step is
        # begun: then it raises.
        begun = self.engine.step_begun
        seen, params = self._seen, self.params
        mine = local if self.sharded else (lambda t: t)  # plain: no DTensor check per tensor
        for k, grad in enumerate(grads):
            if mine(params[k]).data_ptr() != ptrs[k]:
                if begun:
                    check_realloc(k)
                rebind = True
            if grad is None:
                continue
            active[k] = 1
            if grad.layout != torch.strided:
                self.check_grad(k, grad)  # raises (sparse)
            g = mine(grad)
            ptr = g.data_ptr()
            # A gradient in the memory read in place at the last step, with its shape,
            # dtype and layout (Megatron's new views of one buffer every step, the
            # engine's own buffer installed again): checked then.
            key = (ptr, g.shape, g.dtype, g.is_contiguous())
            if key == seen[k]:
                sources[k], pointers[k] = g, ptr
                continue
            self.check_grad(k, grad)
            if self.borrow_grads:
                rebind |= grad.dtype != self.grads[k].dtype
            if self.borrow_grads or self.adoptable(k, grad):
                sources[k], pointers[k] = g, ptr
                seen[k] = key
            else:
                copies.append((k, g))
                seen[k] = None
        if copies:
            # Note [Swapped gradients]: sources inside a buffer a copy writes, cloned.
            written = {storage_ptr(self.own_buffer(k)) for k, _ in copies}
            copies = [(k, src.clone() if storage_ptr(src) in written else src)
                      for k, src in copies]
            for k, src in enumerate(sources):  # (a copied tensor's source is None)
                if src is not None and storage_ptr(src) in written:
                    sources[k] = src.clone()
                    pointers[k] = sources[k].data_ptr()
                    seen[k] = None
            for k, src in copies:
                sources[k] = self.grads[k].copy_(src)
                pointers[k] = sources[k].data_ptr()
        return active, pointers, sources, rebind

    def reset_ready(self):
        """Forgets the step's hand-overs (the engine's step ended or was discarded)."""
        self.early_off = False  # set by a front end for a step read at step() only
        if len(self.ready) == len(self.params) and not self.handed:
            return  # nothing was handed early
        self.ready = [False] * len(self.params)
        self._ready_at = [None] * len(self.params)  # (pointer, version) handed early
        self.handed = 0

    def grad_ready(self, k, grad):
        """Hands the engine tensor k's gradient `grad` now (adoptable: the caller checks),
        by its pointer, final on the current stream, recording the pointer and the
        tensor's version. Returns whether one was already handed in this step."""
        again = self.ready[k]
        g = local(grad)
        with device_guard(self.device):
            cuda = self.device.type == "cuda"
            stream = torch.cuda.current_stream(self.device).cuda_stream if cuda else 0
            self.engine.grad_ready(k, g.data_ptr(), stream)
        self.ready[k] = True
        self._ready_at[k] = (g.data_ptr(), g._version)
        self.handed += not again
        return again

    def hold(self, k, tensor):
        """Keeps tensor k's released gradient alive until the engine's reads of it
        completed (Note [Released gradients])."""
        self.held.append((k, tensor))

    def prune_held(self):
        """Drops the held gradients whose reads completed (never blocks)."""
        if self.held:
            engine = self.engine
            self.held = [(k, t) for k, t in self.held if not engine.grad_consumed(k)]

    def bound_held(self, limit):
        """Note [Gradients in flight]: waits until the held gradients, but the last handed
        over, take at most `limit` bytes, the oldest let go first."""
        held = self.held
        total = sum(t.numel() * t.element_size() for _, t in held)
        while len(held) > 1 and total > limit:
            k, t = held.pop(0)
            total -= t.numel() * t.element_size()
            if self.engine.grad_consumed(k):
                continue
            with device_guard(self.device):
                if self.device.type != "cuda":
                    self.engine.wait_grad_consumed(k, 0)  # host mode: the host waits
                    continue
                if self._waiter is None:
                    self._waiter = torch.cuda.Stream(self.device)
                self.engine.wait_grad_consumed(k, self._waiter.cuda_stream)
                self._waiter.synchronize()

    def discard(self):
        """Ends the step under way without applying it (the engine's discard_step:
        speculation rolled back, hand-overs forgotten); held gradients stay held."""
        if self.handed or self.engine.step_begun:
            with device_guard(self.device):
                self.engine.discard_step()
        self.reset_ready()

    def released_grads(self, grads):
        """Note [Released gradients]: the engine tensors whose gradient was released in
        this step; ValueError for one whose p.grad (grads[k]) was set again since."""
        if not (self.release and self.handed):
            return []
        released = [k for k in range(len(self.params)) if self.ready[k]]
        for k in released:
            if grads[k] is not None:
                raise ValueError(
                    "%s: p.grad was set after its gradient was released (release_grads): "
                    "the step reads the gradient it was handed in backward; whatever wrote "
                    "p.grad since (clip_grad_norm_ sees no gradient, a scaler cannot "
                    "unscale one) is not seen. Pass max_grad_norm= and loss_scale= "
                    "instead; nothing changed" % self.label(k))
        return released

    def recheck_early_start(self, active, pointers, sources, order_after_current):
        """Note [Early start is checked at step]: when the gradient the step reads for a
        tensor handed over early is another tensor (p.grad replaced, a copy by gather) or
        was changed through torch ops since (``clip_grad_norm_``, a scaler's unscale: its
        version counter moved), the engine's grad_ready is called again with the step's
        pointer, which redoes the early work exactly (Note [A second GradReady] in
        offload/executors/host_offload.cc). Writes that bypass the version counter
        cannot be seen. order_after_current(): orders the engine's stream after the
        caller's."""
        if not self.handed or self.release:
            return  # a released gradient is what the engine took at grad_ready
        redo = [k for k in range(len(self.params)) if self.ready[k] and active[k]
                and self._ready_at[k] != (pointers[k], sources[k]._version)]
        if not redo:
            return
        with device_guard(self.device):
            order_after_current()
            for k in redo:
                self.engine.grad_ready(k, pointers[k])
                self._ready_at[k] = (pointers[k], sources[k]._version)
