"""Arguments of the front ends, checked and normalised before the engine is built: the
params argument, param groups and their hyper-parameters (the same checks at
construction, add_param_group, every step and every load), the state format spellings
and the engine's options (checked in C++). Every refusal is a ValueError (or TypeError,
as torch.optim raises) naming the argument, parameter and value."""

import math
import numbers

import torch as _torch

from tandem import _C
from tandem._core import dist as _dist


# The parameter and gradient dtypes the engine steps, by their engine names.
DTYPE_NAMES = {_torch.float32: "f32", _torch.bfloat16: "bf16", _torch.float16: "f16"}


def is_int(x):
    return isinstance(x, numbers.Integral) and not isinstance(x, bool)


def number(value, where):
    """A hyper-parameter's value as a float: a real number, or a one-element real tensor
    (torch.optim accepts tensor learning rates and betas). TypeError naming `where`
    otherwise."""
    if isinstance(value, _torch.Tensor):
        if (value.numel() != 1 or value.is_complex() or value.dtype == _torch.bool
                or _dist.is_dtensor(value)):
            raise TypeError("%s must be a number or a one-element real tensor, got a tensor "
                            "of shape %s and dtype %s"
                            % (where, tuple(value.shape), value.dtype))
        return float(value.item())
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError("%s must be a number, got %r" % (where, value))
    return float(value)


def lr_value(value, where):
    """A group's learning rate as a float, finite and >= 0 (ValueError), a number or a
    one-element tensor (TypeError otherwise)."""
    lr = number(value, where + ": lr")
    if not math.isfinite(lr) or lr < 0:
        raise ValueError("%s: lr must be finite and >= 0, got %r (the group's learning "
                         "rate)" % (where, lr))
    return lr


def pair(value, where):
    """betas as two floats: a tuple or list of two numbers (TypeError for another type,
    ValueError for another length)."""
    if not isinstance(value, (tuple, list)):
        raise TypeError("%s must be a pair (beta1, beta2) of numbers, got %r" % (where, value))
    if len(value) != 2:
        raise ValueError("%s must be a pair (beta1, beta2) of numbers, got %d values: %r"
                         % (where, len(value), tuple(value)))
    return number(value[0], where + "[0]"), number(value[1], where + "[1]")


def flag(value, where):
    """A boolean hyper-parameter (nesterov): a bool or the integers 0 and 1."""
    if isinstance(value, bool) or (is_int(value) and value in (0, 1)):
        return bool(value)
    raise TypeError("%s must be a bool, got %r" % (where, value))


def byte_count(value, name):
    """`value`, an integer >= 0 (a number of bytes); ValueError naming `name` otherwise."""
    if not is_int(value) or value < 0:
        raise ValueError("%s must be an integer >= 0 (bytes), got %r" % (name, value))
    return value


def auto_fraction(fields):
    """Whether the engine options `fields` ask for offload_fraction="auto" (the key is then
    removed: the front end sets the starting fraction); ValueError for another string."""
    value = fields.get("offload_fraction")
    if not isinstance(value, str):
        return False
    if value != "auto":
        raise ValueError('offload_fraction must be a number in [0, 1] or "auto", got %r'
                         % (value,))
    del fields["offload_fraction"]
    return True


def pick_format(what, new_name, new, old_name, old):
    """One state format from its two spellings (format_name= and the older name=)."""
    if new is not None and old is not None:
        raise ValueError("%s format given twice: pass %s= or %s=, not both"
                         % (what, new_name, old_name))
    value = new if new is not None else old
    if value is None:
        return "f32"
    if not isinstance(value, str):
        raise ValueError("%s must be a format name (a str), got %r" % (new_name, value))
    return value


def label(name, p):
    return "parameter '%s' (shape %s, %s)" % (name, tuple(p.shape), p.dtype)


# torch.optim's words for a set inside a param group (it accepts a bare set of tensors,
# whose order, and so the state dict's numbering, changes between runs: refused here too).
_SET_MESSAGE = ("optimizer parameters need to be organized in ordered collections, but the "
                "ordering of tensors in sets will change between runs. Please use a list "
                "instead.")


def normalize_params(params, module):
    """torch.optim's params argument as a list of group dicts whose "params" are tensors
    and, for named parameters (``(name, tensor)`` pairs, torch >= 2.4; or module=),
    whose "param_names" hold the names. Raises ValueError for a tensor given twice."""
    if isinstance(params, _torch.Tensor) or not hasattr(params, "__iter__"):
        raise TypeError("params argument given to the optimizer should be an iterable of "
                        "Tensors, (name, Tensor) pairs or dicts, but got %s"
                        % _torch.typename(params))
    if isinstance(params, (set, frozenset)):
        raise TypeError(_SET_MESSAGE)
    groups = list(params)
    if not groups:
        raise ValueError("optimizer got an empty parameter list")
    if not isinstance(groups[0], dict):
        groups = [{"params": groups}]
    module_names = None
    if module is not None:
        if not isinstance(module, _torch.nn.Module):
            raise TypeError("module must be a torch.nn.Module (its named_parameters() name "
                            "the parameters), got %s" % _torch.typename(module))
        module_names = {id(p): n for n, p in module.named_parameters()}
    seen = {}
    out = [normalize_group(group, g, module_names, seen) for g, group in enumerate(groups)]
    check_named(out)
    return out


def normalize_group(group, g, module_names=None, seen=None):
    """One param group (a dict) as normalize_params returns it: "params" a list of tensors,
    "param_names" the names when named. seen: {id(tensor): label} of the tensors already
    taken (by earlier groups), updated; a tensor in it raises ValueError."""
    if not isinstance(group, dict):
        raise TypeError("param group %d is a %s, not a dict" % (g, type(group).__name__))
    if "params" not in group:
        raise ValueError("param group %d has no 'params'" % g)
    group = dict(group)
    items = group["params"]
    if isinstance(items, _torch.Tensor):
        items = [items]
    elif isinstance(items, (set, frozenset)):
        raise TypeError(_SET_MESSAGE)
    tensors, names = [], []
    for item in items:
        if isinstance(item, tuple):
            if len(item) != 2 or not isinstance(item[0], str):
                raise TypeError("group %d: a named parameter is a (str, Tensor) pair, "
                                "got %r" % (g, item))
            names.append(item[0])
            item = item[1]
        if not isinstance(item, _torch.Tensor):
            raise TypeError("group %d: optimizer can only optimize Tensors, got %s"
                            % (g, _torch.typename(item)))
        tensors.append(item)
    if names and len(names) != len(tensors):
        raise ValueError("group %d: all parameters of a group must be named or none "
                         "(%d of %d named)" % (g, len(names), len(tensors)))
    if not names and "param_names" in group:
        names = list(group["param_names"])
        if len(names) != len(tensors):
            raise ValueError("group %d: %d param_names for %d params"
                             % (g, len(names), len(tensors)))
    if not names and module_names is not None:
        for j, p in enumerate(tensors):
            if id(p) not in module_names:
                raise ValueError("group %d param %d (shape %s) is not a parameter of "
                                 "the module given as module=" % (g, j, tuple(p.shape)))
            names.append(module_names[id(p)])
    seen = {} if seen is None else seen
    for j, p in enumerate(tensors):
        where = "'%s'" % names[j] if names else "group %d param %d" % (g, j)
        if id(p) in seen:
            raise ValueError("parameter %s (shape %s, %s) appears twice (first as %s); "
                             "give each tensor to the optimizer once"
                             % (where, tuple(p.shape), p.dtype, seen[id(p)]))
        seen[id(p)] = where
    group["params"] = tensors
    if names:
        group["param_names"] = names
    return group


def check_named(groups):
    """Every group named (param_names) or none, as torch >= 2.4 requires."""
    named = ["param_names" in group for group in groups]
    if any(named) and not all(named):
        raise ValueError("all param groups must be named or none (groups %s are named)"
                         % [g for g, n in enumerate(named) if n])


def check_structure(param_groups):
    """param_groups as they are at a step: each group a dict whose "params" is a list or
    tuple of tensors, no tensor twice (TypeError/ValueError naming the group and
    position, as at construction)."""
    seen = {}
    for g, group in enumerate(param_groups):
        if not isinstance(group, dict) or "params" not in group:
            raise ValueError("param_groups[%d] must be a dict with 'params'" % g)
        params = group["params"]
        if isinstance(params, (set, frozenset)):
            raise TypeError("param_groups[%d]['params']: %s" % (g, _SET_MESSAGE))
        if not isinstance(params, (list, tuple)):
            raise TypeError("param_groups[%d]['params'] must be a list of tensors, got %s"
                            % (g, type(params).__name__))
        for j, p in enumerate(params):
            if not isinstance(p, _torch.Tensor):
                raise TypeError("param_groups[%d]['params'][%d]: optimizer can only "
                                "optimize Tensors, got %s" % (g, j, _torch.typename(p)))
            if id(p) in seen:
                raise ValueError("param_groups[%d]['params'][%d] (shape %s, %s) is also "
                                 "%s; give each tensor to the optimizer once"
                                 % (g, j, tuple(p.shape), p.dtype, seen[id(p)]))
            seen[id(p)] = "param_groups[%d]['params'][%d]" % (g, j)


def given_names(group):
    """A group's param_names when they name each of its params, else None."""
    names = group.get("param_names")
    if (isinstance(names, (list, tuple)) and len(names) == len(group["params"])
            and all(isinstance(n, str) for n in names)):
        return names
    return None


def layout(param_groups, include):
    """The engine's tensors for param_groups: (entries, indices, left_out). entries:
    (parameter, engine name, group) of every parameter for which include(p) holds, in
    param_groups order; indices: each one's torch state_dict index (its position over all
    groups); left_out: (label, parameter) of the others. An unnamed parameter is named
    "g<group>.p<index>" (Note [Rebinding] in engine.py: the index follows
    param_groups)."""
    entries, indices, left_out = [], [], []
    index = 0
    for g, group in enumerate(param_groups):
        given = given_names(group)
        for j, p in enumerate(group["params"]):
            name = given[j] if given else None
            if include(p):
                entries.append((p, name if name else "g%d.p%d" % (g, index), g))
                indices.append(index)
            else:
                left_out.append(("'%s'" % name if name else "group %d param %d" % (g, j), p))
            index += 1
    return entries, indices, left_out


def no_steppable_parameter(left_out, steppable_dtypes):
    """The ValueError for param_groups without a parameter the engine can step."""
    unsteppable = [(where, p) for where, p in left_out if p.dtype not in steppable_dtypes]
    if unsteppable:
        where, p = unsteppable[0]
        return ValueError("optimizer got no parameter it can step: %s has dtype %s; tandem "
                          "steps float32, bfloat16 and float16 parameters that require grad"
                          % (where, p.dtype))
    return ValueError("optimizer got no parameter that requires grad")


# Note [torch.optim's flags in a param group] (docs/python.md, the table of differences):
# torch.optim keeps its flags per group, so every path that checks a group
# (group_values) refuses those the engine cannot apply when true; foreach, fused and
# capturable (how torch runs the same update) are accepted and kept.
_REFUSED_FLAGS = (
    ("maximize", ("adamw", "adam", "lion", "sgd"),
     "the engine descends every group; ascend by negating the loss"),
    ("amsgrad", ("adamw", "adam"), "the engine keeps no max_exp_avg_sq"),
    ("differentiable", ("adamw", "adam", "lion", "sgd"),
     "the engine's step is not an autograd operation"),
)


def check_torch_flags(algorithm, group, where):
    """ValueError naming `where` and the key for a torch.optim flag in `group` that the
    engine cannot apply (Note [torch.optim's flags in a param group])."""
    for key, algorithms, why in _REFUSED_FLAGS:
        if algorithm not in algorithms or key not in group:
            continue
        value = group[key]
        try:
            on = bool(value)  # as torch.optim reads it (`if maximize:`)
        except (RuntimeError, TypeError, ValueError):  # no truth value (a tensor of many)
            on = True
        if on:
            raise ValueError("%s: %s=%r is not supported by tandem (%s); set it to False "
                             "or leave the key out" % (where, key, value, why))


def group_values(algorithm, hyper, g, group, where=None):
    """(lr, engine hyper-parameters) of param group `group` (number g), checked as the
    constructor checks them: TypeError for a value of the wrong type, ValueError for one
    out of range (tandem._C.check_hyper_params), a missing key or a refused torch.optim
    flag, each naming the group and the key. hyper(group, where) maps a group to the
    engine's fields. Changes nothing."""
    where = "group %d" % g if where is None else where
    check_torch_flags(algorithm, group, where)
    try:
        lr = lr_value(group["lr"], where)
        values = hyper(group, where)
    except KeyError as e:
        raise ValueError("%s has no key %r" % (where, e.args[0])) from None
    _C.check_hyper_params(algorithm, dict(values, lr_scale=1.0), where)
    return lr, values


def max_grad_norm(value):
    """`value` as the engine's StepOptions takes it (checked there; None: 0, no clipping)."""
    options = _C.StepOptions() if value is None else _C.StepOptions(max_grad_norm=value)
    return options.max_grad_norm


def config(formats, fields, front_end):
    """The tandem._C.OptimizerConfig of a front end's keyword arguments `fields` (each
    checked in C++) with the state formats; a field the front end sets itself
    (`front_end`) is a TypeError naming it."""
    for name in fields:
        if name in front_end:
            raise TypeError("unexpected keyword argument %r (the optimizer sets it)" % name)
    return _C.OptimizerConfig(master=formats[0], momentum=formats[1], variance=formats[2],
                              **fields)
