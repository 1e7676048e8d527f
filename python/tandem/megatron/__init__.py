"""Megatron-Core's distributed optimizer stepping through Tandem's engine (docs/megatron.md):
:class:`TandemAdam` takes TransformerEngine FusedAdam's place inside Megatron's
DistributedOptimizer in its precision-aware mode, over the bf16 shards and their
``decoupled_grad`` fp32 gradients (read in place); the only masters and moments are the
engine's. Megatron keeps everything around the update; the engine steps with clipping off
and a loss scale of 1.
"""

import torch as _torch

from tandem._core.warnings import SkippedStepWarning
from tandem.megatron._adam import (PRECISION_AWARE, TandemAdam, build_with, inner_optimizers,
                                   refuse_config, require_megatron_core)

__all__ = ["TandemAdam", "get_megatron_optimizer", "tandem_optimizers",
           "SkippedStepWarning"]


def tandem_optimizers(megatron_optimizer):
    """The TandemAdam instances inside a Megatron optimizer (ChainedOptimizer or one)."""
    return [inner for _, inner in inner_optimizers(megatron_optimizer, TandemAdam)]


def _refuse(config, model_chunks):
    """ValueError for the configurations the adapter does not support, and why."""
    refuse_config(config)
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
    """megatron.core.optimizer.get_megatron_optimizer with TandemAdam as the inner optimizer,
    built by Megatron's own function from a copy of ``config`` (not changed) with the
    precision-aware settings on; TransformerEngine need not be installed. ``options``:
    TandemAdam's Tandem options. Every TandemAdam's ``grad_stats_group`` is its
    DistributedOptimizer's, so a non-finite gradient anywhere skips the step everywhere.
    Model chunks wrapped in Megatron-FSDP (``ddp_config.use_megatron_fsdp``) get
    tandem.megatron_fsdp's optimizer instead (docs/megatron_fsdp.md).

    Raises ValueError for what is not supported (docs/megatron.md, "What is supported"),
    RuntimeError for a megatron-core release that is not (docs/megatron.md, "Versions").
    """
    if not model_chunks:
        raise ValueError("model_chunks is empty")
    require_megatron_core()
    # Only what is given: Megatron's defaults for the rest.
    given = dict(config_overrides=config_overrides, pg_collection=pg_collection,
                 dump_param_to_param_group_map=dump_param_to_param_group_map)
    megatron_kwargs = dict({key: value for key, value in given.items() if value is not None},
                           use_gloo_process_groups=use_gloo_process_groups)
    if getattr(getattr(model_chunks[0], "ddp_config", None), "use_megatron_fsdp", False):
        from tandem.megatron import fsdp
        return fsdp.get_megatron_optimizer(config, model_chunks, megatron_kwargs, options)
    _refuse(config, model_chunks)

    def make_adam(params, **kwargs):
        for key in ("exp_avg_dtype", "exp_avg_sq_dtype", "master_weight_dtype"):
            kwargs.pop(key, None)  # placeholders; the formats come from options
        return TandemAdam(params, **kwargs, **options)

    optimizer = build_with(make_adam, config, model_chunks, megatron_kwargs, **PRECISION_AWARE,
                           main_params_dtype=_torch.float32, store_param_remainders=False,
                           # placeholders Megatron allocates at load:
                           exp_avg_dtype=_torch.float32, exp_avg_sq_dtype=_torch.float32)
    for o, inner in inner_optimizers(optimizer, TandemAdam):
        if hasattr(o, "get_grad_stats_parallel_group"):
            inner.grad_stats_group = o.get_grad_stats_parallel_group()
    return optimizer
