"""load_state_dict checks every field before it changes anything: each corruption below
is refused with a ValueError naming the field, and the optimizer's state dict (and the
parameters) stay the same, bit for bit; training then goes on normally."""

import copy

import pytest
import torch

import tandem._C
import tandem.torch
from helpers import batches, make_mlp, params_bits, same_bits, train


def two_groups(model, lr=1e-2):
    params = list(model.parameters())
    return [{"params": params[:2], "lr": lr},
            {"params": params[2:], "lr": lr / 2, "weight_decay": 0.0}]


def bits_equal(a, b):
    """Deep equality of state dicts, tensors compared bit for bit (dtype and shape too)."""
    if torch.is_tensor(a) or torch.is_tensor(b):
        if not (torch.is_tensor(a) and torch.is_tensor(b)):
            return False
        if a.dtype != b.dtype or a.shape != b.shape:
            return False
        view = {1: torch.int8, 2: torch.int16, 4: torch.int32, 8: torch.int64}
        return torch.equal(a.reshape(-1).view(view[a.element_size()]),
                           b.reshape(-1).view(view[b.element_size()]))
    if isinstance(a, dict):
        return (isinstance(b, dict) and a.keys() == b.keys()
                and all(bits_equal(a[k], b[k]) for k in a))
    if isinstance(a, (list, tuple)):
        return (type(a) is type(b) and len(a) == len(b)
                and all(bits_equal(x, y) for x, y in zip(a, b)))
    return type(a) is type(b) and a == b


def _set(path, value):
    def mutate(sd):
        d = sd
        for key in path[:-1]:
            d = d[key]
        d[path[-1]] = value
    return mutate


def _del(path):
    def mutate(sd):
        d = sd
        for key in path[:-1]:
            d = d[key]
        del d[path[-1]]
    return mutate


T = "tandem"
CORRUPTIONS = [
    # (id, mutation, message the ValueError must contain)
    ("no tandem version", _del([T, "version"]), "'version'"),
    ("version 3", _set([T, "version"], 3), "version 3"),
    ("version True", _set([T, "version"], True), "version True"),
    ("no algorithm", _del([T, "algorithm"]), "'algorithm'"),
    ("other algorithm", _set([T, "algorithm"], "lion"), "algorithm 'lion'"),
    ("other master", _set([T, "master"], "f32"), "formats"),
    ("other momentum", _set([T, "momentum"], "f32"), "formats"),
    ("no variance", _del([T, "variance"]), "'variance'"),
    ("no step", _del([T, "step"]), "'step'"),
    ("negative step", _set([T, "step"], -1), "step"),
    ("str step", _set([T, "step"], "3"), "step"),
    ("no param_groups", _del(["param_groups"]), "'param_groups'"),
    ("one group", lambda sd: sd["param_groups"].pop(), "param_groups"),
    ("no params", _del(["param_groups", 1, "params"]), "'params'"),
    ("short params", lambda sd: sd["param_groups"][1]["params"].pop(), "params"),
    ("str param id", _set(["param_groups", 0, "params", 0], "0"), "params"),
    ("no lr", _del(["param_groups", 0, "lr"]), "'lr'"),
    ("nan lr", _set(["param_groups", 0, "lr"], float("nan")), "lr"),
    ("no betas", _del(["param_groups", 1, "betas"]), "'betas'"),
    ("bad betas", _set(["param_groups", 1, "betas"], "x"), "param_groups'][1]"),
    ("no engine_groups", _del([T, "engine_groups"]), "'engine_groups'"),
    ("short engine_groups", lambda sd: sd[T]["engine_groups"].pop(), "engine_groups"),
    ("no beta1", _del([T, "engine_groups", 0, "beta1"]), "'beta1'"),
    ("extra engine key", _set([T, "engine_groups", 0, "lr"], 1.0), "'lr'"),
    ("str eps", _set([T, "engine_groups", 1, "eps"], "1e-8"), "'eps'"),
    ("nesterov not bool", _set([T, "engine_groups", 1, "nesterov"], 0), "'nesterov'"),
    ("negative lr_scale", _set([T, "engine_groups", 1, "lr_scale"], -0.5), "'lr_scale'"),
    ("no ref_group", _del([T, "ref_group"]), "'ref_group'"),
    ("ref_group too large", _set([T, "ref_group"], 2), "ref_group"),
    ("negative ref_group", _set([T, "ref_group"], -1), "ref_group"),
    ("str ref_group", _set([T, "ref_group"], "0"), "ref_group"),
    ("bool ref_group", _set([T, "ref_group"], True), "ref_group"),
    ("ref_group not the reference", _set([T, "ref_group"], 1), "lr_scale"),
    ("no tensors", _del([T, "tensors"]), "'tensors'"),
    ("short tensors", lambda sd: sd[T]["tensors"].pop(), "tensors"),
    ("no tensor name", _del([T, "tensors", 0, "name"]), "'name'"),
    ("int tensor name", _set([T, "tensors", 0, "name"], 0), "'name'"),
    ("other tensor name", _set([T, "tensors", 0, "name"], "other"), "other"),
    ("wrong numel", _set([T, "tensors", 1, "numel"], 36), "elements"),
    ("no shape", _del([T, "tensors", 2, "shape"]), "'shape'"),
    ("wrong shape", _set([T, "tensors", 2, "shape"], [29, 36]), "shape"),
    ("negative dim", _set([T, "tensors", 2, "shape"], [-29, -37]), "shape"),
    ("group out of range", _set([T, "tensors", 0, "group"], 2), "'group'"),
    ("other group", _set([T, "tensors", 0, "group"], 1), "group"),
    ("other dtype", _set([T, "tensors", 0, "param_dtype"], "bf16"), "dtype"),
    ("no state", _del(["state"]), "'state'"),
    ("no state entry", _del(["state", 3]), "parameter 3"),
    ("state entry not a dict", _set(["state", 3], [1, 2]), "state'][3]"),
    ("no per-param step", _del(["state", 1, "step"]), "'step'"),
    ("per-param step above the step", _set(["state", 1, "step"], torch.tensor(99.0)),
     "step"),
    ("negative per-param step", _set(["state", 1, "step"], torch.tensor(-1.0)), "step"),
    ("fractional per-param step", _set(["state", 1, "step"], torch.tensor(1.5)), "step"),
    ("no master", _del(["state", 0, "master_bf16"]), "'master_bf16'"),
    ("no ecc", _del(["state", 0, "ecc8"]), "'ecc8'"),
    ("no m codes", _del(["state", 4, "m_codes"]), "'m_codes'"),
    ("no v scales", _del(["state", 5, "v_scales"]), "'v_scales'"),
    ("array not a tensor", _set(["state", 0, "ecc8"], [0] * (13 * 37)), "'ecc8'"),
    ("array dtype", lambda sd: sd["state"][0].update(
        ecc8=sd["state"][0]["ecc8"].to(torch.uint8)), "dtype"),
    ("array size", lambda sd: sd["state"][2].update(
        m_scales=sd["state"][2]["m_scales"][:-1]), "elements"),
    ("array of another format", lambda sd: sd["state"][2].update(
        m_f32=torch.zeros(29 * 37)), "'m_f32'"),
]


def trained():
    model = make_mlp(seed=3)
    opt = tandem.torch.AdamW(two_groups(model), lr=1e-2, master="bf16+ecc8",
                             momentum="q8", variance="q8", offload_fraction=0.5,
                             chunk_elements=64)
    train(model, opt, batches(3, seed=5))
    return model, opt


@pytest.mark.parametrize("mutate,match", [c[1:] for c in CORRUPTIONS],
                         ids=[c[0] for c in CORRUPTIONS])
def test_corruption_is_refused_and_changes_nothing(mutate, match):
    model, opt = trained()
    good = opt.state_dict()
    bad = copy.deepcopy(good)
    mutate(bad)
    before = opt.state_dict()
    params = params_bits(model)
    groups = copy.deepcopy(opt.param_groups)
    with pytest.raises(ValueError, match=match.replace("[", r"\[")):
        opt.load_state_dict(bad)
    assert bits_equal(opt.state_dict(), before)
    assert same_bits(params_bits(model), params)
    assert [{k: v for k, v in g.items() if k != "params"} for g in opt.param_groups] == \
        [{k: v for k, v in g.items() if k != "params"} for g in groups]
    # Still usable: the good state dict loads and steps run (a corrupt ref_group used to
    # make every later step raise IndexError).
    opt.load_state_dict(good)
    train(model, opt, batches(1, seed=6))


def test_not_a_dict_is_refused():
    _, opt = trained()
    for bad in (None, [1, 2], "state"):
        with pytest.raises(ValueError, match="must be a dict"):
            opt.load_state_dict(bad)
    with pytest.raises(ValueError, match=r"\['tandem'\] must be a dict"):
        opt.load_state_dict({"tandem": 3})


def test_version_1_still_loads():
    """A version-1 dict (no per-param steps that differ, no shapes) loads: every tensor's
    step is the optimizer's."""
    model_a, opt_a = trained()
    sd = opt_a.state_dict()
    v1 = copy.deepcopy(sd)
    v1["tandem"]["version"] = 1
    for info in v1["tandem"]["tensors"]:
        del info["shape"]
    for entry in v1["state"].values():
        entry["step"] = torch.tensor(float(sd["tandem"]["step"]))
    model_b = make_mlp(seed=9)
    opt_b = tandem.torch.AdamW(two_groups(model_b), lr=1.0, master="bf16+ecc8",
                               momentum="q8", variance="q8")
    opt_b.load_state_dict(v1)
    assert same_bits(params_bits(model_b), params_bits(model_a))
    after = opt_b.state_dict()
    for k, entry in after["state"].items():
        assert entry["step"].item() == sd["tandem"]["step"]
        assert bits_equal({n: v for n, v in entry.items() if n != "step"},
                          {n: v for n, v in sd["state"][k].items() if n != "step"})
    data = batches(3, seed=7)
    assert train(model_a, opt_a, data) == train(model_b, opt_b, data)
    assert same_bits(params_bits(model_b), params_bits(model_a))


def test_version_2_fields():
    model, opt = trained()
    sd = opt.state_dict()
    assert sd["tandem"]["version"] == 2
    for k, p in enumerate(model.parameters()):
        assert sd["tandem"]["tensors"][k]["numel"] == p.numel()
        assert sd["tandem"]["tensors"][k]["shape"] in ([], list(p.shape))
        step = sd["state"][k]["step"]
        assert step.dtype == torch.float32 and step.dim() == 0
        assert 0 <= step.item() <= sd["tandem"]["step"] == 3


def test_per_parameter_steps_round_trip():
    model, opt = trained()
    sd = copy.deepcopy(opt.state_dict())
    sd["state"][4]["step"] = torch.tensor(1.0)
    sd["state"][5]["step"] = 0  # a plain int is accepted too
    opt.load_state_dict(sd)
    steps = {k: v["step"].item() for k, v in opt.state_dict()["state"].items()}
    assert steps == {0: 3, 1: 3, 2: 3, 3: 3, 4: 1, 5: 0}
    train(model, opt, batches(1, seed=8))
    steps = {k: v["step"].item() for k, v in opt.state_dict()["state"].items()}
    assert steps == {0: 4, 1: 4, 2: 4, 3: 4, 4: 2, 5: 1}


def test_state_calls_hold_the_optimizers_lock(tmp_path):
    class CountingLock:
        def __init__(self):
            self.entered = 0

        def __enter__(self):
            self.entered += 1

        def __exit__(self, *exc):
            return False

    model, opt = trained()
    opt._lock = CountingLock()
    calls = [  # (call, how many state calls it makes)
        (lambda: opt.load_state_dict(opt.state_dict()), 2),
        (lambda: tandem.torch.from_torch_state(opt, tandem.torch.to_torch_state(opt)), 2),
        (lambda: tandem.torch.export_masters(opt, tmp_path / "m.safetensors"), 1),
    ]
    if tandem._C.has_checkpoint:
        calls.append((lambda: (opt.save_checkpoint(tmp_path / "c.tckpt"),
                               opt.load_checkpoint(tmp_path / "c.tckpt")), 2))
    for call, count in calls:
        before = opt._lock.entered
        call()
        assert opt._lock.entered >= before + count


@pytest.mark.parametrize("mutate,match", [
    (lambda s: s.pop("algorithm"), "snapshot: missing 'algorithm'"),
    (lambda s: s.update(groups=[1]), "'groups' entries must be dicts"),
    (lambda s: s.update(step="3"), "snapshot: 'step' holds a str"),
    (lambda s: s["tensors"][2].pop("group"), "snapshot tensor 2: missing 'group'"),
    (lambda s: s["tensors"][0].update(shape=[-1]), "snapshot tensor 0: 'shape'"),
    (lambda s: s.update(metadata=b"x"), "'metadata' must be a str"),
])
def test_engine_snapshot_dict_errors_name_the_key(mutate, match):
    """The binding's own snapshot dicts: ValueError naming the key, not KeyError."""
    _, opt = trained()
    snap = opt._core.engine.snapshot()
    before = opt.state_dict()
    mutate(snap)
    with pytest.raises(ValueError, match=match):
        opt._core.engine.restore(snap)
    assert bits_equal(opt.state_dict(), before)


def test_engine_snapshot_dict_carries_steps_shapes_and_metadata():
    model, opt = trained()
    snap = opt._core.engine.snapshot()
    assert snap["metadata"] == "" and snap["step"] == 3
    for t, p in zip(snap["tensors"], model.parameters()):
        assert t["step"] == 3 and t["numel"] == p.numel()
        assert t["shape"] in ([], list(p.shape))  # [] where the spec gave no shape
    snap["tensors"][1]["step"] = 2
    opt._core.engine.restore(snap)
    assert opt._core.engine.snapshot()["tensors"][1]["step"] == 2
