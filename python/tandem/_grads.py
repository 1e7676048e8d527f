"""The gradient bookkeeping of the front-end core (tandem/_engine.py): which engine tensors
have a gradient at a step and the buffer that holds it (Note [Which parameters have a
gradient], Note [Swapped gradients]), and early start with its check at the step (Note
[Early start is checked at step]). A mixin of Engine, whose tables (params, grads,
borrow_grads, sharded, engine) it reads."""

import torch

from tandem import _dist
from tandem import _options

local = _dist.local


def storage_ptr(t):
    """The address of tensor t's storage (the start of the allocation it views)."""
    storage = t.untyped_storage() if hasattr(t, "untyped_storage") else t.storage()
    return storage.data_ptr()


class GradientBook:
    """Gradients and early start of an Engine (see the module docstring)."""

    def alias_of(self, k):
        """A new tensor sharing the storage of buffer k (what p.grad gets): a DTensor like
        the parameter for a DTensor parameter."""
        p = self.params[k]
        if self.sharded:
            return _dist.wrap_like(self.grads[k].detach(), p, tuple(p.shape))
        return self.grads[k].detach()

    def is_own_grad(self, k, grad):
        buf, grad = self.grads[k], local(grad)
        return (grad.data_ptr() == buf.data_ptr() and grad.shape == buf.shape
                and grad.dtype == buf.dtype and grad.device == buf.device
                and grad.layout == torch.strided and grad.is_contiguous())

    def install_zeroed(self, k):
        """Installs buffer k, zeroed, as parameter k's p.grad (before backward)."""
        self.grads[k].zero_()
        self.params[k].grad = self.alias_of(k)

    def check_grad(self, k, grad):
        """ValueError naming parameter k when `grad` cannot be its gradient."""
        p = self.params[k]
        if grad.is_sparse or grad.layout != torch.strided:
            raise ValueError("%s: sparse gradients are not supported" % self.label(k))
        if self.borrow_grads and (grad.numel() != local(p).numel()
                                  or grad.device != p.device):
            raise ValueError("%s: the gradient has %d elements on %s, the parameter %d on %s"
                             % (self.label(k), grad.numel(), grad.device, local(p).numel(),
                                p.device))
        if not self.borrow_grads and (grad.shape != p.shape or grad.device != p.device
                                      or local(grad).shape != self.grads[k].shape):
            raise ValueError("%s: p.grad was replaced by a tensor of shape %s, %s on %s "
                             "(p.grad.data = ... or resize_?); the gradient must keep the "
                             "parameter's shape and device"
                             % (self.label(k), tuple(grad.shape), grad.dtype, grad.device))
        if self.borrow_grads:
            if grad.dtype not in _options.DTYPE_NAMES or not grad.is_contiguous():
                raise ValueError("%s: the gradient must be a contiguous float32, bfloat16 or "
                                 "float16 tensor, got %s" % (self.label(k), grad.dtype))
        elif grad.dtype != p.dtype and not self.sharded:
            raise ValueError("%s: p.grad has dtype %s, the parameter %s; the gradient must "
                             "keep the parameter's dtype" % (self.label(k), grad.dtype,
                                                             p.dtype))

    def gather(self, grads):
        """(active, rebind): one flag per engine tensor saying whether grads[k] (a tensor,
        or None: no gradient) is stepped, and whether the borrowed gradients moved (the
        caller rebinds before stepping). Own buffers: each active buffer holds its
        gradient on return.

        Note [Which parameters have a gradient]: as torch.optim, a tensor is stepped when
        it has a gradient at the step, with whatever that gradient holds then. Own
        buffers are normally the gradients themselves (the front end installs them), so
        nothing is copied; a gradient that is another tensor is copied into the buffer,
        which the caller installs again.

        Note [Swapped gradients]: such a tensor may be another tensor's buffer (``a.grad,
        b.grad = b.grad, a.grad``, or a view of it). The copies run after every check,
        and a source in the storage of any buffer a copy writes is cloned first, so no
        copy reads what another copy has written: each tensor is stepped with the values
        its gradient had when the step was called.

        Every gradient is checked before anything is copied (ValueError naming it)."""
        active = bytearray(len(self.params))
        copies, rebind = [], False
        for k, grad in enumerate(grads):
            self.check_realloc(k)
            if grad is None:
                continue
            self.check_grad(k, grad)
            active[k] = 1
            if self.borrow_grads:
                rebind |= (grad.data_ptr() != self.grads[k].data_ptr()
                           or grad.dtype != self.grads[k].dtype)
            elif not self.is_own_grad(k, grad):
                copies.append((k, local(grad)))
        if copies:
            written = {storage_ptr(self.grads[k]) for k, _ in copies}
            copies = [(k, src.clone() if storage_ptr(src) in written else src)
                      for k, src in copies]
            for k, src in copies:  # a sharded gradient in another dtype (FSDP2's reduce
                self.grads[k].copy_(src)  # dtype) is converted here
            for k, _ in copies:
                self.params[k].grad = self.alias_of(k)
        return bytes(active), rebind

    def reset_ready(self):
        self.ready = [False] * len(self.params)
        self._ready_versions = [0] * len(self.params)

    def grad_ready(self, k):
        """Hands the engine tensor k's gradient now (it is its own buffer), recording the
        buffer's version. Returns whether it was already handed in this step."""
        again = self.ready[k]
        self.ready[k] = True
        self._ready_versions[k] = self.grads[k]._version
        with self.guard():
            self.engine.grad_ready(k)
        return again

    def recheck_early_start(self, active):
        """Note [Early start is checked at step]: grad_ready made the engine copy a
        tensor's offloaded gradient during backward, from its buffer. Whatever changed
        the buffer since through torch ops (``clip_grad_norm_``, a scaler's unscale, a
        gradient copied in by gather) moved its version counter; those tensors' early
        work is redone here (the engine's grad_ready called again redoes it exactly:
        Note [A second GradReady] in offload/optimizer_early.cc). Writes that bypass the
        version counter (``p.grad.data``, raw pointers) after backward cannot be seen."""
        redo = [k for k in range(len(self.params)) if self.ready[k] and active[k]
                and self.grads[k]._version != self._ready_versions[k]]
        if not redo:
            return
        with self.guard():
            self.order_after_current()
            for k in redo:
                self.engine.grad_ready(k)
                self._ready_versions[k] = self.grads[k]._version
