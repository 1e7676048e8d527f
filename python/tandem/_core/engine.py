"""The front-end core: one tandem._C.HybridOptimizer built and driven for a front end
(tandem.torch, tandem.megatron), which decides which tensors the engine steps (``bind``)
and each step's learning rates, hyper-parameters and gradients; the core does the rest.
docs/architecture.md, "Python", has the picture. The core holds no lock and raises no
warning: the front end serialises calls and speaks to the user (warnings.py).
"""

import torch

from tandem import _C
from tandem._core import device_memory as _device_memory
from tandem._core import dist as _dist
from tandem._core import options as _options
from tandem._core.grads import GradientBook, device_guard

DTYPE_NAMES = _options.DTYPE_NAMES

local = _dist.local  # a DTensor's local shard, or the tensor itself


class Engine:
    """One HybridOptimizer over the tensors a front end binds.

    algorithm: "adamw", "adam", "lion" or "sgd". config: a tandem._C.OptimizerConfig with
    the formats and every option but algorithm, groups, mode and cuda_stream (set at each
    build). borrow_grads: the engine is built over the gradient tensors handed to ``bind``
    (Megatron's gradient buffer) and rebinds when one of another dtype comes; without, it
    keeps gradient buffers (Note [Gradients read where they are]). follow_writes: each
    step first reloads the masters of parameters torch ops wrote (Note [The parameter is
    the source of truth]); off for a front end that reloads them itself. ``book`` is the
    engine's GradientBook (grads.py). Not thread-safe: the front end holds its lock.
    """

    def __init__(self, algorithm, config, *, borrow_grads=False, follow_writes=True):
        self.algorithm = algorithm
        self.follow_writes = follow_writes
        self.config = config
        self.formats = (config.master, config.momentum, config.variance)
        self.borrow_grads = borrow_grads
        self.release = bool(config.release_grads)
        self.book = GradientBook(borrow_grads, self.release)
        self.engine = None
        self.params, self.names, self.group_of = [], [], []
        self.index_by_id = {}
        self.device, self.cuda, self.stream = None, False, 0
        self.sharded, self.combine = False, None
        self._ptrs, self._storages, self._param_versions = [], [], []
        self.retired = {}        # id(p) -> (p, snapshot entry) of parameters left out
        self.grad_rebinds = 0    # rebinds for borrowed gradients of another dtype
        self.hypers = []         # each group's hyper-parameters the engine has

    @property
    def engine(self):
        """The HybridOptimizer (None before the first bind); the book's too."""
        return self._engine

    @engine.setter
    def engine(self, engine):
        self._engine = self.book.engine = engine

    # ------------------------------------------------------------------------------------
    # Reports

    mode = property(lambda self: self.engine.mode)
    step_count = property(lambda self: self.engine.step_count)
    step_begun = property(lambda self: self.engine.step_begun)

    def tensor_step_counts(self):
        return list(self.engine.tensor_step_counts())

    def index_of(self, p):
        k = self.index_by_id.get(id(p))
        if k is None:
            raise ValueError("parameter is not stepped by this optimizer")
        return k

    def label(self, k):
        return _options.label(self.names[k], self.params[k])

    # The book's that tests and tools read.
    handed = property(lambda self: self.book.handed)
    held = property(lambda self: self.book.held)

    def prune_held(self):
        self.book.prune_held()

    # ------------------------------------------------------------------------------------
    # Devices and streams

    def guard(self):
        return device_guard(self.device)

    def engine_stream(self):
        return (torch.cuda.default_stream(self.device) if self.stream == 0
                else torch.cuda.ExternalStream(self.stream, device=self.device))

    def synchronize(self):
        """Waits until the engine's last step is final (its state may be read)."""
        if self.cuda:
            torch.cuda.synchronize(self.device)
        _dist.wait_copies(self.params)  # host shards: Note [Parameters on the host]

    def order_after_current(self):
        """Makes the engine's stream wait for the caller's current stream (GPU mode, when
        they differ; host shards of a GPU mesh: _dist.wait_copies); returns it, or None."""
        if not self.cuda:
            return _dist.wait_copies(self.params)
        current = torch.cuda.current_stream(self.device)
        if current.cuda_stream == self.stream:
            return None
        self.engine_stream().wait_stream(current)
        return current

    def wait_param(self, p, stream=None):
        """Makes `stream` (default: the current stream) wait until p's update of the last
        step is final on the GPU; a no-op in host mode."""
        if not self.cuda:
            return
        k = self.index_of(p)
        if stream is None:
            stream = torch.cuda.current_stream(self.device)
        handle = stream if isinstance(stream, int) else stream.cuda_stream
        with self.guard():
            self.engine.wait_param(k, handle)

    # ------------------------------------------------------------------------------------
    # Layout

    @staticmethod
    def check_param(p, where, device):
        if p.is_sparse or p.layout != torch.strided:
            raise ValueError("%s: only dense (strided) parameters are supported, got %s"
                             % (where, p.layout))
        if p.dtype not in DTYPE_NAMES:
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
            return torch.device("cuda", torch.cuda.current_device())
        return p.device if device is None else device

    def _layout_shards(self, params, names):
        """Note [Sharded parameters] (dist.py): every parameter is a DTensor on one mesh,
        or none is. Sets sharded and combine (the step's collective; None when nothing is
        sharded or the shard group has one rank)."""
        labels = ["'%s'" % n for n in names]
        dtensors = [_dist.is_dtensor(p) for p in params]
        self.sharded, self.combine = any(dtensors), None
        if not self.sharded:
            return
        if not all(dtensors):
            raise ValueError("%s is a plain tensor while other parameters are DTensors; "
                             "shard every parameter of the optimizer (fully_shard the root "
                             "module too) or none" % labels[dtensors.index(False)])
        signatures = [_dist.check_param(p, lb) for p, lb in zip(params, labels)]
        _dist.check_same_mesh(signatures, labels)
        group = _dist.shard_group(signatures)
        if group is not None:
            import torch.distributed as dist
            if dist.get_world_size(group) > 1:
                self.combine = _dist.make_combine(group, params[0].device)

    def tensor_formats(self, k):
        """Engine tensor k's formats override (Note [Shard-safe quantization groups] in
        dist.py), or None for the configured formats."""
        p = self.params[k]
        sharded = self.sharded and _dist.shard_dim(p) is not None
        return _dist.tensor_formats(self.formats, tuple(p.shape), sharded)

    def formats_of(self, k):
        override = self.tensor_formats(k)
        if override is None:
            return tuple(self.formats)
        return tuple(override[key] for key in ("master", "momentum", "variance"))

    def _lay_out(self, entries, grads):
        """Sets the per-tensor tables for `entries` [(param, name, group)] and the book's
        gradient buffers (grads: the borrowed ones).

        Note [Gradients read where they are]: the engine reads each step's gradients by
        their pointers (Note [Which parameters have a gradient] in grads.py), so an own
        gradient buffer is needed only as p.grad for backward to accumulate into (plain
        parameters) or for a gradient that must be copied (another dtype, not
        contiguous). FSDP2 assigns the sharded gradients itself and gradient release
        wants autograd's own: for DTensor parameters and with release_grads the buffers
        are made when first needed (own_buffer), and the spec's default gradient is the
        parameter's own memory, never read (every step and grad_ready hand a pointer)."""
        params = [p for p, _, _ in entries]
        names = [n for _, n, _ in entries]
        if not params:
            raise ValueError("optimizer got no parameter that requires grad")
        device = None
        for p, name in zip(params, names):
            device = self.check_param(p, "'%s'" % name, device)
        self._layout_shards(params, names)
        if len(set(names)) != len(names):
            dup = sorted({n for n in names if names.count(n) > 1})
            raise ValueError("parameter names must be unique, got %s more than once" % dup)
        self.params, self.names = params, names
        self.group_of = [g for _, _, g in entries]
        self.device, self.cuda = device, device.type == "cuda"
        self.index_by_id = {id(p): k for k, p in enumerate(params)}
        self.book.lay_out(params, names, self.sharded, device, grads)
        # The engine holds raw pointers: each parameter's storage is kept alive, so that
        # a parameter reallocated behind our back (p.data = ..., model.to()) leaves the
        # old memory readable until a rebind takes the state from it, and no new tensor
        # can get the old address (a changed data_ptr() always means a reallocation).
        self._ptrs = [local(p).data_ptr() for p in params]
        self._storages = [local(p).detach() for p in params]

    def _specs(self):
        specs = []
        for k, p in enumerate(self.params):
            mine = local(p)
            g = self.book.grads[k] if self.book.grads[k] is not None else mine
            # A 1-D shard may end at any element: the exact norm sums its elements one by
            # one (TensorSpec::norm_unit); other shards end between rows (the default).
            unit = 1 if self.sharded and p.dim() == 1 and _dist.shard_dim(p) is not None else 0
            specs.append((self.names[k], mine.numel(), DTYPE_NAMES[p.dtype],
                          DTYPE_NAMES[g.dtype], mine.data_ptr(), g.data_ptr(),
                          self.group_of[k], list(mine.shape), self.tensor_formats(k), unit))
        return specs

    def engine_config(self):
        """The engine's configuration: the front end's options with the algorithm, each
        group's values and the mode."""
        return _device_memory.with_options(self.config, algorithm=self.algorithm,
                                           groups=self.engine_groups(),
                                           mode="gpu" if self.cuda else "host")

    def _new_engine(self):
        """A HybridOptimizer over the current layout; on CUDA on the current stream, its
        device memory from torch's (_device_memory.build_engine)."""
        cfg = self.engine_config()
        self.stream = 0
        with self.guard():
            if self.cuda:
                current = torch.cuda.current_stream(self.device)
                self.stream = current.cuda_stream
                current.synchronize()  # the engine reads the parameters' initial values
            cfg.cuda_stream = self.stream
            return _device_memory.build_engine(self._specs(), cfg, self.device)

    # ------------------------------------------------------------------------------------
    # Binding (Note [Rebinding])

    def bind(self, entries, hypers, grads=None):
        """Builds the engine over `entries` [(param, name, group)] in that order, with
        the groups' hyper-parameters. When an engine exists, its state moves over by
        parameter identity (Note [Rebinding]) and a parameter left out keeps its state
        aside (retired) for its return. grads (borrowed gradients only): each tensor's
        gradient the engine is built over. Returns (added, moved): the parameters new to
        the engine and the old tensors reallocated. Changes nothing when it raises."""
        if self.engine is None:
            self._lay_out(entries, grads)
            self.hypers = [dict(h) for h in hypers]
            self.engine = self._new_engine()
            self.record_versions()
            self.book.reset_ready()
            return list(self.params), []
        return self._rebind(entries, hypers, grads)

    def move_state(self, **changes):
        """Rebuilds the engine with `changes` to its options (offload_fraction=...), its
        state carried bit for bit; when the new one cannot be built, the old options are
        rebuilt with the state and the error raised. Between steps only (RuntimeError)."""
        if self.engine.step_begun or self.book.handed:
            raise RuntimeError("move_state: a step is under way")
        with self.guard():
            self.synchronize()
            snap = self.engine.snapshot_held()  # C++'s: no copy into Python
            counts = self.engine.tensor_step_counts()
            unstepped = [(p, local(p).detach().to("cpu", copy=True))
                         for p, n in zip(self.params, counts) if n == 0]
        old = self.config
        self.config = _device_memory.with_options(old, **changes)
        self.engine = None  # freed here: its memory serves the new one
        try:
            self.engine = self._new_engine()
        except BaseException:
            self.config = old
            self.engine = self._new_engine()
            self._restore_into(self.engine, snap, unstepped)
            raise
        self._restore_into(self.engine, snap, unstepped)

    def _restore_into(self, engine, snap, values):
        """Restores `snap` (a snapshot dict, or move_state's HeldSnapshot) into `engine`,
        then puts back the (parameter, value) pairs of `values` (each written from its master)."""
        with self.guard():
            engine.restore(snap) if isinstance(snap, dict) else engine.restore_held(snap)
            self.synchronize()
            for p, value in values:
                local(p).data.copy_(value)  # .data: the version counter stays

    def moved(self, k):
        """Whether parameter k was reallocated since the engine was built over it."""
        return local(self.params[k]).data_ptr() != self._ptrs[k]

    def check_realloc(self, k):
        """Reached with the engine's step begun (begin_step): no rebind can run then."""
        if self.moved(k):
            raise RuntimeError("%s was reallocated (model.to(), p.data = ...?) between "
                               "begin_step() and step(); move the model before begin_step()"
                               % self.label(k))

    def reallocated(self):
        """The engine tensors whose parameter was reallocated; RuntimeError for one whose
        shape or dtype changed (its state cannot follow)."""
        moved = [k for k in range(len(self.params)) if self.moved(k)]
        for k in moved:
            p, old = self.params[k], self._storages[k]
            if local(p).shape != old.shape or p.dtype != old.dtype:
                raise RuntimeError(
                    "%s: the optimizer was built for shape %s, %s; the parameter changed "
                    "shape or dtype since (model.half(), p.data = ...?) and its optimizer "
                    "state cannot follow. Build the optimizer after converting the model."
                    % (self.label(k), tuple(old.shape), old.dtype))
        return moved

    def _rebind(self, entries, hypers, grads):
        """Note [Rebinding] (docs/python.md, "Rebinding"): a new engine over the current
        tensors, the old state restored into it by parameter identity, bit for bit; a
        tensor left out keeps its state aside (retired) for its return. The weights are
        put back after the restore, so a rebind changes none; the old storages were kept
        alive, so the snapshot reads valid memory. Refused (the step under way discarded)
        once gradients of the step were released: the new engine could not step them."""
        book = self.book
        if self.release and book.handed:
            book.discard()
            raise RuntimeError(
                "the optimizer's parameters changed (param_groups, unfreezing, a "
                "reallocation) after gradients of this step were released (release_grads); "
                "the step was discarded, nothing changed. Change parameters between a "
                "step() and the next backward")
        old = dict(params=self.params, grads=book.grads, versions=self._param_versions)
        snap = self.snapshot()
        old_index = {id(p): k for k, p in enumerate(old["params"])}
        moved = [k for k in range(len(old["params"])) if self.moved(k)]
        # Weights written by torch ops since the engine last wrote them: reloaded below.
        written = {id(old["params"][k]) for k in self.written()}
        tables = {key: getattr(self, key) for key in (
            "params", "names", "group_of", "device", "cuda", "index_by_id", "_ptrs",
            "_storages", "stream", "sharded", "combine", "hypers")}
        book_layout = book.layout()
        same = (len(entries) == len(old["params"])
                and all(e[0] is p for e, p in zip(entries, old["params"]))
                and [(n, g) for _, n, g in entries] == list(zip(self.names, self.group_of)))
        try:
            self._lay_out(entries, grads)
            self.hypers = [dict(h) for h in hypers]
            engine = self._new_engine()
            with self.guard():
                # The values wait in host memory: on a GPU a second copy of the model may
                # not fit (the rebind Accelerate's prepare causes comes before training).
                values = [local(p).detach().to("cpu", copy=True) for p in self.params]
                if same:
                    state = snap  # the same tensors in the same order: one copy fewer
                else:
                    state = engine.snapshot()
                    tensors = []
                    for k, (p, t) in enumerate(zip(self.params, state["tensors"])):
                        o = old_index.get(id(p))
                        carried = (snap["tensors"][o] if o is not None else
                                   self.retired[id(p)][1] if id(p) in self.retired else None)
                        if carried is not None:
                            t = dict(carried, name=self.names[k], group=self.group_of[k])
                        tensors.append(t)
                    state["tensors"] = tensors
                    state["step"], state["metadata"] = snap["step"], snap.get("metadata", "")
                for k, t in enumerate(state["tensors"]):  # a borrowed gradient's dtype
                    t["grad_dtype"] = DTYPE_NAMES[book.grad_dtype(k)]  # may have changed
                self._restore_into(engine, state, zip(self.params, values))
                del values
        except BaseException:
            for key, value in tables.items():  # no state change on a failed call
                setattr(self, key, value)
            book.restore_layout(book_layout)
            raise
        for k, p in enumerate(old["params"]):
            if id(p) not in self.index_by_id:
                self.retired[id(p)] = (p, snap["tensors"][k])
        returning = [k for k, p in enumerate(self.params)
                     if id(p) not in old_index and id(p) in self.retired]
        for p in self.params:
            self.retired.pop(id(p), None)
        self._param_versions = [local(p)._version if id(p) not in old_index
                                else old["versions"][old_index[id(p)]] for p in self.params]
        # Own gradient buffers: an old buffer that is p.grad moves into the new one.
        for k, p in enumerate(self.params):
            o = old_index.get(id(p))
            buf = None if o is None or self.borrow_grads else old["grads"][o]
            if (buf is not None and p.grad is not None
                    and local(p.grad).data_ptr() == buf.data_ptr()):
                book.own_buffer(k).copy_(buf)
                p.grad = book.alias_of(k)
        book.reset_ready()
        self.engine = engine  # the old one is freed here
        self.reload(sorted([k for k, p in enumerate(self.params) if id(p) in written]
                           + returning))
        added = [p for p in self.params if id(p) not in old_index]
        return added, moved

    # ------------------------------------------------------------------------------------
    # The parameter is the source of truth

    def record_versions(self):
        self._param_versions = [local(p)._version for p in self.params]

    def written(self):
        """The engine tensors whose parameter torch ops wrote since the engine did.

        Note [The parameter is the source of truth]: the engine writes parameters through
        raw pointers, which leave their version counters alone."""
        return [k for k, p in enumerate(self.params)
                if local(p)._version != self._param_versions[k]]

    def reload(self, indices):
        """Re-reads the masters of `indices` from their parameters (ReloadParams),
        ordered after the current stream; records every version."""
        for k in indices:
            self.check_realloc(k)
        if indices:
            with self.guard():
                self.order_after_current()
                self.engine.reload_params(list(indices))
        self.record_versions()

    def sync_params(self):
        self.reload(self.written())

    # ------------------------------------------------------------------------------------
    # Steps (Note [Each group's values every step])

    def engine_groups(self):
        """The groups' hyper-parameters the engine has, as snapshot group dicts."""
        return [dict(h, lr_scale=1.0) for h in self.hypers]

    def _options(self, lrs, hypers, clip, loss_scale):
        """The StepOptions of a step (clip and loss scale checked in C++) and its learning
        rates as floats.

        Note [Each group's values every step]: the engine's Step takes each group's
        learning rate and hyper-parameters at every step (StepOptions::group_hyper), as
        torch.optim and Megatron hand them: no ratio or reference group is kept."""
        options = _C.StepOptions(max_grad_norm=clip, loss_scale=loss_scale)
        options.groups = [dict(h, lr_scale=1.0) for h in hypers]
        return options, [float(lr) for lr in lrs]

    def step(self, lrs, hypers, grads, clip=0.0, loss_scale=1.0, combine=None):
        """One step over `grads` (each engine tensor's gradient, or None) with each group's
        learning rate and hyper-parameters, rebinding first where gather says so. While
        the engine's step is begun, lrs, hypers, clip and loss_scale must be begin_step's.
        Returns the engine's (applied, grad_norm, step, stepped_tensors)."""
        options, lrs = self._options(lrs, hypers, clip, loss_scale)
        book = self.book
        released = book.released_grads(grads)  # checked before anything changes
        active, pointers, sources, rebind = book.gather(grads, self._ptrs, self.check_realloc)
        if rebind:  # reallocated parameters (the state follows), a gradient's dtype
            if not self.reallocated():
                self.grad_rebinds += 1
            self.bind(list(zip(self.params, self.names, self.group_of)), hypers,
                      grads=([g if g is not None else book.grads[k]
                              for k, g in enumerate(grads)] if self.borrow_grads else None))
            active, pointers, sources, _ = book.gather(grads, self._ptrs, self.check_realloc)
        if self.follow_writes:
            self.sync_params()
        book.recheck_early_start(active, pointers, sources, self.order_after_current)
        for k in released:  # read from what grad_ready took (pointer 0: grad_ready's)
            active[k] = 1
        options.active = bytes(active)
        options.grads = pointers
        options.combine = combine if combine is not None else self.combine
        try:
            with self.guard():
                current = self.order_after_current()
                result = self.engine.step(lrs, options)
                if current is not None:
                    current.wait_stream(self.engine_stream())
        finally:
            book.reset_ready()
        self.hypers = [dict(h) for h in hypers]
        return result

    def begin_step(self, lrs, hypers, clip, loss_scale):
        """Announces the next step (speculative early start) with its groups' values."""
        options, lrs = self._options(lrs, hypers, clip, loss_scale)
        if self.follow_writes:
            self.sync_params()
        with self.guard():
            self.engine.begin_step(lrs, options)

    # ------------------------------------------------------------------------------------
    # State

    def snapshot(self):
        with self.guard():
            self.synchronize()
            return self.engine.snapshot()

    def restore(self, snap):
        with self.guard():
            self.synchronize()
            self.engine.restore(snap)  # refused while a step is begun
        if not self.release:  # released gradients stay the next step's (Restore)
            self.book.reset_ready()

