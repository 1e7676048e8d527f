"""The engine core of the front ends, shared by tandem.torch, tandem.megatron and
tandem.megatron_fsdp. Importing the package imports none of its modules."""
