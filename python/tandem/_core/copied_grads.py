"""Early start for gradients that a device copy is still writing when their hook runs:
the sharded gradients of FSDP2's CPUOffloadPolicy (Note [Parameters on the host] in
dist.py).

Note [Gradients copied to the host] (docs/distributed.md, "Parameters on the host"):
FSDP2 runs a shard's post-accumulate-grad hooks before its non-blocking copy of the
gradient to the host has landed. So the hook records a fence (a CUDA event on the
current stream, behind the copy) and queues the gradient; a thread per optimizer hands
each over (the front end's ``_hand_over``, under the optimizer's lock) once its fence
completed. The end of backward (an autograd callback), ``step`` and ``zero_grad`` hand
the rest over on the caller's thread. A gradient of a tensor already handed over in this
step is handed over at once, so that a refusal is raised from its hook; an error of a
deferred hand-over is raised at the end of backward. The thread holds the optimizer
weakly and ends with it.
"""

import collections
import threading
import weakref

import torch


def cuda_fence(grad):
    """A CUDA event recorded on the current stream (what a copy queued there before the
    hook must complete first), or None when this process has no CUDA context (no copy
    can be in flight)."""
    del grad
    if not torch.cuda.is_initialized():
        return None
    event = torch.cuda.Event()
    event.record(torch.cuda.current_stream())
    return event


class CopiedGrads:
    """The deferred hand-overs of one optimizer, `opt` (held weakly): each is
    ``opt._hand_over(k, grad)`` under ``opt._lock``. `fence(grad)` makes the object whose
    ``synchronize()`` returns once `grad` is complete (None: it is)."""

    def __init__(self, opt, fence=cuda_fence):
        self._ref = weakref.ref(opt)
        self._fence = fence
        self._items = collections.deque()  # (k, grad, fence), in hook order
        self._cv = threading.Condition()
        self._thread = None
        self._stopped = False
        self._error = None                 # the first hand-over's error, raised by land()
        self._callback_queued = False
        weakref.finalize(opt, self._stop)

    def defer(self, k, grad):
        """On the hook's thread: queues engine tensor k's gradient `grad` behind a fence
        recorded now; no lock of the optimizer is taken."""
        item = (k, grad, self._fence(grad))
        with self._cv:
            self._items.append(item)
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, daemon=True,
                                                name="tandem-copied-grads")
                self._thread.start()
            self._cv.notify()
        self._land_at_end_of_backward()

    def land(self, also=None):
        """Hands every queued gradient over on this thread, each once its fence completed,
        then `also` ((k, grad): a gradient handed over behind a fence recorded now); the
        caller holds the optimizer's lock. Raises the first error of a hand-over since
        the last land() (the others were handed over or, the step refused, dropped)."""
        self._callback_queued = False  # (a backward that raised ran no callback)
        while True:
            with self._cv:
                if not self._items:
                    break
                item = self._items.popleft()
            self._hand(item)
        if also is not None:
            self._hand(also + (self._fence(also[1]),))
        error, self._error = self._error, None
        if error is not None:
            raise error

    # ------------------------------------------------------------------------------------

    def _land_at_end_of_backward(self):
        if self._callback_queued:
            return
        try:
            torch.autograd.Variable._execution_engine.queue_callback(self._end_of_backward)
        except RuntimeError:
            return  # not inside backward: the next step() hands them over
        self._callback_queued = True

    def _end_of_backward(self):
        opt = self._ref()
        if opt is not None:
            with opt._lock:
                self.land()

    def _hand(self, item):
        """Waits for the item's fence, then hands it over (the caller holds the lock)."""
        k, grad, fence = item
        if fence is not None:
            fence.synchronize()
        opt = self._ref()
        if opt is None:
            return
        try:
            opt._hand_over(k, grad)
        except Exception as e:  # noqa: BLE001 -- raised by land(), on the user's thread
            if self._error is None:
                self._error = e

    def _run(self):
        while True:
            with self._cv:
                while not self._items and not self._stopped:
                    self._cv.wait()
                if self._stopped:
                    return
                head = self._items[0]
            if head[2] is not None:
                head[2].synchronize()  # outside every lock: the copy lands meanwhile
            self._hand_head(head)
            head = None

    def _hand_head(self, head):
        """Hands `head` over when it is still the first queued item (land() on another
        thread may have taken it); pops it under the optimizer's lock, so items are
        handed over once each, in order."""
        opt = self._ref()
        if opt is None:
            return
        with opt._lock:
            with self._cv:
                if not self._items or self._items[0] is not head:
                    return
                self._items.popleft()
            self._hand(head)

    def _stop(self):
        with self._cv:
            self._stopped = True
            self._cv.notify()
