"""The engine's state arrays as the front ends see them: the one Python reader of the
C++ table (``tandem._C.state_arrays()``, ``_C.array_entries``; Note [State arrays] in
engine/state_arrays.h): ``EngineState`` lists each engine tensor's arrays and reads them
back from a state dict, checked; the re-encodings (tandem::ConvertSnapshot) follow.

Note [Array shapes]: the arrays of a tensor, or of a shard, of shape S have shape S,
except the per-group arrays (the q8 scales): S[:-1] + (K // 32,) when the last dimension
is a whole number of groups, which a shard of rows keeps (Note [Shard-safe quantization
groups] in dist.py); else one per 32 elements of the flat tensor (never sharded with q8
moments). The one shape rule of the FSDP2, DCP and Megatron-FSDP state dicts.
"""

import math
from typing import NamedTuple

import numpy as np
import torch

from tandem import _C
from tandem._core import dist as _dist
from tandem._core.checks import need

_TABLE = {a["name"]: a for a in _C.state_arrays()}
NAMES = tuple(_TABLE)  # in the table's order
QUANT_GROUP = _C.QUANT_GROUP  # elements per q8 scale (docs/numerics.md)
COMPONENTS = ("master", "momentum", "variance")
# The fp32 array of each component.
F32 = {c: next(n for n, a in _TABLE.items() if a["component"] == c and a["dtype"] == "float32")
       for c in COMPONENTS}


def kept(algorithm, formats, hyper, numel):
    """Array name -> entries that a tensor of `numel` elements keeps in `formats` (master,
    momentum, variance) under `algorithm` and its group's `hyper` (the engine's
    ArrayEntries; an empty shard keeps the same names with 0 entries)."""
    return _C.array_entries(algorithm, tuple(formats), float(hyper.get("momentum", 0.0)),
                            int(numel))


def components(algorithm, hyper):
    """The components ("master", "momentum", "variance") a tensor keeps under `algorithm`
    and `hyper` (the engine's HasMomentum and HasVariance)."""
    return {_TABLE[n]["component"] for n in kept(algorithm, ("f32",) * 3, hyper, 0)}


def array_shape(name, shape):
    """Shape of array `name` for a tensor, or a shard, of `shape` (Note [Array shapes])."""
    shape = tuple(shape)
    if not _TABLE[name]["per_group"]:
        return shape
    if shape and shape[-1] % QUANT_GROUP == 0:
        return shape[:-1] + (shape[-1] // QUANT_GROUP,)
    return ((math.prod(shape) + QUANT_GROUP - 1) // QUANT_GROUP,)


class Array(NamedTuple):
    """One state array of an engine tensor's local shard (the whole tensor where it is
    not sharded)."""
    name: str
    component: str       # "master", "momentum" or "variance"
    torch: torch.dtype   # as state dicts hold it (bf16 bit patterns as torch.bfloat16)
    bits: torch.dtype    # its bit patterns without bf16 (int16 for bf16)
    entries: int         # entries of the local shard (ArrayEntries)
    shape: tuple         # global shape (Note [Array shapes])
    local_shape: tuple   # the local shard's

    def tensor(self, values=None):
        """Snapshot array `values` (NumPy; None: zeros) as a tensor of dtype ``torch`` and
        the local shape, sharing its memory."""
        if values is None:
            return torch.zeros(self.local_shape, dtype=self.torch)
        values = torch.from_numpy(np.ascontiguousarray(values)).view(self.bits)
        return values.view(self.torch).reshape(self.local_shape)


def snapshot_array(name, tensor):
    """A tensor of array `name`'s entries as snapshot dicts hold it: flat, on the CPU,
    bf16 bit patterns as int16, a NumPy array of the table's dtype."""
    a = tensor.detach().cpu().reshape(-1)
    if a.dtype == torch.bfloat16:
        a = a.view(torch.int16)
    return a.contiguous().numpy().view(_TABLE[name]["dtype"])


class EngineState:
    """The state arrays of the tensors of one engine core (engine.py). ``first_rows``:
    each tensor's first global row on this rank where the front end places its shards
    itself (Megatron-FSDP's uneven shards); else DTensor's."""

    def __init__(self, core, first_rows=None):
        self.core = core
        self._first_rows = first_rows

    def arrays(self, k, hyper=None):
        """The arrays tensor k keeps, in the table's order: under its group's
        hyper-parameters, or `hyper` (a state dict's being loaded)."""
        core = self.core
        p = core.params[k]
        mine = _dist.local(p)
        if hyper is None:
            hyper = core.hypers[core.group_of[k]]
        out = []
        for name, entries in kept(core.algorithm, core.formats_of(k), hyper,
                                  mine.numel()).items():
            a = _TABLE[name]
            out.append(Array(name, a["component"],
                             torch.bfloat16 if a["bf16"] else getattr(torch, a["dtype"]),
                             getattr(torch, a["dtype"]), entries, array_shape(name, p.shape),
                             array_shape(name, mine.shape)))
        return out

    def entries(self, snap, tensor):
        """Each tensor's state-dict entry from snapshot `snap` (None: zeros at step 0):
        "step" (a float tensor) and ``tensor(k, array, values)`` for every array it keeps
        (values: the snapshot's NumPy array, None where it has none), unless None."""
        out = []
        for k in range(len(self.core.params)):
            t = None if snap is None else snap["tensors"][k]
            entry = {"step": torch.tensor(float(0 if t is None else t["step"]))}
            for a in self.arrays(k, None if t is None else snap["groups"][t["group"]]):
                value = tensor(k, a, None if t is None else t.get(a.name))
                if value is not None:
                    entry[a.name] = value
            out.append(entry)
        return out

    def first_row(self, k):
        """The first global row of tensor k's local shard (0 for a whole tensor)."""
        if self._first_rows is not None:
            return self._first_rows[k]
        p = self.core.params[k]
        if not _dist.is_dtensor(p) or _dist.shard_dim(p) is None or not p.shape:
            return 0
        from torch.distributed.tensor._utils import compute_local_shape_and_global_offset
        _, offset = compute_local_shape_and_global_offset(p.shape, p.device_mesh,
                                                          p.placements)
        return int(offset[0])

    def offset(self, k, array):
        """The local shard's first index in the global `array` of tensor k (shards are
        row ranges)."""
        return (self.first_row(k),) + (0,) * (len(array.shape) - 1) if array.shape else ()

    def read(self, k, entry, where, hyper=None, names=NAMES, local=None):
        """{name: snapshot array} of tensor k from the saved state-dict `entry`: every
        array k keeps (``arrays(k, hyper)``), each a tensor of its dtype and size; of a
        saved global array, ``local(array, tensor, where)`` takes this rank's part. Every
        name of `names` in `entry` must be one k keeps. Raises ValueError naming the
        first that is wrong (``where[name]``)."""
        arrays = self.arrays(k, hyper)
        keep = {a.name for a in arrays}
        for name in names:
            if name in entry and name not in keep:
                raise ValueError("%s has %r, which %s with master=%s,m=%s,v=%s does not keep"
                                 % ((where, name, self.core.algorithm)
                                    + tuple(self.core.formats_of(k))))
        out = {}
        for a in arrays:
            aw = "%s[%r]" % (where, a.name)
            got = need(entry, a.name, where)
            if not torch.is_tensor(got):
                raise ValueError("%s must be a tensor, got %s" % (aw, type(got).__name__))
            if got.dtype != a.torch:
                raise ValueError("%s has dtype %s, expected %s" % (aw, got.dtype, a.torch))
            if local is not None:
                got = local(a, got, aw)
            if got.numel() != a.entries:
                raise ValueError("%s has %d %selements, expected %d" % (
                    aw, got.numel(), "" if local is None else "local ", a.entries))
            out[a.name] = snapshot_array(a.name, got)
        return out


# ----------------------------------------------------------------------------------------
# Re-encodings (tandem::ConvertSnapshot)


def require_checkpoint():
    """Raises RuntimeError when the extension was built without the checkpoint/ library."""
    if not _C.has_checkpoint:
        raise RuntimeError("this build of tandem has no checkpoint support "
                           "(built without the checkpoint/ library)")


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
        for key in NAMES:
            if _TABLE[key]["component"] == component:
                t.pop(key, None)
        t[F32[component]] = np.ascontiguousarray(value, dtype=np.float32)
        have[COMPONENTS.index(component)] = "f32"
    if tuple(have) != tuple(formats):
        t = convert_tensor(snap, t, tuple(have), tuple(formats))
    return t
