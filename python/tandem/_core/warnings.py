"""The warnings Tandem's front ends emit: one class per concept, shared by tandem.torch and
tandem.megatron (each re-exports them), and ``warn``, which attributes a warning to the
caller's line."""

import os
import sys
import warnings

import torch


class TandemWarning(UserWarning):
    """Base class of the warnings Tandem emits."""


class SkippedStepWarning(TandemWarning):
    """A step found a non-finite gradient (on some rank, in sharded training) and changed
    nothing (``opt.skipped_steps`` counts them). Silence with
    ``warnings.simplefilter("ignore", tandem.torch.SkippedStepWarning)``."""


class RebindWarning(TandemWarning):
    """The optimizer rebuilt its engine (param_groups changed, parameters or gradient
    buffers reallocated after construction, or a parameter frozen at construction got a
    gradient), copying its whole state: cheap once, costly every step. ``opt.rebinds``
    counts rebinds."""


class EarlyStartAccumulationWarning(TandemWarning):
    """early_start saw a second gradient for a parameter in one step (gradient
    accumulation): the engine redoes the early work, so results are exact but the first
    copies were wasted. Run the micro-batches but the last in ``opt.accumulating()``."""


# The folders of the tandem package and of torch, with the separator ("torch/" is not
# "torchvision/").
_SKIP = (os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep,
         os.path.dirname(os.path.abspath(torch.__file__)) + os.sep)


def warn(message, category):
    """warnings.warn attributed to the caller's line: the first frame outside the tandem
    package and torch (whose optimizer wrappers differ between versions)."""
    frame, level = sys._getframe(1), 2
    while frame is not None and frame.f_code.co_filename.startswith(_SKIP):
        frame, level = frame.f_back, level + 1
    warnings.warn(message, category, stacklevel=level)


def warn_skipped(grad_norm, count):
    """Warns (SkippedStepWarning) that a step with gradient norm `grad_norm` was skipped,
    the count-th so far."""
    warn("tandem: non-finite gradient (norm %r): step skipped, nothing changed (%d skipped "
         "so far)" % (grad_norm, count), SkippedStepWarning)

