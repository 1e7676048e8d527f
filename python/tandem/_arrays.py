"""The engine's state arrays in Python, from the one table in C++
(``tandem._C.state_arrays()``, python/ext/arrays.h): their names, dtypes and components,
which ones a tensor keeps, and the re-encodings every front end shares (one tensor or a
whole snapshot into other formats, through tandem::ConvertSnapshot)."""

import numpy as np
import torch

from tandem import _C

TABLE = _C.state_arrays()
NAMES = tuple(a["name"] for a in TABLE)
BF16 = frozenset(a["name"] for a in TABLE if a["bf16"])
QUANT_GROUP = _C.QUANT_GROUP  # elements per q8 scale (docs/numerics.md)
# As snapshot dicts hold them (NumPy; bf16 bit patterns as int16).
NUMPY = {a["name"]: np.dtype(a["dtype"]) for a in TABLE}
# As state dicts hold them: bf16 bit patterns as torch.bfloat16.
TORCH = {a["name"]: torch.bfloat16 if a["bf16"] else getattr(torch, a["dtype"])
         for a in TABLE}
# As the bit patterns cross where bf16 is not wanted (int16 for bf16).
BITS = {a["name"]: getattr(torch, a["dtype"]) for a in TABLE}
COMPONENTS = ("master", "momentum", "variance")
OF_COMPONENT = {c: tuple(a["name"] for a in TABLE if a["component"] == c) for c in COMPONENTS}
# The fp32 array of each component.
F32 = {c: next(a["name"] for a in TABLE if a["component"] == c and a["dtype"] == "float32")
       for c in COMPONENTS}


def has_momentum(algorithm, hyper):
    """HasMomentum in include/tandem/types.h."""
    return algorithm != "sgd" or float(hyper["momentum"]) != 0.0


def expected(algorithm, formats, hyper, numel):
    """Array name -> entry count that a tensor of `numel` elements keeps in `formats` under
    `algorithm` and its group's `hyper` (the engine's ArrayEntries, engine/state_arrays.h:
    ValidateSnapshot's rule; an empty shard keeps the same names with 0 entries)."""
    return _C.array_entries(algorithm, tuple(formats), float(hyper.get("momentum", 0.0)),
                            int(numel))


def engine_array(name, a):
    """Array `name` of a state dict (a tensor) as snapshot dicts hold it: flat, on the
    CPU, bf16 bit patterns as int16, a NumPy array."""
    a = a.detach().cpu().reshape(-1)
    if name in BF16:
        a = a.view(torch.int16)
    return a.contiguous().numpy()


def convert(snap, master, momentum, variance):
    """`snap` in other formats (tandem::ConvertSnapshot); `snap` itself when equal."""
    if (snap["master"], snap["momentum"], snap["variance"]) == (master, momentum, variance):
        return snap
    converter = getattr(_C, "convert_snapshot", None)
    if converter is None:
        raise RuntimeError(
            "converting state from master=%s,m=%s,v=%s to master=%s,m=%s,v=%s needs "
            "tandem._C.convert_snapshot, which this build lacks (built without the "
            "checkpoint/ library)" % (snap["master"], snap["momentum"], snap["variance"],
                                      master, momentum, variance))
    return converter(snap, master, momentum, variance)


def convert_tensor(snap, tensor, have, want):
    """Snapshot tensor dict `tensor` of snapshot `snap` (its arrays in formats `have`,
    a (master, momentum, variance) tuple) in formats `want`: one tensor's work."""
    named = dict(zip(COMPONENTS, have))
    mini = {"algorithm": snap["algorithm"], "groups": snap["groups"], "step": snap["step"],
            "metadata": "", "tensors": [dict(tensor, formats=named)], **named}
    target = dict(zip(COMPONENTS, want))
    return _C.convert_snapshot(mini, *want, tensor_formats=[target])["tensors"][0]


def decode_f32(snap, tensor, formats):
    """{component: fp32 NumPy array} of snapshot tensor dict `tensor` (in `formats`)."""
    if tuple(formats) != ("f32", "f32", "f32"):
        tensor = convert_tensor(snap, tensor, formats, ("f32", "f32", "f32"))
    return {c: np.asarray(tensor[F32[c]], dtype=np.float32)
            for c in COMPONENTS if F32[c] in tensor}


def encode_f32(snap, tensor, formats, values):
    """Snapshot tensor dict `tensor` (in `formats`) with the components in `values`
    ({component: fp32 NumPy array}) replaced, encoded in `formats`; the other components
    are copied exactly."""
    t = dict(tensor)
    have = list(formats)
    for component, value in values.items():
        for key in OF_COMPONENT[component]:
            t.pop(key, None)
        t[F32[component]] = np.ascontiguousarray(value, dtype=np.float32)
        have[COMPONENTS.index(component)] = "f32"
    if tuple(have) != tuple(formats):
        t = convert_tensor(snap, t, tuple(have), tuple(formats))
    return t
