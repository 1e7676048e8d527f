"""The gradient hooks of a tandem.torch optimizer, per engine tensor: a tensor hook that
installs the engine's gradient buffer as p.grad before autograd accumulates into it, and
with early start a post-accumulate hook that hands the gradient to the engine.

The hooks hold the optimizer weakly and are removed when it is collected (or rebinds),
so a dropped optimizer frees its engine and stops touching the gradients. A parameter
that does not require grad cannot take hooks: it gets them at the first call that finds
it requiring grad (``hook_pending``); until then its gradient is copied at the step.
"""

import weakref

import torch


class GradHooks:
    """The hooks of one engine layout over `params`, held by `opt` (weakly): the tensor
    hook of parameter k calls ``arriving(opt, k)``, its post-accumulate hook (with
    early_start) ``accumulated(opt, k)``, while opt lives."""

    def __init__(self, opt, params, early_start, arriving, accumulated):
        self._ref = weakref.ref(opt)
        self._handles = []
        self._accumulators = []
        self._early = early_start
        self._calls = (arriving, accumulated)
        self._pending = list(enumerate(params))
        self.hook_pending()
        # The hooks go with the optimizer, whichever layout it has then.
        self._finalizer = weakref.finalize(opt, _remove, self._handles)

    def hook_pending(self):
        """Hooks the parameters that had to be left out and require grad now."""
        if self._pending and any(p.requires_grad for _, p in self._pending):
            pending = []
            for k, p in self._pending:
                if p.requires_grad:
                    self._hook(k, p)
                else:
                    pending.append((k, p))
            self._pending = pending

    def remove(self):
        _remove(self._handles)
        del self._accumulators[:]
        self._finalizer.detach()

    def _hook(self, k, p):
        ref, (arriving, accumulated) = self._ref, self._calls
        self._handles.append(p.register_hook(
            lambda _grad, k=k: _call(ref, arriving, k)))
        if not self._early:
            return
        if hasattr(p, "register_post_accumulate_grad_hook"):  # torch >= 2.1
            self._handles.append(p.register_post_accumulate_grad_hook(
                lambda _p, k=k: _call(ref, accumulated, k)))
        else:
            # Older torch: a post-hook on the parameter's AccumulateGrad node, which runs
            # once the gradient has been accumulated into p.grad.
            with torch.enable_grad():
                acc = p.expand_as(p).grad_fn.next_functions[0][0]
            self._handles.append(acc.register_hook(
                lambda *_a, k=k: _call(ref, accumulated, k)))
            self._accumulators.append(acc)  # keeps the node (and hook) alive


def _call(ref, fn, k):
    """Calls fn(ref(), k) while the optimizer lives."""
    opt = ref()
    if opt is not None:
        fn(opt, k)


def _remove(handles):
    for handle in handles:
        handle.remove()
    del handles[:]
