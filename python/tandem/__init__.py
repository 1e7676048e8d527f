"""Tandem: the optimizer step on a GPU and its host at once.

The PyTorch optimizers live in :mod:`tandem.torch` (``AdamW``, ``Adam``, ``Lion``,
``SGD``); :func:`tandem.plan` is the memory-budget planner; :mod:`tandem.dcp` checks
torch.distributed.checkpoint files. :mod:`tandem._C` is the pointer-level extension they
are built on; it does not link libtorch.
"""

# The error classes: one per kind of engine error (python/ext/errors.h: which built-ins).
from tandem._C import (CheckpointCorruptError, CheckpointIOError, CudaError,  # noqa: F401
                       Error, InternalError, InvalidArgumentError, OutOfMemoryError,
                       UnsupportedError, __version__, cuda_device_available)
from tandem.planner._calibrate import (calibrate_binding, calibrate_training,  # noqa: F401
                                       measure_binding_overhead, measure_training_throughput)
from tandem.planner._plan import Largest, Plan, largest, machine_rates, plan  # noqa: F401

__all__ = ["cuda_device_available", "plan", "Plan", "largest", "Largest", "machine_rates",
           "calibrate_binding", "measure_binding_overhead", "calibrate_training",
           "measure_training_throughput", "Error", "InvalidArgumentError",
           "CheckpointCorruptError", "CheckpointIOError", "CudaError", "OutOfMemoryError",
           "UnsupportedError", "InternalError", "__version__"]
