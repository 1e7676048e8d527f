"""Megatron-FSDP's optimizer under its documented name: tandem.megatron.fsdp's public
names (docs/megatron_fsdp.md)."""

from tandem.megatron.fsdp import (MegatronFSDPAdam, fully_shard_optimizer, install,
                                  tandem_optimizers)

__all__ = ["MegatronFSDPAdam", "fully_shard_optimizer", "install", "tandem_optimizers"]
