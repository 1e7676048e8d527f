"""Moving a run onto Tandem and off it again: torch.optim state dicts, both ways
(from_torch_state / to_torch_state), and the fp32 masters exported as safetensors."""

import copy
import inspect
import json
import struct

import numpy as np
import pytest
import torch

import tandem._C
import tandem.torch
from helpers import batches, make_mlp, params_bits, same_bits, train
from test_state_validation import bits_equal
from test_vs_torch import max_rel_diff

TOL = 1e-5  # as test_vs_torch: max relative difference after the steps
HAS_CONVERT = hasattr(tandem._C, "convert_snapshot")


def two_groups(model, lr):
    params = list(model.parameters())
    return [{"params": params[:2], "lr": lr},
            {"params": params[2:], "lr": lr / 4, "weight_decay": 0.0}]


def trained_and_copied(make_first, make_second, data):
    """A model trained on data[:3] with make_first's optimizer (two_groups, lr 1.0), and a
    copy of it with a fresh optimizer of make_second's: (model, opt, copy, copy_opt)."""
    model = make_mlp(seed=1)
    opt = make_first(two_groups(model, 1.0))
    train(model, opt, data[:3])
    copied = copy.deepcopy(model)
    return model, opt, copied, make_second(two_groups(copied, 1.0))


class RefLion(torch.optim.Optimizer):
    """Lion as the common implementations write it (state: exp_avg), for the tests."""

    def __init__(self, params, lr=1e-4, betas=(0.9, 0.99), weight_decay=0.0):
        super().__init__(params, dict(lr=lr, betas=betas, weight_decay=weight_decay))

    @torch.no_grad()
    def step(self):
        for group in self.param_groups:
            b1, b2 = group["betas"]
            for p in group["params"]:
                state = self.state[p]
                if not state:
                    state["exp_avg"] = torch.zeros_like(p)
                m = state["exp_avg"]
                p.mul_(1 - group["lr"] * group["weight_decay"])
                p.add_(torch.sign(m * b1 + p.grad * (1 - b1)), alpha=-group["lr"])
                m.mul_(b2).add_(p.grad, alpha=1 - b2)


# (name, torch optimizer, tandem optimizer), same hyper-parameters.
PAIRS = [
    ("adamw", lambda p: torch.optim.AdamW(p, lr=1e-2, betas=(0.8, 0.95), weight_decay=0.05),
     lambda p, **f: tandem.torch.AdamW(p, lr=1e-2, betas=(0.8, 0.95), weight_decay=0.05, **f)),
    ("adam", lambda p: torch.optim.Adam(p, lr=1e-2, weight_decay=0.01),
     lambda p, **f: tandem.torch.Adam(p, lr=1e-2, weight_decay=0.01, **f)),
    ("sgd_nesterov", lambda p: torch.optim.SGD(p, lr=5e-2, momentum=0.9, nesterov=True,
                                               weight_decay=0.01),
     lambda p, **f: tandem.torch.SGD(p, lr=5e-2, momentum=0.9, nesterov=True,
                                     weight_decay=0.01, **f)),
    ("sgd_dampening", lambda p: torch.optim.SGD(p, lr=5e-2, momentum=0.8, dampening=0.3),
     lambda p, **f: tandem.torch.SGD(p, lr=5e-2, momentum=0.8, dampening=0.3, **f)),
    ("sgd_plain", lambda p: torch.optim.SGD(p, lr=5e-2),
     lambda p, **f: tandem.torch.SGD(p, lr=5e-2, **f)),
    ("lion", lambda p: RefLion(p, lr=1e-3, betas=(0.9, 0.99), weight_decay=0.1),
     lambda p, **f: tandem.torch.Lion(p, lr=1e-3, betas=(0.9, 0.99), weight_decay=0.1, **f)),
]
IDS = [p[0] for p in PAIRS]


@pytest.mark.parametrize("name,make_torch,make_tandem", PAIRS, ids=IDS)
def test_torch_to_tandem_continues_alike(name, make_torch, make_tandem):
    data = batches(6, seed=41)
    model_t, opt_t, model_o, opt_o = trained_and_copied(make_torch, make_tandem, data)
    before = params_bits(model_o)
    opt_o.load_state_dict(opt_t.state_dict())  # no "tandem" entry: from_torch_state
    assert same_bits(params_bits(model_o), before)  # fp32 masters: the parameters as they are
    assert [g["lr"] for g in opt_o.param_groups] == [g["lr"] for g in opt_t.param_groups]
    fresh = copy.deepcopy(model_t)
    opt_fresh = make_tandem(two_groups(fresh, 1.0))
    opt_fresh.load_state_dict({"state": {}, "param_groups": opt_t.state_dict()["param_groups"]})

    train(model_t, opt_t, data[3:])
    train(model_o, opt_o, data[3:])
    train(fresh, opt_fresh, data[3:])
    assert max_rel_diff(model_o, model_t) < TOL
    if name != "sgd_plain":  # the moments made the difference
        assert max_rel_diff(fresh, model_t) > 100 * TOL


@pytest.mark.parametrize("name,make_torch,make_tandem", PAIRS, ids=IDS)
def test_tandem_to_torch_continues_alike(name, make_torch, make_tandem):
    data = batches(6, seed=42)
    model_o, opt_o, model_t, opt_t = trained_and_copied(make_tandem, make_torch, data)
    sd = tandem.torch.to_torch_state(opt_o)
    opt_t.load_state_dict(sd)
    for k, p in enumerate(model_t.parameters()):
        for key, value in sd["state"].get(k, {}).items():
            if torch.is_tensor(value) and key != "step":
                assert value.dtype == torch.float32 and value.shape == p.shape
    train(model_o, opt_o, data[3:])
    train(model_t, opt_t, data[3:])
    assert max_rel_diff(model_t, model_o) < TOL


def test_round_trip_through_torch_is_exact_for_f32():
    model = make_mlp(seed=3)
    opt = tandem.torch.AdamW(two_groups(model, 1e-2), lr=1e-2)
    train(model, opt, batches(3))
    before = opt.state_dict()
    other = tandem.torch.AdamW(two_groups(copy.deepcopy(model), 5.0), lr=5.0)
    tandem.torch.from_torch_state(other, tandem.torch.to_torch_state(opt))
    after = other.state_dict()
    for k, entry in before["state"].items():
        for key in ("master_f32", "m_f32", "v_f32"):
            assert bits_equal(after["state"][k][key], entry[key]), (k, key)
        assert after["state"][k]["step"] == entry["step"]
    assert after["param_groups"] == before["param_groups"]
    assert (other._layout.lr_scales == opt._layout.lr_scales
            and other._layout.ref_group == opt._layout.ref_group)


def test_to_torch_state_layout():
    model = make_mlp()
    model[2].bias.requires_grad_(False)
    opt = tandem.torch.SGD(model.parameters(), lr=0.1, momentum=0.9)
    assert tandem.torch.to_torch_state(opt)["state"] == {}  # nothing stepped yet
    train(model, opt, batches(2))
    sd = tandem.torch.to_torch_state(opt)
    assert sorted(sd["state"]) == [0, 1, 2, 4, 5]
    assert sd["param_groups"][0]["params"] == list(range(6))
    assert sd["param_groups"][0]["momentum"] == 0.9
    assert sd["state"][0]["momentum_buffer"].shape == model[0].weight.shape
    model_plain = make_mlp()
    plain = tandem.torch.SGD(model_plain.parameters(), lr=0.1)
    train(model_plain, plain, batches(1))
    assert len(tandem.torch.to_torch_state(plain)["state"]) == 6
    assert all(e["momentum_buffer"] is None
               for e in tandem.torch.to_torch_state(plain)["state"].values())


@pytest.mark.skipif(not HAS_CONVERT, reason="no tandem._C.convert_snapshot in this build")
@pytest.mark.parametrize("formats", [
    dict(master="bf16+ecc8", momentum="q8", variance="q8"),
    dict(master="bf16+ecc16", momentum="q8", variance="f32", offload_fraction=0.5,
         chunk_elements=64),
])
def test_quantized_formats_both_ways(formats):
    data = batches(6, seed=43)
    model_t = make_mlp(seed=1)
    opt_t = torch.optim.AdamW(model_t.parameters(), lr=1e-2, weight_decay=0.05)
    train(model_t, opt_t, data[:3])
    model_o = copy.deepcopy(model_t)
    opt_o = tandem.torch.AdamW(model_o.parameters(), lr=1e-2, weight_decay=0.05, **formats)
    tandem.torch.from_torch_state(opt_o, opt_t.state_dict())
    back = tandem.torch.to_torch_state(opt_o)
    for k, entry in opt_t.state_dict()["state"].items():
        assert back["state"][k]["step"] == entry["step"]
        for key in ("exp_avg", "exp_avg_sq"):
            # q8 keeps about 2 significant digits of each group's largest value
            ref, got = entry[key], back["state"][k][key]
            assert torch.allclose(got, ref, rtol=0.1, atol=1e-2 * ref.abs().max().item())
    train(model_t, opt_t, data[3:])
    train(model_o, opt_o, data[3:])
    assert max_rel_diff(model_o, model_t) < 1e-2


@pytest.mark.parametrize("mutate,match", [
    (lambda sd: sd["param_groups"][0].update(amsgrad=True), "amsgrad"),
    (lambda sd: sd["param_groups"][0].update(maximize=True), "maximize"),
    (lambda sd: sd["param_groups"][0].pop("betas"), "'betas'"),
    (lambda sd: sd["param_groups"].pop(), "param_groups"),
    (lambda sd: sd["state"][2].update(exp_avg=torch.zeros(3)), "exp_avg"),
    (lambda sd: sd["state"][2].pop("exp_avg_sq"), "'exp_avg_sq'"),
    (lambda sd: sd["state"][2].update(max_exp_avg_sq=torch.zeros(29, 37)), "amsgrad"),
    (lambda sd: sd["state"][2].update(step=torch.tensor(-2.0)), "step"),
    (lambda sd: sd["state"][2]["exp_avg_sq"].fill_(-1.0), "exp_avg_sq"),
    (lambda sd: sd.pop("state"), "'state'"),
])
def test_bad_torch_state_is_refused_and_changes_nothing(mutate, match):
    model_t = make_mlp(seed=1)
    opt_t = torch.optim.AdamW(model_t.parameters(), lr=1e-2)
    train(model_t, opt_t, batches(2))
    sd = copy.deepcopy(opt_t.state_dict())
    mutate(sd)
    model = make_mlp(seed=2)
    opt = tandem.torch.AdamW(model.parameters(), lr=1e-2)
    train(model, opt, batches(1))
    before, params = opt.state_dict(), params_bits(model)
    with pytest.raises(ValueError, match=match):
        tandem.torch.from_torch_state(opt, sd)
    assert bits_equal(opt.state_dict(), before)
    assert same_bits(params_bits(model), params)
    assert opt.param_groups[0]["lr"] == 1e-2


# ---------------------------------------------------------------------------------------
# export_masters


def read_safetensors(path):
    """A small reader of the safetensors layout (the package may not be installed)."""
    raw = open(path, "rb").read()
    (n,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8:8 + n])
    meta = header.pop("__metadata__", {})
    data = raw[8 + n:]
    out = {}
    end = 0
    for name, info in sorted(header.items(), key=lambda kv: kv[1]["data_offsets"]):
        assert info["dtype"] == "F32"
        b, e = info["data_offsets"]
        assert b == end  # no holes, no overlaps
        end = e
        a = np.frombuffer(data[b:e], dtype="<f4").copy()
        out[name] = torch.from_numpy(a).reshape(info["shape"])
    assert end == len(data)
    return out, meta


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = torch.nn.Embedding(11, 6)
        self.block = torch.nn.Sequential(torch.nn.Linear(6, 9), torch.nn.GELU(),
                                         torch.nn.Linear(9, 3))

    def forward(self, idx):
        return self.block(self.embed(idx))


@pytest.mark.parametrize("formats", [
    dict(master="f32"),
    pytest.param(dict(master="bf16+ecc8", momentum="q8", variance="q8"),
                 marks=pytest.mark.skipif(not HAS_CONVERT, reason="no convert_snapshot")),
])
@pytest.mark.parametrize("naming", ["module", "param_names"])
def test_export_masters_loads_into_the_model(tmp_path, formats, naming):
    torch.manual_seed(0)
    net = Net()
    if naming == "module":
        opt = tandem.torch.AdamW(net.parameters(), lr=1e-2, **formats)
        export = lambda path: tandem.torch.export_masters(opt, path, module=net)  # noqa
    else:
        named = list(net.named_parameters())
        groups = [{"params": [p for _, p in named], "param_names": [n for n, _ in named]}]
        opt = tandem.torch.AdamW(groups, lr=1e-2, **formats)
        export = lambda path: tandem.torch.export_masters(opt, path)  # noqa
    idx = torch.randint(0, 11, (16, 4), generator=torch.Generator().manual_seed(1))
    for _ in range(3):
        opt.zero_grad()
        net(idx).square().mean().backward()
        opt.step()
    path = tmp_path / "masters.safetensors"
    export(path)
    try:
        import safetensors.torch
        loaded = safetensors.torch.load_file(str(path))
    except ImportError:
        loaded, meta = read_safetensors(path)
        assert meta["format"] == "pt" and meta["tandem_step"] == "3"
        assert meta["tandem_master"] == formats["master"]
    assert set(loaded) == {n for n, _ in net.named_parameters()}
    for name, p in net.named_parameters():
        assert loaded[name].dtype == torch.float32 and loaded[name].shape == p.shape
    fresh = Net()
    fresh.load_state_dict(loaded)
    if formats["master"] == "f32":  # the masters are the parameters
        for (_, a), (_, b) in zip(fresh.named_parameters(), net.named_parameters()):
            assert torch.equal(a, b)
    else:
        for (_, a), (_, b) in zip(fresh.named_parameters(), net.named_parameters()):
            assert torch.equal(a.bfloat16(), b.bfloat16())
    assert not (tmp_path / "masters.safetensors.tmp").exists()


def test_export_masters_refuses_a_foreign_module(tmp_path):
    net = Net()
    opt = tandem.torch.SGD(net.parameters(), lr=0.1)
    with pytest.raises(ValueError, match="not a parameter of the given module"):
        tandem.torch.export_masters(opt, tmp_path / "x.safetensors", module=Net())
    assert not (tmp_path / "x.safetensors").exists()


def test_per_parameter_steps_carry_over():
    """torch keeps one step per parameter (a parameter without a gradient is not
    stepped); Tandem's per-tensor steps take them over, so bias corrections continue
    alike, and to_torch_state gives them back."""
    data = batches(6, seed=44)
    model_t = make_mlp(seed=1)
    opt_t = torch.optim.AdamW(model_t.parameters(), lr=1e-2, weight_decay=0.05)
    for i, (x, y) in enumerate(data[:3]):
        opt_t.zero_grad(set_to_none=True)
        torch.nn.functional.mse_loss(model_t(x), y).backward()
        if i == 0:
            model_t[4].weight.grad = None  # the last layer skips the first step
            model_t[4].bias.grad = None
        opt_t.step()
    steps = {k: v["step"].item() for k, v in opt_t.state_dict()["state"].items()}
    assert steps == {0: 3, 1: 3, 2: 3, 3: 3, 4: 2, 5: 2}

    model_o = copy.deepcopy(model_t)
    opt_o = tandem.torch.AdamW(model_o.parameters(), lr=1e-2, weight_decay=0.05)
    tandem.torch.from_torch_state(opt_o, opt_t.state_dict())
    sd = opt_o.state_dict()
    assert {k: v["step"].item() for k, v in sd["state"].items()} == steps
    assert sd["tandem"]["step"] == 3
    assert {k: v["step"].item()
            for k, v in tandem.torch.to_torch_state(opt_o)["state"].items()} == steps
    # Control: the same state with every step at 3.
    flat = copy.deepcopy(opt_t.state_dict())
    for entry in flat["state"].values():
        entry["step"] = torch.tensor(3.0)
    model_c = copy.deepcopy(model_t)
    opt_c = tandem.torch.AdamW(model_c.parameters(), lr=1e-2, weight_decay=0.05)
    tandem.torch.from_torch_state(opt_c, flat)

    train(model_t, opt_t, data[3:])
    train(model_o, opt_o, data[3:])
    train(model_c, opt_c, data[3:])
    assert max_rel_diff(model_o, model_t) < TOL
    assert max_rel_diff(model_c, model_t) > 100 * TOL


@pytest.mark.skipif(not HAS_CONVERT, reason="no tandem._C.convert_snapshot in this build")
def test_convert_snapshot_binding():
    model = make_mlp()
    opt = tandem.torch.AdamW(model.parameters(), lr=1e-2, master="bf16+ecc16")
    train(model, opt, batches(2))
    snap = opt._core.engine.snapshot()
    snap["metadata"] = "kept \udcff verbatim"  # not UTF-8: crosses as a surrogate escape
    q8 = tandem._C.convert_snapshot(snap, "bf16+ecc16", "q8", "q8")
    assert (q8["master"], q8["momentum"], q8["variance"]) == ("bf16+ecc16", "q8", "q8")
    assert q8["metadata"] == snap["metadata"] and q8["step"] == 2
    for a, b in zip(q8["tensors"], snap["tensors"]):
        assert (a["name"], a["shape"], a["step"]) == (b["name"], b["shape"], b["step"])
        assert np.array_equal(a["master_bf16"], b["master_bf16"])
        assert np.array_equal(a["ecc16"], b["ecc16"])
        assert a["m_codes"].dtype == np.int8 and a["v_codes"].dtype == np.uint8
    same = tandem._C.convert_snapshot(snap, "bf16+ecc16", "f32", "f32")
    for a, b in zip(same["tensors"], snap["tensors"]):
        assert np.array_equal(a["m_f32"], b["m_f32"]) and np.array_equal(a["v_f32"], b["v_f32"])
    del snap["tensors"][1]["numel"]
    with pytest.raises(ValueError, match="snapshot tensor 1: missing 'numel'"):
        tandem._C.convert_snapshot(snap, "f32", "f32", "f32")
    with pytest.raises(ValueError, match="q8"):
        tandem._C.convert_snapshot(q8, "f32", "f32", "q4")


@pytest.mark.skipif(not HAS_CONVERT, reason="no tandem._C.convert_snapshot in this build")
@pytest.mark.parametrize("name,make_torch,make_tandem",
                         [p for p in PAIRS if p[0] in ("sgd_nesterov", "lion")],
                         ids=["sgd_nesterov", "lion"])
def test_quantized_momentum_both_ways(name, make_torch, make_tandem):
    data = batches(4, seed=45)
    model_t = make_mlp(seed=1)
    opt_t = make_torch(model_t.parameters())
    train(model_t, opt_t, data[:2])
    model_o = copy.deepcopy(model_t)
    if "momentum_format" in inspect.signature(tandem.torch.TandemOptimizer).parameters:
        formats = dict(master_format="bf16+ecc16", momentum_format="q8")
    elif name == "lion":
        formats = dict(master="bf16+ecc16", momentum="q8")
    else:
        pytest.skip("SGD's momentum= is its hyper-parameter; no momentum_format= here")
    opt_o = make_tandem(model_o.parameters(), **formats)
    opt_o.load_state_dict(opt_t.state_dict())
    assert opt_o.state_dict()["state"][0]["m_codes"].dtype == torch.int8
    back = tandem.torch.to_torch_state(opt_o)
    key = "exp_avg" if name == "lion" else "momentum_buffer"
    for k, entry in opt_t.state_dict()["state"].items():
        ref, got = entry[key], back["state"][k][key]
        assert got.shape == ref.shape
        assert torch.allclose(got, ref, rtol=0.1, atol=1e-2 * ref.abs().max().item())


def test_exports_see_weights_written_since_the_last_step(tmp_path):
    """The parameter is the source of truth: weights written with torch ops after a step
    are what export_masters and to_torch_state's optimizer continue from."""
    torch.manual_seed(0)
    net = Net()
    opt = tandem.torch.AdamW(net.parameters(), lr=1e-2, master="bf16+ecc8")
    idx = torch.randint(0, 11, (8, 4), generator=torch.Generator().manual_seed(2))
    net(idx).square().mean().backward()
    opt.step()
    with torch.no_grad():
        net.block[0].weight.fill_(0.25)
    path = tmp_path / "m.safetensors"
    tandem.torch.export_masters(opt, path, module=net)
    loaded, _ = read_safetensors(path)
    assert torch.equal(loaded["block.0.weight"], torch.full((9, 6), 0.25))
    assert torch.equal(loaded["embed.weight"], net.embed.weight.detach())

