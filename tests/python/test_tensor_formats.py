"""Per-tensor state formats through the binding: the 9th field of a _C.HybridOptimizer
spec overrides a tensor's formats (TensorSpec::formats); snapshot dicts carry each
tensor's "formats"; dicts without them (older state dicts) take the snapshot's formats."""

import pytest
import torch

import tandem

Q8 = dict(master="bf16+ecc8", momentum="q8", variance="q8")
F32_MOMENTS = {"master": "bf16+ecc8", "momentum": "f32", "variance": "f32"}
GROUPS = [dict(lr_scale=1.0, weight_decay=0.01)]


_KEEP = []  # the buffers of every engine made here: an engine does not own them


def make(sizes, formats, seed=0):
    """bf16 parameters and gradients, and their engine specs with the given overrides."""
    gen = torch.Generator().manual_seed(seed)
    params = [torch.randn(n, generator=gen).to(torch.bfloat16) for n in sizes]
    grads = [torch.randn(n, generator=gen).to(torch.bfloat16) for n in sizes]
    specs = [("t%d" % i, p.numel(), "bf16", "bf16", p.data_ptr(), g.data_ptr(), 0, None,
              formats[i]) for i, (p, g) in enumerate(zip(params, grads))]
    _KEEP.append((params, grads))
    return params, grads, specs


def train(specs, steps=3, fraction=0.5, **formats):
    engine = tandem._C.HybridOptimizer(specs, "adamw", GROUPS, mode="host",
                                       offload_fraction=fraction, chunk_elements=64,
                                       **(formats or Q8))
    for _ in range(steps):
        engine.step(1e-2, max_grad_norm=1.0)
    return engine


def test_override_gives_each_tensor_its_global_bits():
    sizes = [1000, 64, 3, 777]
    overrides = [None, F32_MOMENTS, F32_MOMENTS, None]
    params, _, specs = make(sizes, overrides)
    mixed = train(specs).snapshot()
    assert mixed["master"] == "bf16+ecc8" and mixed["momentum"] == "q8"
    for i, t in enumerate(mixed["tensors"]):
        assert t["formats"] == (overrides[i] or Q8)
    assert "m_f32" in mixed["tensors"][1] and "m_codes" not in mixed["tensors"][1]
    for formats in (Q8, F32_MOMENTS):
        ref_params, _, ref_specs = make(sizes, [None] * len(sizes))
        ref = train(ref_specs, **formats).snapshot()
        for i in range(len(sizes)):
            if (overrides[i] or Q8) != formats:
                continue
            assert torch.equal(params[i].view(torch.int16), ref_params[i].view(torch.int16))
            for key, value in ref["tensors"][i].items():
                if hasattr(value, "shape"):
                    assert (mixed["tensors"][i][key] == value).all(), (i, key)


def test_snapshot_round_trip_and_older_dicts():
    sizes = [100, 40]
    _, _, specs = make(sizes, [None, F32_MOMENTS])
    engine = train(specs)
    snap = engine.snapshot()
    engine.restore(snap)
    # A dict without per-tensor formats: every tensor takes the snapshot's formats, which
    # fits an optimizer without overrides ...
    _, _, plain_specs = make(sizes, [None, None])
    plain = train(plain_specs)
    old = plain.snapshot()
    for t in old["tensors"]:
        del t["formats"]
    plain.restore(old)
    # ... but not one whose tensor 1 has f32 moments: refused, naming the tensor.
    with pytest.raises(ValueError, match="t1"):
        engine.restore(old)
    mismatch = engine.snapshot()
    mismatch["tensors"][1]["formats"] = None  # None: the default formats too
    with pytest.raises(ValueError, match="t1"):
        engine.restore(mismatch)


def test_bad_formats_are_refused():
    _, _, specs = make([10], [dict(master="f32", momentum="q4", variance="f32")])
    with pytest.raises(ValueError, match="q4"):
        train(specs)
    _, _, specs = make([10], [dict(master="f32", momentum="f32")])
    with pytest.raises(ValueError, match="variance"):
        train(specs)
    _, _, specs = make([10], [("f32", "f32", "f32")])
    with pytest.raises(ValueError, match="formats must be a dict"):
        train(specs)
    _, _, specs = make([10], [dict(master="f32", momentum="f32", variance="q8", extra="x")])
    with pytest.raises(ValueError, match="extra"):
        train(specs)
    # Lion keeps no variance: a q8 variance override is refused naming the tensor.
    _, _, specs = make([10], [dict(master="f32", momentum="f32", variance="q8")])
    with pytest.raises(ValueError, match="t0"):
        tandem._C.HybridOptimizer(specs, "lion", GROUPS, mode="host")


@pytest.mark.skipif(not hasattr(tandem._C, "convert_snapshot"), reason="no checkpoint library")
def test_convert_keeps_overrides():
    _, _, specs = make([100, 40], [None, F32_MOMENTS])
    snap = train(specs).snapshot()
    out = tandem._C.convert_snapshot(snap, "f32", "f32", "f32")
    assert out["master"] == "f32"
    assert out["tensors"][0]["formats"] == dict(master="f32", momentum="f32", variance="f32")
    assert out["tensors"][1]["formats"] == F32_MOMENTS
    assert (out["tensors"][1]["ecc8"] == snap["tensors"][1]["ecc8"]).all()


@pytest.mark.skipif(not hasattr(tandem._C, "convert_snapshot"), reason="no checkpoint library")
def test_convert_to_per_tensor_targets():
    # A state saved without overrides moves into an optimizer that has one.
    _, _, plain_specs = make([100, 40], [None, None])
    snap = train(plain_specs).snapshot()
    out = tandem._C.convert_snapshot(snap, "bf16+ecc8", "q8", "q8",
                                     tensor_formats=[None, F32_MOMENTS])
    assert out["tensors"][0]["formats"] == Q8
    assert out["tensors"][1]["formats"] == F32_MOMENTS
    _, _, specs = make([100, 40], [None, F32_MOMENTS])
    train(specs, steps=0).restore(out)
    with pytest.raises(ValueError, match="target formats"):
        tandem._C.convert_snapshot(snap, "bf16+ecc8", "q8", "q8", tensor_formats=[None])
