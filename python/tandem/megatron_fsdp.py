"""Megatron-FSDP's optimizer under its documented name: tandem.megatron.fsdp's public
names, its ``__all__`` (docs/megatron_fsdp.md)."""

from tandem.megatron.fsdp import *  # noqa: F401,F403
