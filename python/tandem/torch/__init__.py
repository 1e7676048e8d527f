"""PyTorch optimizers backed by Tandem's HybridOptimizer (docs/python.md, with an example):
AdamW, Adam, Lion and SGD subclass :class:`torch.optim.Optimizer` and follow torch.optim's
semantics. This module holds the algorithms (their defaults and hyper-parameters); their
base, :class:`TandemOptimizer` (_optimizer.py), the rest. DTensor parameters (FSDP2's
``fully_shard``, HSDP): docs/distributed.md."""

try:
    import torch as _torch  # noqa: F401
except ImportError as _e:  # depends on the machine
    raise ImportError(
        "tandem.torch needs PyTorch, which is not importable here (%s). Install the torch "
        "build matching your CUDA version (pip install torch), or install Tandem with its "
        "torch extra from its source tree: pip install '.[torch]' (the distribution is "
        "tandem-optim; 'tandem' on PyPI is another project)." % (_e,)) from _e

from tandem._core import options as _options
from tandem._core.warnings import (EarlyStartAccumulationWarning, RebindWarning,  # noqa: F401
                                   SkippedStepWarning, TandemWarning)
from tandem.torch._optim_state import export_masters, from_torch_state, to_torch_state
from tandem.torch._optimizer import StepResult, TandemOptimizer
from tandem.torch._optimizer import _rebuilt  # noqa: F401 -- the name pickles hold

__all__ = ["AdamW", "Adam", "Lion", "SGD", "StepResult", "TandemOptimizer", "TandemWarning",
           "SkippedStepWarning", "EarlyStartAccumulationWarning", "RebindWarning",
           "export_masters", "from_torch_state", "to_torch_state"]


def _value(group, key, where):
    return _options.number(group[key], "%s: %s" % (where, key))


class AdamW(TandemOptimizer):
    """AdamW (decoupled weight decay), as torch.optim.AdamW. lr, betas, eps,
    weight_decay: as torch's (per group); amsgrad, maximize: must be False; **options:
    the Tandem options of TandemOptimizer."""

    _ALGORITHM = "adamw"
    _DEFAULT_WEIGHT_DECAY = 1e-2

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=None,
                 *, amsgrad=False, maximize=False, **options):
        for name, on in (("amsgrad", amsgrad), ("maximize", maximize)):
            if on:
                raise ValueError("%s is not supported by tandem" % name)
        if weight_decay is None:
            weight_decay = self._DEFAULT_WEIGHT_DECAY
        defaults = dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay)
        super().__init__(params, defaults, **options)

    def _hyper(self, group, where="param group"):
        b1, b2 = _options.pair(group["betas"], where + ": betas")
        return dict(beta1=b1, beta2=b2, eps=_value(group, "eps", where),
                    weight_decay=_value(group, "weight_decay", where), momentum=0.0,
                    dampening=0.0, nesterov=False)


class Adam(AdamW):
    """Adam with L2 weight decay (added to the gradient), as torch.optim.Adam."""

    _ALGORITHM = "adam"
    _DEFAULT_WEIGHT_DECAY = 0.0


class Lion(TandemOptimizer):
    """Lion (Chen et al. 2023) with decoupled weight decay. betas = (beta1, beta2): beta1
    interpolates the update direction, beta2 decays the momentum. ``variance`` must stay
    "f32" (Lion keeps no second moment)."""

    _ALGORITHM = "lion"

    def __init__(self, params, lr=1e-4, betas=(0.9, 0.99), weight_decay=0.0, **options):
        defaults = dict(lr=lr, betas=betas, weight_decay=weight_decay)
        super().__init__(params, defaults, **options)

    def _hyper(self, group, where="param group"):
        b1, b2 = _options.pair(group["betas"], where + ": betas")
        return dict(beta1=b1, beta2=b2, eps=1e-8,
                    weight_decay=_value(group, "weight_decay", where), momentum=0.0,
                    dampening=0.0, nesterov=False)


class SGD(TandemOptimizer):
    """SGD with momentum, dampening, Nesterov and L2 weight decay, as torch.optim.SGD.
    ``momentum`` is the momentum factor; the momentum buffer's format is
    ``momentum_format`` ("f32" or "q8")."""

    _ALGORITHM = "sgd"

    def __init__(self, params, lr=1e-3, momentum=0.0, dampening=0.0, weight_decay=0.0,
                 nesterov=False, *, maximize=False, **options):
        if maximize:
            raise ValueError("maximize is not supported by tandem")
        if isinstance(momentum, str):
            raise ValueError("SGD's momentum is the momentum factor (a number), got %r; "
                             "choose the momentum buffer's format with momentum_format="
                             % (momentum,))
        defaults = dict(lr=lr, momentum=momentum, dampening=dampening,
                        weight_decay=weight_decay, nesterov=nesterov)
        super().__init__(params, defaults, **options)

    def _hyper(self, group, where="param group"):
        return dict(beta1=0.9, beta2=0.999, eps=1e-8,
                    weight_decay=_value(group, "weight_decay", where),
                    momentum=_value(group, "momentum", where),
                    dampening=_value(group, "dampening", where),
                    nesterov=_options.flag(group["nesterov"], where + ": nesterov"))

