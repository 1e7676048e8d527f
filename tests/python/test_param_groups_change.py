"""param_groups can change after construction, as with torch.optim: parameters appended
to or removed from a group, add_param_group (Lightning's BackboneFinetuning, fastai's
unfreezing), a removed parameter coming back with its state. The engine follows at the
next step (a rebind that keeps every other parameter's state bit for bit); what cannot be
stepped is refused naming the parameter, with nothing changed. Side by side with
torch.optim.AdamW/SGD in host mode at offload fractions 0, 0.5 and 1; test_gpu.py runs
the check_* functions on a GPU."""

import copy
import warnings

import pytest
import torch

import tandem.torch
from helpers import batches, make_mlp, params_bits, same_bits
from test_rebind import same_state, snapshot_of
from test_state_validation import bits_equal
from test_vs_torch import max_rel_diff

FRACTIONS = (0.0, 0.5, 1.0)
QUANTIZED = dict(master_format="bf16+ecc8", momentum_format="q8", variance_format="q8")


def backward(model, x, y):
    device = next(model.parameters()).device
    torch.nn.functional.mse_loss(model(x.to(device)), y.to(device)).backward()


def train_both(pairs, data):
    """One step per batch for each (model, optimizer) pair."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", tandem.torch.RebindWarning)
        for x, y in data:
            for model, opt in pairs:
                opt.zero_grad()
                backward(model, x, y)
                opt.step()


def make(algo, params, fraction, **formats):
    if algo == "sgd":
        return (tandem.torch.SGD(params, lr=0.05, momentum=0.9, offload_fraction=fraction,
                                 chunk_elements=64, **formats),
                lambda ps: torch.optim.SGD(ps, lr=0.05, momentum=0.9))
    return (tandem.torch.AdamW(params, lr=1e-2, weight_decay=0.05, offload_fraction=fraction,
                               chunk_elements=64, **formats),
            lambda ps: torch.optim.AdamW(ps, lr=1e-2, weight_decay=0.05))


def torch_steps(ref, model):
    return [int(ref.state[p]["step"]) if p in ref.state and "step" in ref.state[p] else 0
            for p in model.parameters()]


# ---- parameters appended to and removed from a group --------------------------------------

@pytest.mark.parametrize("fraction", FRACTIONS)
@pytest.mark.parametrize("algo", ["adamw", "sgd"])
def test_params_appended_and_removed_are_followed(fraction, algo):
    check_appended_and_removed(fraction, algo, "cpu")


def check_appended_and_removed(fraction, algo, device):
    ours = make_mlp(seed=2).to(device)
    theirs = copy.deepcopy(ours)
    head = lambda m: list(m.parameters())[2:]  # noqa: E731
    opt, make_ref = make(algo, head(ours), fraction)
    ref = make_ref(head(theirs))
    data = batches(8, seed=3)
    train_both([(ours, opt), (theirs, ref)], data[:2])
    for model, o in ((ours, opt), (theirs, ref)):  # append layer 0 to group 0
        o.param_groups[0]["params"] += list(model[0].parameters())
    train_both([(ours, opt), (theirs, ref)], data[2:4])
    assert opt.rebinds == 1
    for model, o in ((ours, opt), (theirs, ref)):  # remove layer 2
        o.param_groups[0]["params"] = [p for p in o.param_groups[0]["params"]
                                       if all(p is not q for q in model[2].parameters())]
    train_both([(ours, opt), (theirs, ref)], data[4:6])
    for model, o in ((ours, opt), (theirs, ref)):  # layer 2 comes back, with its state
        o.param_groups[0]["params"].extend(model[2].parameters())
    train_both([(ours, opt), (theirs, ref)], data[6:])
    assert max_rel_diff(ours, theirs) < 1e-5
    if algo != "sgd":
        counts = dict(zip(map(id, opt.param_groups[0]["params"]), opt.tensor_step_counts()))
        assert [counts[id(p)] for p in ours.parameters()] == torch_steps(ref, theirs)
        assert torch_steps(ref, theirs) == [6, 6, 6, 6, 8, 8]


@pytest.mark.parametrize("fraction", FRACTIONS)
def test_follow_keeps_other_state_bit_for_bit(fraction):
    model = make_mlp(seed=4)
    opt = tandem.torch.AdamW(list(model.parameters())[2:], lr=1e-2, offload_fraction=fraction,
                             chunk_elements=64, **QUANTIZED)
    train_both([(model, opt)], batches(3, seed=5))
    before = snapshot_of(opt)
    weights = params_bits(model)
    opt.param_groups[0]["params"][2:2] = list(model[0].parameters())  # in the middle
    del opt.param_groups[0]["params"][0]                              # and one out
    with pytest.warns(tandem.torch.RebindWarning, match="param_groups changed"):
        opt.state_dict()  # follows param_groups, as step() would
    after = snapshot_of(opt)
    kept = [p for p in list(model.parameters())[3:]]
    names = dict(zip(map(id, opt.param_groups[0]["params"]), opt.param_names))
    for p, old_name in zip(kept, ["g0.p1", "g0.p2", "g0.p3"]):
        assert same_state(after[names[id(p)]], before[old_name])
    assert same_bits(params_bits(model), weights)  # a rebind writes no weight
    assert opt.tensor_step_counts() == [3, 0, 0, 3, 3]


def test_what_cannot_be_stepped_is_refused_naming_it():
    model = make_mlp()
    opt = tandem.torch.AdamW(list(model.parameters())[:4], lr=1e-2)
    train_both([(model, opt)], batches(2))
    state, weights = opt.state_dict(), params_bits(model)
    group = opt.param_groups[0]
    cases = [
        ("not a tensor", TypeError, r"param_groups\[0\]\['params'\]\[4\].*int", [3]),
        ("twice", ValueError, r"param_groups\[0\]\['params'\]\[4\].*also "
                              r"param_groups\[0\]\['params'\]\[0\]", [group["params"][0]]),
        ("float64", ValueError, r"unsupported dtype torch.float64",
         [torch.zeros(3, dtype=torch.float64, requires_grad=True)]),
    ]
    for what, error, match, extra in cases:
        group["params"] += extra
        with pytest.raises(error, match=match):
            opt.step()
        del group["params"][4:]
        assert bits_equal(opt.state_dict(), state), what
        assert same_bits(params_bits(model), weights), what
    group["params"] = set(group["params"])
    with pytest.raises(TypeError, match="ordered collections"):
        opt.step()


# ---- add_param_group ------------------------------------------------------------------------

@pytest.mark.parametrize("fraction", FRACTIONS)
@pytest.mark.parametrize("algo", ["adamw", "sgd"])
def test_add_param_group_as_backbone_finetuning(fraction, algo):
    check_backbone_finetuning(fraction, algo, "cpu")


def check_backbone_finetuning(fraction, algo, device):
    """Lightning's BackboneFinetuning: the backbone is frozen and outside the optimizer;
    at the unfreeze epoch it is unfrozen and added as a group with its own lr."""
    ours = make_mlp(seed=6).to(device)
    theirs = copy.deepcopy(ours)
    for m in (ours, theirs):
        m[0].requires_grad_(False)
    opt, make_ref = make(algo, [{"params": list(ours[2:].parameters())}], fraction)
    ref = make_ref([{"params": list(theirs[2:].parameters())}])
    data = batches(6, seed=7)
    train_both([(ours, opt), (theirs, ref)], data[:3])
    before = snapshot_of(opt)
    for m, o in ((ours, opt), (theirs, ref)):
        m[0].requires_grad_(True)
        o.add_param_group({"params": m[0].parameters(), "lr": 1e-3})
    assert opt.param_groups[1]["lr"] == 1e-3 and len(opt.param_groups) == 2
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", tandem.torch.RebindWarning)
        opt.state_dict()
    after = snapshot_of(opt)
    for name in ("g0.p0", "g0.p1", "g0.p2", "g0.p3"):  # the head keeps its state
        assert same_state(after[name], before[name])
    train_both([(ours, opt), (theirs, ref)], data[3:])
    assert max_rel_diff(ours, theirs) < 1e-5
    if algo == "adamw":
        assert opt.tensor_step_counts() == [6, 6, 6, 6, 3, 3]


def test_add_param_group_matches_torch_adamw_exactly():
    ours = make_mlp(seed=8)
    theirs = copy.deepcopy(ours)
    opt = tandem.torch.AdamW(ours[0].parameters(), lr=1e-2)
    ref = torch.optim.AdamW(theirs[0].parameters(), lr=1e-2)
    data = batches(6, seed=9)
    train_both([(ours, opt), (theirs, ref)], data[:2])
    for m, o in ((ours, opt), (theirs, ref)):
        o.add_param_group({"params": list(m[2].parameters()), "lr": 3e-3,
                           "betas": (0.8, 0.99)})
    train_both([(ours, opt), (theirs, ref)], data[2:4])
    for m, o in ((ours, opt), (theirs, ref)):
        o.add_param_group({"params": list(m[4].parameters()), "weight_decay": 0.0})
    train_both([(ours, opt), (theirs, ref)], data[4:])
    assert max_rel_diff(ours, theirs) < 1e-5
    assert opt.tensor_step_counts() == torch_steps(ref, theirs) == [6, 6, 4, 4, 2, 2]


def test_bad_add_param_group_changes_nothing():
    model = make_mlp()
    opt = tandem.torch.AdamW(list(model.parameters())[:2], lr=1e-2)
    rest = list(model.parameters())[2:]
    cases = [
        (dict(params=rest, betas=(0.9,)), ValueError, r"group 1: betas must be a pair"),
        (dict(params=rest, eps="tiny"), TypeError, r"group 1: eps must be a number"),
        (dict(params=rest, lr=-1.0), ValueError, r"group 1: lr must be finite and >= 0"),
        (dict(params=rest, betas=(0.9, 1.5)), ValueError, r"group 1: beta2"),
        (dict(params=rest + [model[0].weight]), ValueError, r"appears twice"),
        (dict(params=set(rest)), TypeError, r"ordered collections"),
        (dict(params=[torch.zeros(2, dtype=torch.float64, requires_grad=True)]), ValueError,
         r"group 1 param 0: unsupported dtype torch.float64"),
    ]
    for group, error, match in cases:
        with pytest.raises(error, match=match):
            opt.add_param_group(group)
        assert len(opt.param_groups) == 1
    opt.add_param_group({"params": rest})
    train_both([(model, opt)], batches(1))
    assert opt.tensor_step_counts() == [1] * 6


# ---- checkpoints hold hyper-parameters once -------------------------------------------------

def two_groups(model, algo):
    params = list(model.parameters())
    if algo == "sgd":
        return [{"params": params[:2]}, {"params": params[2:], "lr": 0.02, "momentum": 0.5}]
    return [{"params": params[:2]}, {"params": params[2:], "lr": 3e-3, "betas": (0.8, 0.95)}]


def build(algo, seed=1):
    model = make_mlp(seed=seed)
    if algo == "sgd":
        opt = tandem.torch.SGD(two_groups(model, algo), lr=0.05, momentum=0.9,
                               weight_decay=1e-3)
    else:
        opt = tandem.torch.AdamW(two_groups(model, algo), lr=1e-2, weight_decay=0.05)
    return model, opt


EDITED = {"adamw": dict(beta1=0.5, weight_decay=0.3), "sgd": dict(momentum=0.2,
                                                                    weight_decay=0.3)}


@pytest.mark.parametrize("algo", ["adamw", "sgd"])
def test_state_dict_engine_copy_is_not_a_second_source(algo):
    model, opt = build(algo)
    train_both([(model, opt)], batches(2))
    good = opt.state_dict()
    edited = copy.deepcopy(good)
    for h in edited["tandem"]["engine_groups"]:
        h.update(EDITED[algo])
    results = []
    for sd in (good, edited):
        other, oopt = build(algo, seed=9)
        oopt.load_state_dict(sd)
        train_both([(other, oopt)], batches(3, seed=4))
        results.append(params_bits(other))
    assert same_bits(*results)


@pytest.mark.skipif(not tandem._C.has_checkpoint, reason="built without checkpoint/")
@pytest.mark.parametrize("algo", ["adamw", "sgd"])
def test_checkpoint_engine_copy_is_not_a_second_source(tmp_path, algo):
    """A file whose engine groups (the C++ snapshot's) say other hyper-parameters than
    its param_groups: the loaded optimizer steps with what param_groups show."""
    model, opt = build(algo)
    train_both([(model, opt)], batches(2))
    good, edited = tmp_path / "good.tckpt", tmp_path / "edited.tckpt"
    opt.save_checkpoint(good)
    opt._core.engine.set_groups([dict(h, lr_scale=s, **EDITED[algo]) for h, s in
                                 zip(opt._layout.engine_hyper, opt._layout.lr_scales)])
    opt.save_checkpoint(edited)  # param_groups unchanged: the two copies disagree
    results = []
    for path in (good, edited):
        other, oopt = build(algo, seed=9)
        oopt.load_checkpoint(path)
        train_both([(other, oopt)], batches(3, seed=4))
        results.append(params_bits(other))
    assert same_bits(*results)
