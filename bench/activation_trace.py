"""The live tensor bytes of one transformers training iteration (forward with labels, then
backward, as a Trainer or a plain loop runs it), traced op by op on any device: the
measurement docs/planner.md "Activations" fits its formula to, and that
bench/activation_check.py and tests/python_dist/test_activation_model.py compare the
planner's estimate with.

Every tensor an operator returns is tracked by its storage: its bytes count from the op
that made it until the storage is freed (a weak reference's callback; PyTorch keeps a
storage's Python object alive as long as the storage itself). Parameters and their
gradients are separated out: a storage that ends as some parameter's .grad counts as a
gradient from the op that made it. What this sees is what PyTorch's allocator is asked
for, op by op; what it does not see: a kernel's internal workspace (cuBLAS, the flash
kernel's scratch) and the caching allocator's rounding, which the planner counts apart
(MemoryBreakdown::runtime).
"""

import weakref

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_map_only
from torch.utils.weak import WeakIdKeyDictionary


class LiveBytes(TorchDispatchMode):
    """Records, op by op, the storages operators allocate and when they are freed:
    ``events`` is a list of (serial, +bytes) at allocation and (serial, -bytes) at free,
    in order; ``marks`` names event indices (mark())."""

    def __init__(self):
        super().__init__()
        self.events = []
        self.marks = {}
        self._serial = WeakIdKeyDictionary()
        self._refs = {}
        self._next = 0
        self._op = None
        self.ops = {}  # serial -> the operator that allocated it

    def exclude(self, tensors):
        """Storages that exist before the iteration (parameters, buffers, inputs): a view
        of one that an operator returns (a weight's .t()) allocates nothing."""
        for t in tensors:
            self._serial[t.untyped_storage()] = None

    def mark(self, name):
        self.marks[name] = len(self.events)

    def serial(self, storage):
        """The serial of a tracked storage, or None."""
        return self._serial.get(storage)

    def _freed(self, serial, nbytes, _ref):
        self.events.append((serial, -nbytes))
        self._refs.pop(serial, None)

    def _track(self, t):
        if t.device.type == "meta" or getattr(t, "is_sparse", False):
            return
        st = t.untyped_storage()
        if st in self._serial:  # tracked already, or excluded
            return
        serial = self._next
        self._next += 1
        nbytes = st.nbytes()
        self._serial[st] = serial
        self._refs[serial] = weakref.ref(
            st, lambda ref, s=serial, n=nbytes: self._freed(s, n, ref))
        self.ops[serial] = self._op
        self.events.append((serial, nbytes))

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        self._op = func.__name__
        tree_map_only(torch.Tensor, self._track, out)
        return out


def replay(events, exclude, start=0, stop=None):
    """Live bytes over events[start:stop] of storages not in `exclude`: (peak, index of the
    peak, live at the end), counting only what was allocated from `start` on."""
    live = peak = 0
    at = start
    stop = len(events) if stop is None else stop
    born = set()
    for i in range(start, stop):
        serial, delta = events[i]
        if serial in exclude:
            continue
        if delta > 0:
            born.add(serial)
        elif serial not in born:
            continue
        live += delta
        if live > peak:
            peak, at = live, i
    return peak, at, live


def trace_iteration(model, input_ids, labels, hold_output=True):
    """One training iteration of `model` (forward with labels, loss.backward()) under
    LiveBytes. `hold_output`: the output object (its logits) stays referenced through
    backward, as in ``out = model(...); out.loss.backward()``; False: only the loss, as
    the Trainer's compute_loss returns it.

    Returns a dict of bytes: params, grads (after backward), peak (everything the
    iteration allocated, gradients included), activations (the peak of what is neither a
    parameter nor a gradient), forward_end (live at the end of forward, without
    gradients), where ("forward" or "backward": the activation peak's phase), loss."""
    params = [p for p in model.parameters() if p.requires_grad]
    for p in params:
        p.grad = None
    mode = LiveBytes()
    mode.exclude(list(model.parameters()) + list(model.buffers()) + [input_ids, labels])
    with mode:
        mode.mark("forward")
        if hold_output:
            out = model(input_ids=input_ids, labels=labels)
            loss = out.loss
        else:
            loss = model(input_ids=input_ids, labels=labels).loss
        mode.mark("backward")
        loss.backward()
        mode.mark("end")
        value = float(loss.detach())
        del loss
        if hold_output:
            del out
    grads = set()
    grad_bytes = 0
    seen = set()
    for p in params:
        if p.grad is None:
            continue
        st = p.grad.untyped_storage()
        s = mode.serial(st)
        if s is not None:
            grads.add(s)
        if st.data_ptr() not in seen:
            seen.add(st.data_ptr())
            grad_bytes += st.nbytes()
    events = mode.events
    peak_all, _, _ = replay(events, set(), 0, mode.marks["end"])
    act, at, _ = replay(events, grads, 0, mode.marks["end"])
    _, _, fwd_end = replay(events, grads, 0, mode.marks["backward"])
    param_bytes = sum(p.untyped_storage().nbytes() for p in
                      {p.untyped_storage().data_ptr(): p for p in params}.values())
    for p in params:
        p.grad = None
    return {"params": param_bytes, "grads": grad_bytes, "peak": peak_all,
            "activations": act, "forward_end": fwd_end,
            "where": "forward" if at < mode.marks["backward"] else "backward",
            "op": mode.ops.get(mode.events[at][0]),
            "loss": value}
