"""The state arrays as the front ends see them (tandem/_core/state.py): the shape rule of
the DTensor state dicts against the engine's entry counts, and the version-3 state dict's
layout, pinned array by array (Note [Sharded state dict] in _sharded_state.py)."""

import math

import pytest
import torch
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.tensor import Shard, distribute_tensor

import tandem.torch
from tandem._core import state

pytestmark = pytest.mark.usefixtures("one_rank_group")

SHAPES = [(), (1,), (37,), (64,), (64, 64), (3, 96), (5, 33), (2, 3, 64)]


@pytest.mark.parametrize("formats", [("bf16+ecc8", "q8", "q8"), ("bf16+ecc16", "f32", "q8"),
                                     ("f32", "f32", "f32")])
@pytest.mark.parametrize("shape", SHAPES)
def test_array_shapes_hold_the_engine_entries(shape, formats):
    kept = state.kept("adamw", formats, {}, math.prod(shape))
    for name, entries in kept.items():
        assert math.prod(state.array_shape(name, shape)) == entries, name


def test_components_follow_the_engine():
    assert state.components("adamw", {}) == {"master", "momentum", "variance"}
    assert state.components("lion", {}) == {"master", "momentum"}
    assert state.components("sgd", {"momentum": 0.9}) == {"master", "momentum"}
    assert state.components("sgd", {"momentum": 0.0}) == {"master"}


# The version-3 state dict of AdamW (bf16+ecc8, q8, q8) over Shard(0) DTensors on a
# 1-rank mesh: each array's name, dtype and global shape, in order. The 1-D tensor keeps
# f32 moments (Note [Shard-safe quantization groups] in _dist.py).
LAYOUT = {
    (64, 64): [("master_bf16", torch.bfloat16, (64, 64)), ("ecc8", torch.int8, (64, 64)),
               ("m_codes", torch.int8, (64, 64)), ("m_scales", torch.bfloat16, (64, 2)),
               ("v_codes", torch.uint8, (64, 64)), ("v_scales", torch.bfloat16, (64, 2))],
    (3, 96): [("master_bf16", torch.bfloat16, (3, 96)), ("ecc8", torch.int8, (3, 96)),
              ("m_codes", torch.int8, (3, 96)), ("m_scales", torch.bfloat16, (3, 3)),
              ("v_codes", torch.uint8, (3, 96)), ("v_scales", torch.bfloat16, (3, 3))],
    (37,): [("master_bf16", torch.bfloat16, (37,)), ("ecc8", torch.int8, (37,)),
            ("m_f32", torch.float32, (37,)), ("v_f32", torch.float32, (37,))],
}


def test_sharded_state_dict_layout_and_its_bits():
    mesh = init_device_mesh("cpu", (1,))
    g = torch.Generator().manual_seed(0)
    whole = [torch.randn(s, generator=g) for s in LAYOUT]
    params = [torch.nn.Parameter(distribute_tensor(w, mesh, [Shard(0)])) for w in whole]
    opt = tandem.torch.AdamW(params, lr=1e-2, master_format="bf16+ecc8",
                             momentum_format="q8", variance_format="q8")
    for _ in range(2):
        for p in params:
            p.grad = distribute_tensor(torch.randn(p.shape, generator=g), mesh, [Shard(0)])
        opt.step()
    sd = opt.state_dict()
    assert sd["param_groups"][0]["tandem"]["version"] == 3
    snap = opt._core.snapshot()
    for k, shape in enumerate(LAYOUT):
        entry = sd["state"][k]
        assert list(entry) == ["step"] + [name for name, _, _ in LAYOUT[shape]]
        assert entry["step"].item() == 2.0
        for name, dtype, global_shape in LAYOUT[shape]:
            a = entry[name]
            assert a.dtype == dtype and tuple(a.shape) == global_shape, name
            assert tuple(a.placements) == tuple(params[k].placements)
            bits = a.to_local().reshape(-1)
            bits = bits.view(torch.int16) if dtype == torch.bfloat16 else bits
            assert torch.equal(bits, torch.from_numpy(snap["tensors"][k][name])), name

    # Whole tensors of the global shapes load as well as the DTensors do.
    whole_sd = {"state": {k: {n: (a.full_tensor() if n != "step" else a)
                              for n, a in e.items()} for k, e in sd["state"].items()},
                "param_groups": sd["param_groups"]}
    other = tandem.torch.AdamW(params, lr=1e-2, master_format="bf16+ecc8",
                               momentum_format="q8", variance_format="q8")
    other.load_state_dict(whole_sd)
    back = other._core.snapshot()
    for k in range(len(LAYOUT)):
        for name in snap["tensors"][k]:
            if name in state.NAMES:
                assert (back["tensors"][k][name] == snap["tensors"][k][name]).all(), name
