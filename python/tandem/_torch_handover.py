"""The gradients a tandem.torch optimizer's hooks hand over during backward: the
engine's gradient buffer installed as p.grad before autograd accumulates into it, early
start (the engine's grad_ready as each gradient is final: autograd's post-accumulate-grad
hook for plain parameters, FSDP2's after each reduce-scatter for DTensor ones) and
gradient release (Note [Released gradients] in _grads.py), with what release refuses. A
mixin of TandemOptimizer, which owns ``self._core`` (the front-end core), ``self._lock``
and the early start flags; tandem/_hooks.py registers the hooks."""

import weakref

import torch

from tandem import _dist
from tandem._copied_grads import CopiedGrads
from tandem._dist import local
from tandem._warnings import EarlyStartAccumulationWarning, warn

# Every tandem.torch optimizer alive (registered at each bind), for the release check:
# two optimizers over one parameter cannot both see its gradient once one releases it.
_LIVE = weakref.WeakSet()


class HandOver:
    """Gradient hooks, early start and release of TandemOptimizer (module docstring)."""

    _copied = None  # CopiedGrads, where hand-overs wait for device copies

    def _on_grad_arriving(self, k):
        # A reallocated parameter (perhaps on another device now) gets autograd's own
        # gradient; the next step's rebind adopts it into a new buffer. Without a buffer
        # (Note [Gradients read where they are] in _engine.py) autograd's gradient is the
        # one read.
        if self._core.grads[k] is None:
            return
        if self._core.params[k].grad is None and not self._core.moved(k):
            with torch.no_grad():
                self._core.install_zeroed(k)

    def _on_grad_accumulated(self, k):
        """Early start: the engine starts on parameter k's gradient now (Note [Early start
        is checked at step] in _engine.py), or, for a gradient a device copy is still
        writing, once that copy is complete (Note [Gradients copied to the host] in
        _copied_grads.py)."""
        if not self.early_start or self._accumulating or self._core.moved(k):
            return  # a reallocated parameter: the next step rebinds, then steps it
        grad = self._core.params[k].grad
        if grad is None:
            return
        if self._copied is None:
            with self._lock:
                self._hand_over(k, grad)
        elif not self._core.ready[k]:
            self._copied.defer(k, grad)
        else:  # a second gradient in this step (accumulation): refused or redone now
            with self._lock:
                self._copied.land(also=(k, grad))

    def _follow_copies(self):
        """The deferred hand-overs where early start meets host shards of a CUDA mesh
        (Note [Gradients copied to the host]), kept across rebinds; None elsewhere."""
        if not (self.early_start and _dist.host_shards(self._core.params)):
            self._copied = None
        elif self._copied is None:
            self._copied = CopiedGrads(self)

    def _land_copies(self):
        """Hands the gradients still waiting for their copies over (the lock held)."""
        if self._copied is not None:
            self._copied.land()

    def _hand_over(self, k, grad):
        """Hands parameter k's gradient `grad` to the engine (the lock held), unless it is
        no longer p.grad, the step is refused or read at step()."""
        core = self._core
        if self._refused is not None or core.early_off:
            return  # the step is refused, or read at step() (below)
        if not core.handed and not core.step_begun and self._layout_pending():
            # The first gradient of a step whose parameters changed: step() rebinds,
            # which would lose what a release handed over; this step reads them all.
            core.early_off = True
            return
        p = core.params[k]
        if p.grad is not grad:
            return  # replaced since its hook (the step reads what p.grad is then)
        try:
            if core.check_grad(k, grad) or not core.adoptable(k, grad):
                return  # the step copies it (another dtype, not contiguous) and starts
        except ValueError:
            return      # the step raises for it
        if self.release_grads:
            self._release(k, p, grad)
        elif core.grad_ready(k, grad) and not self._warned_accumulation:
            self._warned_accumulation = True
            warn("early_start: %s got a second gradient in one step "
                 "(gradient accumulation); the engine redoes its early work, so "
                 "results are exact but the first copies were wasted. Run every "
                 "micro-batch but the last inside `with opt.accumulating():`."
                 % self._core.label(k), EarlyStartAccumulationWarning)

    def _release(self, k, p, grad):
        """release_grads: hands parameter k's gradient over and drops p.grad (Note
        [Released gradients] in _grads.py); a second gradient in one step refuses the
        step (RuntimeError, raised through backward)."""
        core = self._core
        if core.ready[k]:
            core.discard()
            self._refused = (
                "release_grads: %s got a second gradient in one step (gradient "
                "accumulation) after its first was released; run every micro-batch but the "
                "last inside `with opt.accumulating():` (or with FSDP2's "
                "set_requires_gradient_sync(False)). The step was discarded, nothing "
                "changed; call opt.zero_grad() and run the step again" % core.label(k))
            raise RuntimeError(self._refused)
        core.grad_ready(k, grad)
        core.hold(k, local(grad))
        p.grad = None
        core.prune_held()
        core.bound_held(self.grads_in_flight_bytes)

    def _drop_handed(self):
        """zero_grad: gradients handed over in a backward that is not stepped are
        dropped, as torch drops p.grad (the engine forgets them, a speculation is
        undone); a refused step is forgotten with them."""
        core = self._core
        try:
            self._land_copies()
        except Exception:  # noqa: BLE001 -- the step's gradients are dropped, and so
            pass           # is what their hand-over raised (a refused step, below)
        if core.handed:
            core.discard()
            self._begun = None
        self._refused = None
        core.prune_held()

    def _check_release(self):
        """Hands over the gradients still waiting for their copies, then refuses a step
        that cannot be exact under release_grads (the step under way discarded when it
        had begun)."""
        self._land_copies()
        if self._refused is not None:
            raise RuntimeError(self._refused)
        self._check_shared_release()
        if not self.release_grads:
            return
        scaler = self.__dict__.pop("found_inf", None), self.__dict__.pop("grad_scale", None)
        if any(value is not None for value in scaler):
            self._core.discard()
            self._begun = None
            raise ValueError(
                "release_grads: GradScaler cannot unscale released gradients (p.grad is "
                "None after backward); pass loss_scale= to step() (or begin_step()) and "
                "lower it when opt.last_result.applied is False. The step was discarded, "
                "nothing changed")

    def _check_shared_release(self):
        """Refuses a step over a parameter that another live tandem.torch optimizer steps
        too when either releases gradients: the one that releases takes the gradient and
        sets p.grad = None, so the other steps without it (torch's two optimizers would
        both step it). Checked at every step (each optimizer's own), so an optimizer
        replaced by a new one (``opt = AdamW(...)`` again) is gone by then."""
        mine = self._core.index_by_id
        for other in list(_LIVE):
            if other is self or not (self.release_grads or other.release_grads):
                continue
            shared = mine.keys() & other._core.index_by_id.keys()
            if not shared:
                continue
            k = min(mine[i] for i in shared)
            owner = "it" if other.release_grads else "this optimizer"
            raise ValueError(
                "release_grads: %s is also stepped by another live tandem optimizer; %s "
                "releases its gradient (p.grad = None after backward), so the other "
                "cannot step it. Give each parameter to one optimizer, or drop the other "
                "one (del, then gc.collect() if it is in a reference cycle). Nothing was "
                "stepped" % (self._core.label(k), owner))
