"""Megatron-Core's distributed optimizer stepping through Tandem's engine.

Usage (docs/megatron.md)::

    import tandem.megatron
    optimizer = tandem.megatron.get_megatron_optimizer(
        config, model_chunks, offload_fraction=0.5,
        master_format="bf16+ecc8", momentum_format="q8", variance_format="q8")
    # then Megatron's usual loop: optimizer.zero_grad(); forward/backward; optimizer.step()

Megatron-Core's DistributedOptimizer, with ``use_precision_aware_optimizer``, hands its
inner optimizer the bf16 shard views of the parameters (slices of its parameter buffer)
and the fp32 gradient shards as ``param.decoupled_grad`` (views of its gradient buffer),
and keeps no fp32 copy of the parameters itself: the inner optimizer owns the masters.
TransformerEngine's FusedAdam is that inner optimizer normally; :class:`TandemAdam` takes
its place with the same interface, a front end over the front-end core (_core/engine.py)
whose parameters are the bf16 shards and whose gradients are the ``decoupled_grad``
buffers, read in place, so the only masters and moments are the engine's, in its formats,
on the GPU and (``offload_fraction``) in host memory.

Megatron owns everything around the update: gradient reduce-scatter, loss scaling and
unscaling, the gradient norm and clipping (it scales the gradients before ``step()``),
the parameter all-gather, the learning-rate schedule (written into ``param_groups``
before each step) and checkpoint layout; the engine steps with clipping off and a loss
scale of 1. Its FusedAdam-facing state access lives in _state.py.
"""

import torch as _torch

from tandem._core.warnings import SkippedStepWarning
from tandem.megatron._adam import TandemAdam, _parts, build_with, require_megatron_core

__all__ = ["TandemAdam", "get_megatron_optimizer", "tandem_optimizers",
           "SkippedStepWarning"]


def tandem_optimizers(megatron_optimizer):
    """The TandemAdam instances inside a Megatron optimizer (ChainedOptimizer or one)."""
    return [o.optimizer for o in _parts(megatron_optimizer)
            if isinstance(getattr(o, "optimizer", None), TandemAdam)]


def _refuse(config, model_chunks):
    """ValueError for the configurations the adapter does not support, and why."""
    if config.optimizer != "adam":
        raise ValueError("tandem.megatron supports config.optimizer='adam' only (got %r)"
                         % (config.optimizer,))
    if not config.use_distributed_optimizer:
        raise ValueError("tandem.megatron needs config.use_distributed_optimizer=True: "
                         "Megatron passes its inner optimizer bf16 shards with fp32 "
                         "gradients only in the distributed optimizer's precision-aware mode")
    if not (config.bf16 or config.fp16):
        raise ValueError("tandem.megatron needs bf16 or fp16 parameters (config.bf16 or "
                         "config.fp16); fp32 models need no adapter: use tandem.torch")
    if config.optimizer_cpu_offload:
        raise ValueError("config.optimizer_cpu_offload is Megatron's own CPU offload; use "
                         "tandem.megatron's offload_fraction instead, and leave it False")
    if getattr(config, "fp8_recipe", None) is not None:
        raise ValueError("fp8 parameters (config.fp8_recipe=%r) are not supported: their "
                         "casts live in TransformerEngine's optimizer kernels"
                         % (config.fp8_recipe,))
    ddp = getattr(model_chunks[0], "ddp_config", None)
    if ddp is None:
        raise ValueError("model chunks must be wrapped in Megatron's DistributedDataParallel "
                         "(megatron.core.distributed.DistributedDataParallel)")
    if not getattr(ddp, "use_distributed_optimizer", True):
        raise ValueError("ddp_config.use_distributed_optimizer must be True (the gradient "
                         "buffer is then reduce-scattered into the optimizer's shards)")


def get_megatron_optimizer(config, model_chunks, config_overrides=None,
                           use_gloo_process_groups=True, pg_collection=None,
                           dump_param_to_param_group_map=None, **options):
    """megatron.core.optimizer.get_megatron_optimizer with TandemAdam as the inner optimizer.

    Megatron's own function builds the param groups, the DistributedOptimizer(s) and the
    ChainedOptimizer (dense and expert groups, overlapped param gather), with the
    precision-aware settings switched on in a copy of ``config`` (so TransformerEngine
    need not be installed): bf16 shards as the optimizer's params, fp32 gradient shards
    as ``decoupled_grad``, no fp32 copies outside the engine. ``config`` itself is not
    changed. ``options`` are TandemAdam's Tandem options (keyword arguments, passed
    through). Every TandemAdam's ``grad_stats_group`` is set to its DistributedOptimizer's
    gradient-statistics group, so a non-finite gradient anywhere skips the step
    everywhere.

    Model chunks wrapped in Megatron-FSDP (``ddp_config.use_megatron_fsdp``) get
    tandem.megatron_fsdp's optimizer over its main-weight shards instead
    (docs/megatron_fsdp.md).

    Raises ValueError for what is not supported (see docs/megatron.md): other optimizers
    than Adam, no distributed optimizer, fp8 parameters, Megatron's own CPU offload, fp32
    models; RuntimeError for a megatron-core release that is not supported (docs/megatron.md,
    "Versions").
    """
    import copy

    if not model_chunks:
        raise ValueError("model_chunks is empty")
    require_megatron_core()
    # Only what is given: Megatron's defaults for the rest.
    megatron_kwargs = {key: value for key, value in (
        ("config_overrides", config_overrides), ("pg_collection", pg_collection),
        ("dump_param_to_param_group_map", dump_param_to_param_group_map))
        if value is not None}
    megatron_kwargs["use_gloo_process_groups"] = use_gloo_process_groups
    if getattr(getattr(model_chunks[0], "ddp_config", None), "use_megatron_fsdp", False):
        from tandem.megatron import fsdp
        return fsdp.get_megatron_optimizer(config, model_chunks, megatron_kwargs, options)
    _refuse(config, model_chunks)
    cfg = copy.copy(config)  # not dataclasses.replace: __post_init__ would want TE
    cfg.use_precision_aware_optimizer = True
    cfg.use_precision_aware_optimizer_no_fp8_or_ds_fp8 = True
    cfg.main_params_dtype = _torch.float32
    cfg.exp_avg_dtype = _torch.float32      # placeholders Megatron allocates at load
    cfg.exp_avg_sq_dtype = _torch.float32
    cfg.store_param_remainders = False

    def make_adam(params, **kwargs):
        for key in ("exp_avg_dtype", "exp_avg_sq_dtype", "master_weight_dtype"):
            kwargs.pop(key, None)  # placeholders of cfg; the formats come from options
        return TandemAdam(params, **kwargs, **options)

    optimizer = build_with(make_adam, cfg, model_chunks, megatron_kwargs)
    for o in _parts(optimizer):
        inner = getattr(o, "optimizer", None)
        if isinstance(inner, TandemAdam) and hasattr(o, "get_grad_stats_parallel_group"):
            inner.grad_stats_group = o.get_grad_stats_parallel_group()
    return optimizer
