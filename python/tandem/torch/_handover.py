"""What a tandem.torch optimizer's gradient hooks (_core/hooks.py) do during backward:
install the engine's gradient buffer as p.grad, early start (the engine's grad_ready as
each gradient is final) and gradient release (Note [Released gradients] in
_core/grads.py), with what release refuses. They reach the optimizer's HandOver through
its ``_on_grad_arriving``, ``_on_grad_accumulated`` and ``_hand_over``."""

import weakref

import torch

from tandem._core import dist as _dist
from tandem._core.copied_grads import CopiedGrads
from tandem._core.warnings import EarlyStartAccumulationWarning, warn

# The hand-overs of every tandem.torch optimizer alive (registered at each bind), for the
# release check: two optimizers over one parameter cannot both see its gradient once one
# releases it.
_LIVE = weakref.WeakSet()


class HandOver:
    """Early start and release of one TandemOptimizer over `core`, its front-end core;
    `lock` is its lock, taken around the hooks' hand-overs. ``accumulating`` is True
    inside ``accumulating()``; ``copied`` is the CopiedGrads where hand-overs wait for
    device copies, or None. Calls that hand a gradient over take ``layout_pending()``
    (LayoutFollower.pending)."""

    def __init__(self, core, lock, early_start, release_grads, grads_in_flight_bytes):
        self.core, self.book, self.lock = core, core.book, lock
        self.early_start, self.release_grads = early_start, release_grads
        self.grads_in_flight_bytes = grads_in_flight_bytes
        self.accumulating = False
        self.copied = None
        self._refused = None   # why the step under way cannot be taken (release_grads)
        self._warned_accumulation = False

    def arriving(self, k):
        """Before autograd accumulates parameter k's gradient: installs its buffer, zeroed,
        as p.grad when p.grad is None, unless it has none (Note [Gradients read where
        they are] in _core/engine.py) or p was reallocated (the next step rebinds)."""
        if (self.book.grads[k] is not None and self.core.params[k].grad is None
                and not self.core.moved(k)):
            with torch.no_grad():
                self.book.install_zeroed(k)

    def accumulated(self, k, layout_pending):
        """Early start: hands parameter k's gradient over now, or once the device copy
        writing it is complete (Note [Gradients copied to the host] in
        _core/copied_grads.py)."""
        if not self.early_start or self.accumulating or self.core.moved(k):
            return  # a reallocated parameter: the next step rebinds, then steps it
        grad = self.core.params[k].grad
        if grad is None:
            return
        if self.copied is None:
            with self.lock:
                self.hand_over(k, grad, layout_pending)
        elif not self.book.ready[k]:
            self.copied.defer(k, grad)
        else:  # a second gradient in this step (accumulation): refused or redone now
            with self.lock:
                self.copied.land(also=(k, grad))

    def follow_layout(self, opt):
        """After each bind of opt's engine: CopiedGrads where early start meets host shards
        of a CUDA mesh, kept across rebinds; None elsewhere."""
        if not (self.early_start and _dist.host_shards(self.core.params)):
            self.copied = None
        elif self.copied is None:
            self.copied = CopiedGrads(opt)
        _LIVE.add(self)

    def _land_copies(self):
        """Hands the gradients still waiting for their copies over (the lock held)."""
        if self.copied is not None:
            self.copied.land()

    def hand_over(self, k, grad, layout_pending):
        """Hands parameter k's gradient `grad` to the engine (the lock held), unless it is
        no longer p.grad or the step is refused or read at step()."""
        core, book = self.core, self.book
        if self._refused is not None or book.early_off:
            return  # the step is refused, or read at step() (below)
        if not book.handed and not core.step_begun and layout_pending():
            # The first gradient of a step whose parameters changed: step() rebinds,
            # which would lose what a release handed over; this step reads them all.
            book.early_off = True
            return
        p = core.params[k]
        if p.grad is not grad:
            return  # replaced since its hook (the step reads what p.grad is then)
        try:
            if book.check_grad(k, grad) or not book.adoptable(k, grad):
                return  # the step copies it (another dtype, not contiguous) and starts
        except ValueError:
            return      # the step raises for it
        if self.release_grads:
            self._release(k, p, grad)
        elif book.grad_ready(k, grad) and not self._warned_accumulation:
            self._warned_accumulation = True
            warn("early_start: %s got a second gradient in one step "
                 "(gradient accumulation); the engine redoes its early work, so "
                 "results are exact but the first copies were wasted. Run every "
                 "micro-batch but the last inside `with opt.accumulating():`."
                 % core.label(k), EarlyStartAccumulationWarning)

    def _release(self, k, p, grad):
        """release_grads: hands parameter k's gradient over and drops p.grad; a second
        gradient in one step refuses the step (RuntimeError, raised through backward)."""
        book = self.book
        if book.ready[k]:
            book.discard()
            self._refused = (
                "release_grads: %s got a second gradient in one step (gradient "
                "accumulation) after its first was released; run every micro-batch but the "
                "last inside `with opt.accumulating():` (or with FSDP2's "
                "set_requires_gradient_sync(False)). The step was discarded, nothing "
                "changed; call opt.zero_grad() and run the step again" % book.label(k))
            raise RuntimeError(self._refused)
        book.grad_ready(k, grad)
        book.hold(k, _dist.local(grad))
        p.grad = None
        book.prune_held()
        book.bound_held(self.grads_in_flight_bytes)

    def drop_handed(self):
        """zero_grad: the engine forgets the gradients handed over (a speculation is
        undone), and a refused step."""
        book = self.book
        try:
            self._land_copies()
        except Exception:  # noqa: BLE001 -- the step's gradients are dropped, and so
            pass           # is what their hand-over raised (a refused step, below)
        if book.handed:
            book.discard()
        self._refused = None
        book.prune_held()

    def check_step(self):
        """Hands over the gradients still waiting for their copies, then refuses a step
        that cannot be exact under release_grads."""
        self._land_copies()
        if self._refused is not None:
            raise RuntimeError(self._refused)
        self._check_shared_release()

    def check_scaler(self, found_inf, grad_scale):
        """release_grads: refuses a step that GradScaler hands its scale to (found_inf,
        grad_scale: what it set on the optimizer, or None)."""
        if found_inf is not None or grad_scale is not None:
            self.book.discard()
            raise ValueError(
                "release_grads: GradScaler cannot unscale released gradients (p.grad is "
                "None after backward); pass loss_scale= to step() (or begin_step()) and "
                "lower it when opt.last_result.applied is False. The step was discarded, "
                "nothing changed")

    def _check_shared_release(self):
        """Refuses a step over a parameter that another live tandem.torch optimizer steps
        too when either releases gradients (the other would step without it). Checked at
        every step, so an optimizer replaced by a new one is gone by then."""
        mine = self.core.index_by_id
        for other in list(_LIVE):
            if other is self or not (self.release_grads or other.release_grads):
                continue
            shared = mine.keys() & other.core.index_by_id.keys()
            if not shared:
                continue
            k = min(mine[i] for i in shared)
            owner = "it" if other.release_grads else "this optimizer"
            raise ValueError(
                "release_grads: %s is also stepped by another live tandem optimizer; %s "
                "releases its gradient (p.grad = None after backward), so the other "
                "cannot step it. Give each parameter to one optimizer, or drop the other "
                "one (del, then gc.collect() if it is in a reference cycle). Nothing was "
                "stepped" % (self.core.label(k), owner))
