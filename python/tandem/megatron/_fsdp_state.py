"""The state dicts of tandem.megatron_fsdp.MegatronFSDPAdam: Tandem's arrays as DTensors
shaped like Megatron-FSDP's parameters, for torch.distributed.checkpoint (DCP) and
Megatron-Core's ``fsdp_dtensor`` checkpoints. docs/megatron_fsdp.md, "Checkpoints", has
the layout: per parameter ``step`` and the engine's arrays (``EngineState.arrays``,
_core/state.py) with *global* shapes (Note [Array shapes] in _core/state.py), local
tensors on the CPU, each in its own dtype; "tandem": the layout, version and formats.

Note [Uneven shards in DCP]: Megatron-FSDP's shards are row ranges of very different
sizes, often empty, never torch.chunk's, which DTensor's chunk metadata assumes (and
DTensor.full_tensor() hangs on them). Every array here carries its chunk on its local
tensor (``__create_chunk_list__``, ``__create_write_items__``, as Megatron-FSDP's
``preprocess_state_dict_for_uneven_dtensor`` attaches), its first row from
``megatron_fsdp_slice`` (Megatron-FSDP v1) without a collective, or else from one
all-gather of every shard's row count (v2 attaches no slice). Megatron-LM's save runs one
collective per DTensor in key order: every rank holds the same keys in the same order,
empty shards included, so those collectives pair up.

Note [SwiGLU halves]: Megatron-LM's fsdp_dtensor checkpoints split a gated MLP's
``linear_fc1`` (``[w; v]`` by rows) into ``<name>_w`` and ``<name>_v``
(``handle_swiglu_in_state_dict``), splitting the entries' ``exp_avg`` and ``exp_avg_sq``,
which Tandem's do not have. Tandem splits its entries itself, every array by rows (scales
included), into names those patterns do not match; a load joins the halves again.
"""

import math
import re
from collections.abc import Mapping

import torch

from tandem._core import dist as _dist
from tandem._core.state import COMPONENTS, EngineState, array_shape

LAYOUT = "megatron_fsdp"
VERSION = 1
NOT_LOADED = 0  # the version of a load template's header until DCP fills it

# Megatron-LM's SwiGLU parameter names (handle_swiglu_in_state_dict's patterns).
SWIGLU = re.compile(r"\.mlp\.(linear_fc1\.(weight|bias)|experts\.linear_fc1\.(weight|bias)\d+"
                     r"|experts\.local_experts\.\d+\.linear_fc1\.(weight|bias)"
                     r"|shared_experts\.linear_fc1\.(weight|bias))$")
HALVES = ("_w", "_v")


def first_rows(core):
    """Each engine tensor's first global row held by this rank (0 for a whole tensor): from
    its megatron_fsdp_slice, or else from one all-gather of every rank's local row counts
    over the shard group (shards follow the ranks' order: flat buffers cut in rank
    order). Note [Uneven shards in DCP]."""
    rows, missing = [], []
    for k, p in enumerate(core.params):
        mine = _dist.local(p)
        if not _dist.is_dtensor(p) or _dist.shard_dim(p) is None:
            rows.append(0)
            continue
        where = getattr(p, "megatron_fsdp_slice", None)
        if where is None:
            rows.append(None)
            missing.append(k)
            continue
        size = math.prod(tuple(p.shape)[1:])
        if where.stop - where.start != mine.numel() or where.start % size:
            raise ValueError("%s: megatron_fsdp_slice %s does not hold its local shard of "
                             "shape %s in whole rows of %d elements"
                             % (core.label(k), where, tuple(mine.shape), size))
        rows.append(where.start // size)
    if missing:
        import torch.distributed as dist
        p0 = core.params[missing[0]]
        group = p0.device_mesh.get_group(mesh_dim=_dist.shard_dim(p0))
        shards = [_dist.local(core.params[k]) for k in missing]
        mine = [int(t.shape[0]) if t.dim() else 0 for t in shards]
        every = [None] * dist.get_world_size(group)
        dist.all_gather_object(every, mine, group=group)
        rank = dist.get_rank(group)
        for j, k in enumerate(missing):
            rows[k] = sum(counts[j] for counts in every[:rank])
    return rows


def _attach_chunk(local, offsets):
    """Gives DCP `local`'s chunk of its DTensor: `offsets` in the global tensor."""
    from torch.distributed.checkpoint.metadata import (ChunkStorageMetadata, MetadataIndex,
                                                       TensorProperties)
    from torch.distributed.checkpoint.planner import (TensorWriteData, WriteItem,
                                                      WriteItemType)
    chunk = ChunkStorageMetadata(offsets=torch.Size(offsets), sizes=local.shape)

    def write_items(fqn, tensor):
        if local.numel() == 0:
            return []  # an empty shard writes nothing; the others cover the tensor
        return [WriteItem(type=WriteItemType.SHARD, index=MetadataIndex(fqn, chunk.offsets),
                          tensor_data=TensorWriteData(
                              chunk=chunk, properties=TensorProperties.create_from_tensor(local),
                              size=tensor.size()))]

    local.__create_chunk_list__ = lambda: [chunk]
    local.__create_write_items__ = write_items


def as_dtensor(local, p, shape, offsets):
    """`local` (from `offsets` on) as a DTensor of global `shape` like p, with its chunk
    attached; a plain tensor for a plain (or replicated) parameter."""
    if not _dist.is_dtensor(p):
        return local
    _attach_chunk(local, offsets)
    return _dist.wrap_like(local, p, shape)


# ----------------------------------------------------------------------------------------
# Saving


def header(opt, template=False):
    """The "tandem" entry of opt's state dicts; a load template's is unfilled."""
    return dict(layout=LAYOUT, version=NOT_LOADED if template else VERSION,
                algorithm=opt.algorithm, **dict(zip(COMPONENTS, opt._formats)))


def entries(opt, template):
    """Every engine tensor's entry {"step": tensor, array: DTensor}, in the engine's order.
    template: zeroed arrays and step 0, for DCP to load into (no snapshot taken);
    otherwise the engine's state, sharing memory with the cached snapshot (read-only)."""
    core = opt._core
    rows = first_rows(core)
    engine = EngineState(core, rows)

    def tensor(k, a, values):
        return as_dtensor(a.tensor(values if a.entries else None), core.params[k], a.shape,
                          engine.offset(k, a))
    return engine.entries(None if template else opt._access.snapshot(), tensor), rows


def split_halves(entry, p, first_row):
    """Note [SwiGLU halves]: (w entry, v entry) of a [w; v] parameter's entry."""
    half = int(p.shape[0]) // 2
    mine = int(_dist.local(p).shape[0]) if _dist.local(p).dim() else 0
    lo, hi = first_row, first_row + mine
    w_rows = max(0, min(hi, half) - lo)
    out = []
    for keep, start, shift in ((slice(0, w_rows), min(lo, half), 0),
                               (slice(w_rows, mine), max(lo, half), half)):
        e = {"step": entry["step"].clone()}
        for name, a in entry.items():
            if name != "step":
                shape = (half,) + tuple(a.shape[1:])
                e[name] = as_dtensor(_dist.local(a)[keep], p, shape,
                                     (start - shift,) + (0,) * (len(shape) - 1))
        out.append(e)
    return out


# ----------------------------------------------------------------------------------------
# Loading


def check_header(got, opt):
    """ValueError unless `got` is the header of this layout with this optimizer's
    algorithm and formats."""
    if not isinstance(got, Mapping) or got.get("layout") != LAYOUT:
        raise ValueError("the state dict holds no tandem.megatron_fsdp state (its 'tandem' "
                         "entry is %r): it was not saved by tandem.megatron_fsdp, or saved "
                         "by another optimizer" % (got,))
    if got.get("version") == NOT_LOADED:
        raise ValueError("the checkpoint holds no tandem.megatron_fsdp state: the load left "
                         "its 'tandem' entry unfilled (saved by another optimizer, such as "
                         "FusedAdam or torch.optim.AdamW?)")
    if got.get("version") != VERSION:
        raise ValueError("tandem.megatron_fsdp state dict version %r; this build reads %d"
                         % (got.get("version"), VERSION))
    mine = header(opt)
    for key in ("algorithm",) + COMPONENTS:
        if got.get(key) != mine[key]:
            raise ValueError("the state dict has %s=%r, this optimizer %s=%r; load it into "
                             "an optimizer with the same algorithm and formats"
                             % (key, got.get(key), key, mine[key]))


def joined(state, key, p, where):
    """The entry of `key` in `state`, or the join of its SwiGLU halves (Note [SwiGLU
    halves]); ValueError naming the key when neither is there."""
    if key in state:
        return state[key]
    names = [key + h for h in HALVES] if isinstance(key, str) else []
    if not names or not all(n in state for n in names):
        raise ValueError("%s has no entry %r (nor its halves %s)" % (where, key, names))
    w, v = state[names[0]], state[names[1]]
    entry = {"step": w.get("step")}
    for name, a in w.items():
        if name != "step" and name in v and torch.is_tensor(a) and torch.is_tensor(v[name]):
            both = torch.cat([_dist.local(a), _dist.local(v[name])])
            entry[name] = _dist.wrap_like(both, p, array_shape(name, p.shape))
    return entry


def local_arrays(opt, k, entry, where):
    """{name: snapshot array} of engine tensor k from a loaded entry, each checked: name,
    dtype, placements and local shape. ValueError naming the first that is wrong."""
    core = opt._core
    p = core.params[k]

    def local(a, got, aw):
        if _dist.is_dtensor(got):
            if not _dist.is_dtensor(p) or tuple(got.placements) != tuple(p.placements):
                raise ValueError("%s is a DTensor placed %s; the parameter is %s"
                                 % (aw, tuple(got.placements),
                                    tuple(getattr(p, "placements", ())) or "not a DTensor"))
        elif _dist.is_dtensor(p) and _dist.shard_dim(p) is not None:
            raise ValueError("%s is a plain tensor; a sharded parameter's arrays must be "
                             "DTensors placed like it (what state_dict() gave)" % aw)
        mine = _dist.local(got).detach().cpu()
        if tuple(mine.shape) != a.local_shape:
            raise ValueError("%s has local shape %s, expected %s (this rank's shard of %s)"
                             % (aw, tuple(mine.shape), a.local_shape, core.label(k)))
        return mine

    return EngineState(core).read(k, entry, where, names=[n for n in entry if n != "step"],
                                  local=local)
