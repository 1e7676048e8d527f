"""The field checks of the state loads (state dicts, checkpoint metadata): each returns
the value it checked and raises ValueError naming the field it refuses."""

import math
import numbers
from collections.abc import Mapping

import torch

MAX_STEP = 1 << 53  # the largest step a state may hold (exact in a float)


def mapping(value, where):
    if not isinstance(value, Mapping):
        raise ValueError("%s must be a dict, got %s" % (where, type(value).__name__))
    return value


def need(value, key, where):
    if key not in mapping(value, where):
        raise ValueError("%s has no key %r" % (where, key))
    return value[key]


def integer(value, where, lo=None, hi=None):
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise ValueError("%s must be an int, got %r" % (where, value))
    value = int(value)
    if (lo is not None and value < lo) or (hi is not None and value > hi):
        raise ValueError("%s is %d, outside [%s, %s]" % (where, value, lo, hi))
    return value


def real(value, where, lo=None):
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise ValueError("%s must be a number, got %r" % (where, value))
    value = float(value)
    if not math.isfinite(value) or (lo is not None and value < lo):
        raise ValueError("%s must be finite%s, got %r"
                         % (where, "" if lo is None else " and >= %g" % lo, value))
    return value


def listing(value, where, length=None):
    if not isinstance(value, (list, tuple)):
        raise ValueError("%s must be a list, got %s" % (where, type(value).__name__))
    if length is not None and len(value) != length:
        raise ValueError("%s has %d entries, optimizer %d" % (where, len(value), length))
    return value


def step_value(value, where, hi):
    """A per-parameter step: an int, an integral float or a one-element tensor."""
    if torch.is_tensor(value):
        if value.numel() != 1:
            raise ValueError("%s must hold one value, has %d" % (where, value.numel()))
        value = value.item()
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise ValueError("%s must be a number, got %r" % (where, value))
    if not math.isfinite(value) or value != int(value):
        raise ValueError("%s must be a whole number, got %r" % (where, value))
    return integer(int(value), where, 0, hi)
