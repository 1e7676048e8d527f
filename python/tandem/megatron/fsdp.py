"""Megatron-FSDP's optimizer step in Tandem's engine: the offloaded, quantized optimizer of
Megatron-FSDP's main-weight shards, with checkpoints that save, load and reshard.
docs/megatron_fsdp.md.

One optimizer, :class:`MegatronFSDPAdam`, three ways in:

* Megatron-Core (Megatron-FSDP v1, ``FullyShardedDataParallel``):
  ``tandem.megatron.get_megatron_optimizer(config, model_chunks, offload_fraction=...)``
  builds Megatron's own DistributedOptimizer with MegatronFSDPAdam inside and installs
  three hooks on that instance (:func:`install`): no zero-gradient "dummy" step before a
  checkpoint load, ``reload_model_params`` re-reads the masters, and the
  ``fsdp_dtensor`` state dict holds Tandem's arrays (_fsdp_state.py).
* the standalone megatron-fsdp package, v1: ``fully_shard_model(...)``, then
  ``model._replace_param_with_distributed_if_needed()``, then
  ``fully_shard_optimizer(MegatronFSDPAdam(model.parameters(), ...))`` of this module.
* its v2 (``megatron_fsdp.experimental``): its own
  ``fully_shard_optimizer(MegatronFSDPAdam(...), precision_aware=True)``.

Note [Megatron-FSDP shards]: Megatron-FSDP hands the optimizer ``nn.Parameter(DTensor)``
views of its main-weight buffer (fp32 by default, or bf16): row ranges of each parameter,
``Shard(0)``, uneven and often empty, the same DTensor objects the module holds between
steps. Its gradients arrive after its reduce-scatter as ``param.decoupled_grad`` (a view
of its main-gradient buffer, in that buffer's dtype) or ``param.grad`` (that view, cast to
the main-weight dtype when they differ), None on an empty shard. The engine steps every
parameter's local shard in place, empty ones included (0 elements), reads whichever
gradient is there by its pointer each step, and Megatron-FSDP then copies the main weights
into its compute weights and all-gathers them. An fp32 master over fp32 main weights, and
the bf16 part of a ``bf16+ecc`` master over bf16 main weights, *is* the main weight: no
second copy of the weights exists in Tandem's GPU-resident part. Megatron keeps the
gradient norm and clipping; the engine steps with clipping off.

Note [Every rank steps]: each step() runs the engine on every rank, with every empty shard
counted as stepped, so that the engine's one collective per step (the non-finite check,
Note [One collective per step] in _core/dist.py) is reached by every rank even where a rank
holds no element, and every shard of a parameter, on every rank, carries the same step
count (a checkpoint stores one per parameter).
"""

import functools
import types

import torch as _torch

from tandem._core import dist as _dist
from tandem.megatron import _fsdp_state
from tandem.megatron._adam import TandemAdam, _parts, build_with, require_megatron_core

__all__ = ["MegatronFSDPAdam", "fully_shard_optimizer", "install", "tandem_optimizers"]


class MegatronFSDPAdam(TandemAdam):
    """TandemAdam (FusedAdam's interface over a Tandem engine) over Megatron-FSDP's
    main-weight shards (Note [Megatron-FSDP shards]).

    Takes TandemAdam's arguments (docs/megatron.md, "Options"; FusedAdam's defaults: pass
    ``lr`` and ``weight_decay``) and every engine option (``offload_fraction``,
    ``offload_compute``, ``master_format``, ``momentum_format``, ``variance_format``, ...),
    with these differences:

    * Gradients: ``param.decoupled_grad`` when it is set, else ``param.grad``
      (``use_decoupled_grad`` is accepted and changes nothing).
    * ``master_weights`` (FusedAdam's own fp32 masters; Megatron sets it False for
      Megatron-FSDP): accepted either way; the masters are the engine's, in
      ``master_format`` ("f32" by default). ``master_weight_dtype`` is ignored: the main
      weights are Megatron-FSDP's. With bf16 main weights, ``master_format="bf16+ecc8"``
      (or "bf16+ecc16") keeps no fp32 copy of the weights anywhere.
    * Parameters: DTensors of one mesh with ``Shard(0)`` (tensor parallelism is not
      supported), their local shards uneven or empty; param_groups cannot change after
      construction (``add_param_group`` raises).
    * ``state_dict()`` / ``load_state_dict()``: the arrays as DTensors for
      torch.distributed.checkpoint (_fsdp_state.py); ``load_state_dict`` also
      takes the ``fsdp_dtensor`` form that Megatron-Core's DistributedOptimizer hands it.

    Not thread-safe beyond what Megatron needs: one thread steps and checkpoints.
    """

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
        if getattr(self, "_building", True):
            super().add_param_group(param_group)
            return
        raise ValueError(
            "MegatronFSDPAdam's parameters are fixed at construction (megatron_fsdp."
            "fully_shard(module, optimizer) re-adds them): build the optimizer after "
            "fully_shard_model(...) and model._replace_param_with_distributed_if_needed(), "
            "over model.parameters(), then call tandem.megatron_fsdp.fully_shard_optimizer")

    # ------------------------------------------------------------------------------------
    # Note [Megatron-FSDP shards], Note [Every rank steps]

    def _layout_params(self):
        params, group_of = [], []
        for g, group in enumerate(self.param_groups):
            for p in group["params"]:
                params.append(p)
                group_of.append(g)
        return params, group_of

    def _grad_of(self, p):
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

    def _nothing_to_step(self, grads):
        return False

    # ------------------------------------------------------------------------------------
    # State dicts (_fsdp_state.py)

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
            groups, index = [], 0
            for group in self.param_groups:
                g = {key: value for key, value in group.items() if key != "params"}
                g["params"] = list(range(index, index + len(group["params"])))
                index += len(group["params"])
                groups.append(g)
            state = {}
            if self._ensure_engine():
                entries, _ = _fsdp_state.entries(self, template=template)
                state = dict(enumerate(entries))
            version = _fsdp_state.NOT_LOADED if template else _fsdp_state.VERSION
            return {"state": state, "param_groups": groups,
                    "tandem": _fsdp_state.header(self, version)}

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
                if self.swiglu and _fsdp_state.is_swiglu_name(name) and p.shape[0] % 2 == 0:
                    w, v = _fsdp_state.split_halves(entries[k], p, rows[k])
                    state[name + _fsdp_state.HALVES[0]] = w
                    state[name + _fsdp_state.HALVES[1]] = v
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
            if not isinstance(groups, (list, tuple)) or len(groups) != len(self.param_groups):
                raise ValueError("state dict has %s param groups, optimizer %d" % (
                    len(groups) if isinstance(groups, (list, tuple)) else "no",
                    len(self.param_groups)))
            if not self._ensure_engine():
                return
            plain_state, plain_groups, k = {}, [], 0
            for g, (saved, group) in enumerate(zip(groups, self.param_groups)):
                keys = saved.get("params", [])
                if len(keys) != len(group["params"]):
                    raise ValueError("param group %d has %d params in the state dict, %d here"
                                     % (g, len(keys), len(group["params"])))
                first = k
                for key, p in zip(keys, group["params"]):
                    entry = _fsdp_state.joined(state, key, p, "state dict['state']")
                    where = "state dict['state'][%r]" % (key,)
                    arrays = _fsdp_state.local_arrays(self, k, entry, where)
                    step = entry.get("step")
                    if not _torch.is_tensor(step) and not isinstance(step, (int, float)):
                        raise ValueError("%s['step'] must be a number, got %r" % (where, step))
                    plain = {name: _torch.from_numpy(a) for name, a in arrays.items()}
                    plain["step"] = _torch.tensor(float(step))
                    plain_state[k] = plain
                    k += 1
                plain_groups.append(dict(saved, params=list(range(first, k))))
            base = {"version": 1, "algorithm": self.algorithm, "master": self._formats[0],
                    "momentum": self._formats[1], "variance": self._formats[2]}
            TandemAdam.load_state_dict(self, {"state": plain_state, "param_groups": plain_groups,
                                              "tandem": base})
            # The restore wrote the masters into the parameters; earlier writes (the
            # checkpoint's main weights) are superseded, not reloaded at the next step.
            self._core.record_versions()


# ----------------------------------------------------------------------------------------
# Megatron-Core: tandem.megatron.get_megatron_optimizer for Megatron-FSDP chunks


def tandem_optimizers(megatron_optimizer):
    """The MegatronFSDPAdam instances inside a Megatron optimizer."""
    return [o.optimizer for o in _parts(megatron_optimizer)
            if isinstance(getattr(o, "optimizer", None), MegatronFSDPAdam)]


def _refuse(config, ddp, model_config):
    """ValueError for the Megatron-FSDP configurations not supported, and why."""
    if config.optimizer != "adam":
        raise ValueError("tandem.megatron supports config.optimizer='adam' only (got %r)"
                         % (config.optimizer,))
    if getattr(config, "fp8_recipe", None) is not None:
        raise ValueError("fp8 parameters (config.fp8_recipe=%r) are not supported: their "
                         "casts live in TransformerEngine's optimizer kernels"
                         % (config.fp8_recipe,))
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
    """Whether Megatron's gradient norm and clipping must read ``param.decoupled_grad``.

    Megatron-FSDP installs its gradients as ``decoupled_grad`` when
    ``ddp_config.megatron_fsdp_use_decoupled_grad`` is set (megatron-core 0.19.2; 0.16.1
    has no such field and always sets ``param.grad``), and Megatron-Core's norm reads
    ``decoupled_grad`` of Megatron-FSDP parameters exactly when
    ``config.use_precision_aware_optimizer``. Were they to disagree, the norm would find no
    gradient: 0, and clipping silently off. Returns True when the DDP config installs
    ``decoupled_grad`` (precision-aware mode must be on); raises ValueError when
    ``config`` asks for precision-aware mode and the gradients are installed as ``grad``."""
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
    """tandem.megatron.get_megatron_optimizer for chunks wrapped in Megatron-FSDP (it
    calls here): Megatron's own function builds its DistributedOptimizer(s) with
    MegatronFSDPAdam inside, from a copy of ``config`` (Megatron's CPU offload switched
    off: ``_offload_options``; precision-aware mode switched on where Megatron-FSDP
    installs ``decoupled_grad``: ``_reads_decoupled_grad``, TransformerEngine not
    needed), and :func:`install` sets them up. ``options``: Tandem's keyword
    arguments."""
    import copy

    ddp = model_chunks[0].ddp_config
    _refuse(config, ddp, getattr(model_chunks[0], "config", None))
    decoupled = _reads_decoupled_grad(config, ddp)
    options = _offload_options(config, options)
    cfg = copy.copy(config)  # not dataclasses.replace: __post_init__ would want TE
    cfg.optimizer_cpu_offload = False
    if decoupled:
        # What OptimizerConfig.__post_init__ sets with use_precision_aware_optimizer and
        # no fp8 parameters (_refuse): Megatron's norm then reads decoupled_grad.
        cfg.use_precision_aware_optimizer = True
        cfg.use_precision_aware_optimizer_no_fp8_or_ds_fp8 = True

    def make_adam(params, **kwargs):
        return MegatronFSDPAdam(params, **kwargs, **options)

    optimizer = build_with(make_adam, cfg, model_chunks, megatron_kwargs)
    install(optimizer)
    return optimizer


def install(megatron_optimizer):
    """Sets up every DistributedOptimizer around a MegatronFSDPAdam in
    ``megatron_optimizer`` (a ChainedOptimizer or one), with attributes of those
    instances only (no change to Megatron's classes):

    * ``_init_optimizer_states_with_dummy_values`` (run before an fsdp_dtensor load: a
      zero-gradient step, which would move the weights by weight decay) does nothing:
      Tandem's state exists from its first use;
    * ``reload_model_params()`` re-reads every master from its parameter
      (MegatronFSDPAdam.reload_params; Megatron's raises or does nothing for Megatron-FSDP);
    * ``sharded_param_state_fsdp_dtensor`` gives MegatronFSDPAdam's fsdp_dtensor state:
      {"state": {name: entry}, "param_to_group_meta": Megatron's, "tandem": header};
      Megatron's load_state_dict hands it back to MegatronFSDPAdam.load_state_dict.

    The inner optimizer's ``grad_stats_group`` becomes the DistributedOptimizer's, its
    ``param_names`` its parameter names, and ``swiglu`` whether the model's MLP is gated.
    Returns the MegatronFSDPAdam instances. Raises RuntimeError for a megatron-core
    release whose DistributedOptimizer lacks one of these hooks (Note [Megatron-Core
    versions] in _adam.py)."""
    require_megatron_core()
    found = []
    for o in _parts(megatron_optimizer):
        inner = getattr(o, "optimizer", None)
        if not isinstance(inner, MegatronFSDPAdam):
            continue
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
    version = _fsdp_state.NOT_LOADED if is_loading else _fsdp_state.VERSION
    return {"state": inner.fsdp_dtensor_state(is_loading), "param_to_group_meta": meta,
            "tandem": _fsdp_state.header(inner, version)}


# ----------------------------------------------------------------------------------------
# The standalone megatron-fsdp package, v1


def fully_shard_optimizer(optimizer):
    """megatron_fsdp.fully_shard_optimizer for a MegatronFSDPAdam, without its
    zero-gradient initial step (which would move the weights by weight decay and count a
    step): ``optimizer.step()`` then finishes Megatron-FSDP's gradient reduction first
    (unless its model_auto_sync does) and installs the updated weights after, and
    ``optimizer.zero_grad()`` zeroes its gradient buffer too, as there. Checkpoints:
    ``optimizer.state_dict()`` / ``load_template()`` / ``load_state_dict()`` with
    torch.distributed.checkpoint (docs/megatron_fsdp.md). Returns the optimizer.

    Raises TypeError for another optimizer, and RuntimeError if megatron_fsdp's function
    no longer wraps the optimizer the way this relies on (then nothing was stepped)."""
    if not isinstance(optimizer, MegatronFSDPAdam):
        raise TypeError("tandem.megatron_fsdp.fully_shard_optimizer takes a MegatronFSDPAdam, "
                        "got %s" % type(optimizer).__name__)
    from megatron_fsdp import fully_shard_optimizer as wrap

    def no_initial_step(self, *args, **kwargs):
        del self, args, kwargs

    optimizer.step = types.MethodType(no_initial_step, optimizer)
    try:
        wrap(optimizer, preproc_state_dict_for_dcp_ckpt=False)
    except BaseException:
        for name in ("step", "zero_grad"):
            optimizer.__dict__.pop(name, None)
        raise
    if getattr(optimizer.step, "__func__", None) is no_initial_step:
        del optimizer.step
        raise RuntimeError("megatron_fsdp.fully_shard_optimizer did not wrap optimizer.step: "
                           "this megatron_fsdp version is not supported by "
                           "tandem.megatron_fsdp.fully_shard_optimizer")
    return optimizer
