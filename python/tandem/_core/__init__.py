"""The front-end core, shared by tandem.torch and tandem.megatron (Megatron-FSDP too): the
engine a front end builds and drives (engine.py), its gradients and hooks, options, the
engine state's layout and the extension's functions the front ends need. It imports no
front end (tests/python/test_package_boundaries.py). Importing the package imports none
of its modules."""
