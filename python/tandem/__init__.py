"""Tandem: the optimizer step on a GPU and its host at once.

The PyTorch optimizers live in :mod:`tandem.torch` (``AdamW``, ``Adam``, ``Lion``,
``SGD``); :func:`tandem.plan` is the memory-budget planner; :mod:`tandem.dcp` checks
torch.distributed.checkpoint files. :mod:`tandem._C` is the pointer-level extension they
are built on; it does not link libtorch.
"""

from tandem._C import __version__, cuda_device_available  # noqa: F401
from tandem._calibrate import calibrate_binding, measure_binding_overhead  # noqa: F401
from tandem._planner import Plan, machine_rates, plan  # noqa: F401


class CheckpointCorruptError(ValueError):
    """A checkpoint's stored bytes or records do not check out, or its save did not
    finish. Raised by :mod:`tandem.dcp`, naming the file and, where one is at fault, the
    item, its byte range and both CRCs."""


__all__ = ["CheckpointCorruptError", "cuda_device_available", "plan", "Plan",
           "machine_rates", "calibrate_binding", "measure_binding_overhead", "__version__"]
