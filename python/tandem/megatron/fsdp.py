"""Megatron-FSDP's optimizer step in Tandem's engine: :class:`MegatronFSDPAdam` over its
main-weight shards, with checkpoints that save, load and reshard. Its three ways in
(Megatron-Core through :func:`install`, megatron-fsdp v1 through
:func:`fully_shard_optimizer`, and v2) are in docs/megatron_fsdp.md.

Note [Megatron-FSDP shards]: Megatron-FSDP hands the optimizer ``nn.Parameter(DTensor)``
views of its main-weight buffer (fp32, or bf16): ``Shard(0)`` row ranges of each
parameter, uneven and often empty, the objects the module holds between steps. Their
gradients arrive after its reduce-scatter as ``param.decoupled_grad`` (a view of its
main-gradient buffer) or ``param.grad`` (that view, cast to the main-weight dtype when
they differ), None on an empty shard. The engine steps every local shard in place, empty
ones included, reading whichever gradient is there by its pointer. An fp32 master over
fp32 main weights, and the bf16 part of a ``bf16+ecc`` master over bf16 ones, *is* the
main weight: no second copy of the weights exists in Tandem's GPU-resident part.

Note [Every rank steps]: each step() runs the engine on every rank, with every empty shard
counted as stepped, so that the engine's one collective per step (the non-finite check,
Note [One collective per step] in _core/dist.py) is reached by every rank even where a rank
holds no element, and every shard of a parameter, on every rank, carries the same step
count (a checkpoint stores one per parameter).
"""

import functools

import torch as _torch

from tandem._core import dist as _dist
from tandem.megatron import _fsdp_state
from tandem.megatron._adam import (PRECISION_AWARE, TandemAdam, build_with, inner_optimizers,
                                   refuse_config, require_megatron_core)
from tandem.megatron._state import check_groups, numbered_groups

__all__ = ["MegatronFSDPAdam", "fully_shard_optimizer", "install", "tandem_optimizers"]


class MegatronFSDPAdam(TandemAdam):
    """TandemAdam over Megatron-FSDP's main-weight shards (Note [Megatron-FSDP shards]),
    with TandemAdam's arguments and options (docs/megatron.md, "Options"; pass ``lr`` and
    ``weight_decay``), but:

    * Gradients: ``param.decoupled_grad`` when it is set, else ``param.grad``
      (``use_decoupled_grad`` is accepted and changes nothing).
    * ``master_weights`` is accepted either way and ``master_weight_dtype`` ignored: the
      masters are the engine's, in ``master_format`` ("f32" by default); the main weights
      are Megatron-FSDP's.
    * Parameters: DTensors of one mesh with ``Shard(0)``, their local shards uneven or
      empty; param_groups cannot change after construction (``add_param_group`` raises).
    * State dicts: DTensors for torch.distributed.checkpoint (_fsdp_state.py).

    Not thread-safe beyond what Megatron needs: one thread steps and checkpoints.
    """

    _every_rank_steps = True  # Note [Every rank steps]

    def __init__(self, params, lr=1e-3, bias_correction=True, betas=(0.9, 0.999), eps=1e-8,
                 weight_decay=0.0, amsgrad=False, *, master_weights=True,
                 master_weight_dtype=None, use_decoupled_grad=False, **kwargs):
        del master_weight_dtype  # the main weights are Megatron-FSDP's
        self._building = True
        super().__init__(params, lr, bias_correction, betas, eps, weight_decay, amsgrad,
                         use_decoupled_grad=use_decoupled_grad, **kwargs)
        self._building = False
        self.master_weights = bool(master_weights)
        self.param_names = {}     # id(parameter) -> its fsdp_dtensor entry's name (install)
        self.swiglu = False       # split gated linear_fc1 entries (Note [SwiGLU halves])
        self._no_elements = {}    # device -> the 0-element gradient of empty shards

    def add_param_group(self, param_group):
        if not getattr(self, "_building", True):
            raise ValueError(
                "MegatronFSDPAdam's parameters are fixed at construction (megatron_fsdp."
                "fully_shard(module, optimizer) re-adds them): build the optimizer after "
                "fully_shard_model(...) and model._replace_param_with_distributed_if_needed()"
                ", over model.parameters(), then call "
                "tandem.megatron_fsdp.fully_shard_optimizer")
        super().add_param_group(param_group)

    def _grad_of(self, p):  # Note [Megatron-FSDP shards]
        mine = _dist.local(p)
        if mine.numel() == 0:
            grad = self._no_elements.get(mine.device)
            if grad is None:
                grad = _torch.empty(0, dtype=_torch.float32, device=mine.device)
                self._no_elements[mine.device] = grad
            return grad
        grad = getattr(p, "decoupled_grad", None)
        if grad is None:
            grad = p.grad
        return None if grad is None else _dist.local(grad)

    def state_dict(self):
        """torch-style, for torch.distributed.checkpoint: ``state[i]`` (parameter i, over
        param_groups) holds "step" and the engine's arrays as DTensors placed like the
        parameter (Note [Uneven shards in DCP] in _fsdp_state.py); "tandem" the layout
        and formats. The same keys on every rank. The arrays share memory with a cached
        engine snapshot: treat them as read-only."""
        return self._torch_style(template=False)

    def load_template(self):
        """What state_dict() gives, with zeroed arrays and an unfilled "tandem" entry: the
        template torch.distributed.checkpoint.load fills before load_state_dict (no
        engine snapshot is taken)."""
        return self._torch_style(template=True)

    def _torch_style(self, template):
        with self._lock:
            state = (dict(enumerate(_fsdp_state.entries(self, template)[0]))
                     if self._ensure_engine() else {})
            return {"state": state, "param_groups": numbered_groups(self.param_groups),
                    "tandem": _fsdp_state.header(self, template)}

    def fsdp_dtensor_state(self, is_loading=False):
        """The "state" of Megatron-Core's fsdp_dtensor state dict: {parameter name:
        entry}, with gated linear_fc1 entries split in halves (Note [SwiGLU halves]);
        zeroed templates when is_loading."""
        with self._lock:
            if not self._ensure_engine():
                return {}
            entries, rows = _fsdp_state.entries(self, template=is_loading)
            state = {}
            for k, p in enumerate(self._core.params):
                name = self.param_names.get(id(p))
                if name is None:
                    raise ValueError("%s has no name for the fsdp_dtensor state dict (set by "
                                     "tandem.megatron_fsdp.install)" % self._core.label(k))
                if self.swiglu and _fsdp_state.SWIGLU.search(name) and p.shape[0] % 2 == 0:
                    halves = _fsdp_state.split_halves(entries[k], p, rows[k])
                    state.update((name + h, e) for h, e in zip(_fsdp_state.HALVES, halves))
                else:
                    state[name] = entries[k]
            return state

    def load_state_dict(self, state_dict):
        """Loads what state_dict() gave (filled by torch.distributed.checkpoint at any
        number of ranks), or the fsdp_dtensor form Megatron-Core's DistributedOptimizer
        hands its inner optimizer (entries by parameter name, SwiGLU halves joined). The
        layout, algorithm and formats must be this optimizer's; the offload fraction and
        the number of ranks may differ. Raises ValueError naming the first wrong entry;
        nothing changes then."""
        with self._lock:
            _fsdp_state.check_header(state_dict.get("tandem"), self)
            groups = state_dict.get("param_groups")
            state = state_dict.get("state")
            check_groups(groups, self.param_groups)
            if not self._ensure_engine():
                return
            plain_state, plain_groups, k = {}, [], 0
            for saved, group in zip(groups, self.param_groups):
                first = k
                for key, p in zip(saved.get("params", []), group["params"]):
                    entry = _fsdp_state.joined(state, key, p, "state dict['state']")
                    where = "state dict['state'][%r]" % (key,)
                    arrays = _fsdp_state.local_arrays(self, k, entry, where)
                    step = entry.get("step")
                    if not _torch.is_tensor(step) and not isinstance(step, (int, float)):
                        raise ValueError("%s['step'] must be a number, got %r" % (where, step))
                    plain_state[k] = dict({n: _torch.from_numpy(a) for n, a in arrays.items()},
                                          step=_torch.tensor(float(step)))
                    k += 1
                plain_groups.append(dict(saved, params=list(range(first, k))))
            self._access.load_state_dict({"state": plain_state, "param_groups": plain_groups,
                                          "tandem": _fsdp_state.header(self)})
            # The restore wrote the masters into the parameters; earlier writes (the
            # checkpoint's main weights) are superseded, not reloaded at the next step.
            self._core.record_versions()


# ----------------------------------------------------------------------------------------
# Megatron-Core: tandem.megatron.get_megatron_optimizer for Megatron-FSDP chunks


def tandem_optimizers(megatron_optimizer):
    """The MegatronFSDPAdam instances inside a Megatron optimizer."""
    return [inner for _, inner in inner_optimizers(megatron_optimizer, MegatronFSDPAdam)]


def _refuse(config, ddp, model_config):
    """ValueError for the Megatron-FSDP configurations not supported, and why."""
    refuse_config(config)
    if getattr(model_config, "tensor_model_parallel_size", 1) > 1:
        raise ValueError("Megatron-FSDP with tensor parallelism (tensor_model_parallel_size="
                         "%d) shards column-parallel weights on two mesh dimensions, which "
                         "tandem does not step yet" % model_config.tensor_model_parallel_size)
    if getattr(model_config, "num_moe_experts", None):
        raise ValueError("Megatron-FSDP with experts (num_moe_experts=%d) places expert "
                         "weights on a mesh of their own; one tandem optimizer steps one "
                         "mesh, which is not supported yet" % model_config.num_moe_experts)
    if getattr(ddp, "num_distributed_optimizer_instances", 1) > 1:
        raise ValueError("Megatron-FSDP's hybrid sharding (num_distributed_optimizer_"
                         "instances=%d) has not been run with tandem yet"
                         % ddp.num_distributed_optimizer_instances)
    if getattr(ddp, "outer_dp_sharding_strategy", "no_shard") != "no_shard":
        raise ValueError("Megatron-FSDP's outer_dp_sharding_strategy=%r (HFSDP) has not been "
                         "run with tandem yet" % (ddp.outer_dp_sharding_strategy,))


def _offload_options(config, options):
    """Megatron's own CPU offload settings as Tandem's: optimizer_cpu_offload with
    optimizer_offload_fraction f is Tandem's offload_fraction=f (exactly that fraction of
    the state, where Megatron's HybridDeviceOptimizer takes whole parameters)."""
    if not config.optimizer_cpu_offload:
        return dict(options)
    fraction = config.optimizer_offload_fraction
    given = options.get("offload_fraction", fraction)
    if given != fraction:
        raise ValueError("config.optimizer_offload_fraction=%r and offload_fraction=%r "
                         "disagree; give one" % (fraction, given))
    return dict(options, offload_fraction=fraction)


def _reads_decoupled_grad(config, ddp):
    """Whether Megatron's gradient norm must read ``param.decoupled_grad``: True when the DDP
    config installs Megatron-FSDP's gradients there (megatron_fsdp_use_decoupled_grad;
    megatron-core 0.16.1 has none and sets ``param.grad``). ValueError when ``config`` asks
    for precision-aware mode, in which Megatron-Core's norm reads ``decoupled_grad``, and
    the gradients are installed as ``grad``: the norm would be 0 and clipping silently off."""
    installs = getattr(ddp, "megatron_fsdp_use_decoupled_grad", None)
    if installs is None:
        return False  # megatron-core 0.16: the norm reads param.grad, where they are
    if not installs and config.use_precision_aware_optimizer:
        raise ValueError("config.use_precision_aware_optimizer=True makes Megatron's "
                         "gradient norm read param.decoupled_grad, but ddp_config."
                         "megatron_fsdp_use_decoupled_grad=False installs Megatron-FSDP's "
                         "gradients as param.grad: the norm would be 0 and clipping off. Set "
                         "megatron_fsdp_use_decoupled_grad=True (Megatron-LM does with "
                         "--use-precision-aware-optimizer)")
    return bool(installs)


def get_megatron_optimizer(config, model_chunks, megatron_kwargs, options):
    """tandem.megatron.get_megatron_optimizer for chunks wrapped in Megatron-FSDP:
    Megatron's own function builds its DistributedOptimizer(s) with MegatronFSDPAdam
    inside, from a copy of ``config`` (_offload_options, _reads_decoupled_grad), and
    :func:`install` sets them up. ``options``: Tandem's keyword arguments."""
    ddp = model_chunks[0].ddp_config
    _refuse(config, ddp, getattr(model_chunks[0], "config", None))
    decoupled = _reads_decoupled_grad(config, ddp)
    options = _offload_options(config, options)

    def make_adam(params, **kwargs):
        return MegatronFSDPAdam(params, **kwargs, **options)

    aware = PRECISION_AWARE if decoupled else {}
    optimizer = build_with(make_adam, config, model_chunks, megatron_kwargs,
                           optimizer_cpu_offload=False, **aware)
    install(optimizer)
    return optimizer


def install(megatron_optimizer):
    """Sets three hooks on every DistributedOptimizer around a MegatronFSDPAdam in
    ``megatron_optimizer`` (a ChainedOptimizer or one), on those instances only
    (docs/megatron_fsdp.md, "Megatron-Core"): ``_init_optimizer_states_with_dummy_values``
    does nothing, ``reload_model_params()`` re-reads the masters, and
    ``sharded_param_state_fsdp_dtensor`` gives MegatronFSDPAdam.fsdp_dtensor_state(). The
    inner optimizer gets the DistributedOptimizer's ``grad_stats_group``, its parameter
    names (``param_names``) and whether the model's MLP is gated (``swiglu``). Returns the
    MegatronFSDPAdam instances; RuntimeError for a megatron-core release without these
    hooks (Note [Megatron-Core versions] in _adam.py)."""
    require_megatron_core()
    found = []
    for o, inner in inner_optimizers(megatron_optimizer, MegatronFSDPAdam):
        if hasattr(o, "get_grad_stats_parallel_group"):
            inner.grad_stats_group = o.get_grad_stats_parallel_group()
        # Named now, while the model chunks hold these parameters (Megatron-FSDP swaps in
        # unsharded ones around forward and backward; Megatron caches the names).
        inner.param_names = {id(p): o._param_name(p)
                             for group in inner.param_groups for p in group["params"]}
        model_config = getattr(o.model_chunks[0], "config", None)
        inner.swiglu = bool(getattr(model_config, "gated_linear_unit", False))
        o._init_optimizer_states_with_dummy_values = lambda: None
        o.reload_model_params = functools.partial(_reload_model_params, inner)
        o.sharded_param_state_fsdp_dtensor = functools.partial(_fsdp_dtensor, o, inner)
        found.append(inner)
    return found


def _reload_model_params(inner, state_dict=None):
    del state_dict  # the parameters are the main weights: they hold what was loaded
    inner.reload_params()


def _fsdp_dtensor(distributed_optimizer, inner, is_loading=False):
    meta = distributed_optimizer._param_groups_to_param2group_meta(inner.param_groups)
    return {"state": inner.fsdp_dtensor_state(is_loading), "param_to_group_meta": meta,
            "tandem": _fsdp_state.header(inner, is_loading)}


# ----------------------------------------------------------------------------------------
# The standalone megatron-fsdp package, v1


def fully_shard_optimizer(optimizer):
    """megatron_fsdp.fully_shard_optimizer for a MegatronFSDPAdam (``step`` and
    ``zero_grad`` wrapped as there), without its zero-gradient initial step, which would
    move the weights by weight decay and count a step. Returns the optimizer. Raises
    TypeError for another optimizer, and RuntimeError if megatron_fsdp's function no longer
    wraps the optimizer the way this relies on (then nothing was stepped)."""
    if not isinstance(optimizer, MegatronFSDPAdam):
        raise TypeError("tandem.megatron_fsdp.fully_shard_optimizer takes a MegatronFSDPAdam, "
                        "got %s" % type(optimizer).__name__)
    from megatron_fsdp import fully_shard_optimizer as wrap

    def no_initial_step(*args, **kwargs):
        del args, kwargs

    optimizer.step = no_initial_step
    try:
        wrap(optimizer, preproc_state_dict_for_dcp_ckpt=False)
    except BaseException:
        for name in ("step", "zero_grad"):
            optimizer.__dict__.pop(name, None)
        raise
    if optimizer.step is no_initial_step:
        del optimizer.step
        raise RuntimeError("megatron_fsdp.fully_shard_optimizer did not wrap optimizer.step: "
                           "this megatron_fsdp version is not supported by "
                           "tandem.megatron_fsdp.fully_shard_optimizer")
    return optimizer
