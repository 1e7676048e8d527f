"""Every input is checked before anything changes, with the constructor's checks
everywhere: malformed constructor arguments raise ValueError/TypeError naming the
argument, loads (state dicts, checkpoint files, torch.optim state dicts) refuse the
hyper-parameters the constructor refuses, tensor learning rates work as in torch, and
copies (copy.deepcopy, pickle) are independent optimizers. Side by side with
torch.optim where torch has an answer; host mode, offload fractions 0, 0.5 and 1;
test_gpu.py runs the check_* functions on a GPU."""

import copy
import json
import math
import pickle

import pytest
import torch

import tandem._C
import tandem.torch
from helpers import batches, make_mlp, params_bits, same_bits, train
from test_state_validation import bits_equal
from test_vs_torch import max_rel_diff

FRACTIONS = (0.0, 0.5, 1.0)
QUANTIZED = dict(master_format="bf16+ecc8", momentum_format="q8", variance_format="q8")


# ---- constructor arguments -----------------------------------------------------------------

ADAMW_ARGS = [
    # (keyword arguments, exception, message; whether torch.optim.AdamW refuses them too)
    (dict(betas=(0.9,)), ValueError, r"group 0: betas must be a pair \(beta1, beta2\) of "
                                     r"numbers, got 1 values", True),
    (dict(betas=None), TypeError, r"group 0: betas must be a pair.*None", True),
    (dict(betas=(0.9, 0.99, 0.5)), ValueError, r"group 0: betas must be a pair.*3 values",
     False),
    (dict(betas="ab"), TypeError, r"group 0: betas must be a pair", True),
    (dict(betas=(0.9, "x")), TypeError, r"group 0: betas\[1\] must be a number, got 'x'",
     True),
    (dict(betas=(-1.0, 0.999)), ValueError, r"group 0: beta1 = -1\.0+ must be in \[0, 1\)",
     True),
    (dict(betas=(0.9, 2.0)), ValueError, r"group 0: beta2 = 2\.0+ must be in \[0, 1\)",
     True),
    (dict(eps="tiny"), TypeError, r"group 0: eps must be a number, got 'tiny'", True),
    (dict(eps=-1.0), ValueError, r"group 0: eps = -1\.0+ must be finite and > 0", True),
    (dict(weight_decay=math.nan), ValueError, r"group 0: weight_decay = nan", True),
    (dict(weight_decay=-0.1), ValueError, r"group 0: weight_decay = -0\.10+ must be", True),
    (dict(lr="1e-3"), TypeError, r"group 0: lr must be a number", True),
    (dict(lr=torch.ones(2)), TypeError, r"group 0: lr must be a number or a one-element",
     True),
    (dict(module=5), TypeError, r"module must be a torch.nn.Module.*int", None),
]


@pytest.mark.parametrize("kwargs, error, match, torch_refuses", ADAMW_ARGS,
                         ids=[repr(a[0]) for a in ADAMW_ARGS])
def test_malformed_adamw_arguments_name_the_argument(kwargs, error, match, torch_refuses):
    model = make_mlp()
    with pytest.raises(error, match=match):
        tandem.torch.AdamW(model.parameters(), **kwargs)
    if torch_refuses is not None:
        torch_kwargs = {k: v for k, v in kwargs.items() if k != "module"}
        try:
            torch.optim.AdamW(model.parameters(), **torch_kwargs)
            refused = False
        except Exception:  # torch's own (IndexError, TypeError, ValueError, ...)
            refused = True
        assert refused == torch_refuses


SGD_ARGS = [
    (dict(momentum=None), TypeError, r"group 0: momentum must be a number"),
    (dict(momentum=-0.5), ValueError, r"group 0: momentum = -0\.50+ must be in \[0, 1\]"),
    (dict(dampening="x"), TypeError, r"group 0: dampening must be a number"),
    (dict(nesterov="yes"), TypeError, r"group 0: nesterov must be a bool, got 'yes'"),
    (dict(momentum=0.0, nesterov=True), ValueError,
     r"group 0: momentum = 0\.0+ must be > 0 when nesterov is set"),
    (dict(momentum="q8"), ValueError, r"momentum_format"),
]


@pytest.mark.parametrize("kwargs, error, match", SGD_ARGS, ids=[repr(a[0]) for a in SGD_ARGS])
def test_malformed_sgd_arguments_name_the_argument(kwargs, error, match):
    with pytest.raises(error, match=match):
        tandem.torch.SGD(make_mlp().parameters(), lr=0.1, **kwargs)


def test_malformed_lion_arguments_name_the_argument():
    with pytest.raises(ValueError, match=r"group 0: betas must be a pair"):
        tandem.torch.Lion(make_mlp().parameters(), betas=(0.9,))
    with pytest.raises(TypeError, match=r"group 0: weight_decay must be a number"):
        tandem.torch.Lion(make_mlp().parameters(), weight_decay=[0.1])


def test_params_argument_is_checked():
    model = make_mlp()
    with pytest.raises(TypeError, match="ordered collections"):
        tandem.torch.AdamW(set(model.parameters()))  # torch < 2 and >= 2 differ; refused
    with pytest.raises(TypeError, match="ordered collections"):
        tandem.torch.AdamW([{"params": set(model.parameters())}])
    with pytest.raises(TypeError, match="ordered collections"):
        torch.optim.AdamW([{"params": set(model.parameters())}])
    with pytest.raises(TypeError, match="iterable of Tensors"):
        tandem.torch.AdamW(5)
    with pytest.raises(ValueError, match=r"no parameter it can step: group 0 param 0 has "
                                         r"dtype torch.int64; tandem steps float32"):
        tandem.torch.AdamW([torch.zeros(3, dtype=torch.int64)])
    with pytest.raises(ValueError, match=r"'w': unsupported dtype torch.float64"):
        tandem.torch.AdamW([("w", torch.zeros(3, dtype=torch.float64, requires_grad=True))])
    # As torch: a tensor that cannot require grad (an integer tensor, a quantized frozen
    # base) is kept and never stepped.
    opt = tandem.torch.AdamW([model[0].weight, torch.zeros(3, dtype=torch.int64)])
    ref = torch.optim.AdamW([model[0].weight, torch.zeros(3, dtype=torch.int64)])
    assert len(opt.param_groups[0]["params"]) == len(ref.param_groups[0]["params"]) == 2
    assert opt.param_names == ["g0.p0"]


# ---- the same checks at every load ---------------------------------------------------------

BAD_VALUES = [
    ("betas", (-1.0, 0.999), r"beta1"),
    ("betas", (0.9, 2.0), r"beta2"),
    ("betas", (0.9,), r"betas must be a pair"),
    ("betas", None, r"betas must be a pair"),
    ("eps", -1.0, r"eps"),
    ("eps", "tiny", r"eps must be a number"),
    ("weight_decay", math.nan, r"weight_decay"),
    ("lr", -1.0, r"lr must be finite"),
]


def trained(fraction=0.0):
    model = make_mlp(seed=3)
    params = list(model.parameters())
    opt = tandem.torch.AdamW([{"params": params[:2]}, {"params": params[2:], "lr": 3e-3}],
                             lr=1e-2, offload_fraction=fraction, chunk_elements=64,
                             **QUANTIZED)
    train(model, opt, batches(2, seed=5))
    return model, opt


def unchanged(model, opt):
    """A check that model and opt are as they are now."""
    state, weights = opt.state_dict(), params_bits(model)
    groups = [{k: v for k, v in g.items() if k != "params"} for g in opt.param_groups]

    def check():
        assert bits_equal(opt.state_dict(), state)
        assert same_bits(params_bits(model), weights)
        assert [{k: v for k, v in g.items() if k != "params"}
                for g in opt.param_groups] == groups
    return check


@pytest.mark.parametrize("key, value, match", BAD_VALUES,
                         ids=["%s=%r" % (k, v) for k, v, _ in BAD_VALUES])
@pytest.mark.parametrize("fraction", FRACTIONS)
def test_load_state_dict_refuses_what_the_constructor_refuses(fraction, key, value, match):
    model, opt = trained(fraction)
    sd = copy.deepcopy(opt.state_dict())
    sd["param_groups"][1][key] = value
    check = unchanged(model, opt)
    with pytest.raises(ValueError, match=r"state dict\['param_groups'\]\[1\].*" + match):
        opt.load_state_dict(sd)
    check()
    train(model, opt, batches(1, seed=6))  # still usable


@pytest.mark.parametrize("key, value, match", BAD_VALUES,
                         ids=["%s=%r" % (k, v) for k, v, _ in BAD_VALUES])
def test_load_torch_state_dict_refuses_what_the_constructor_refuses(key, value, match):
    model, opt = trained()
    ref = torch.optim.AdamW(model.parameters(), lr=1e-2)
    sd = copy.deepcopy(ref.state_dict())
    sd["param_groups"][0]["params"] = [0, 1]
    sd["param_groups"].append(dict(copy.deepcopy(sd["param_groups"][0]), params=[2, 3, 4, 5]))
    sd["param_groups"][1][key] = value
    check = unchanged(model, opt)
    with pytest.raises(ValueError, match=r"state dict\['param_groups'\]\[1\].*" + match):
        tandem.torch.from_torch_state(opt, sd)
    check()


@pytest.mark.skipif(not tandem._C.has_checkpoint, reason="built without checkpoint/")
@pytest.mark.parametrize("key, value, match", BAD_VALUES,
                         ids=["%s=%r" % (k, v) for k, v, _ in BAD_VALUES])
def test_load_checkpoint_refuses_what_the_constructor_refuses(tmp_path, key, value, match):
    model, opt = trained(0.5)
    meta = json.loads(tandem.torch._state._metadata(opt))
    encoded = tandem.torch._state._encode(value, "test") if value is not None else None
    meta["param_groups"][1][key] = encoded
    path = tmp_path / "bad.tckpt"
    opt._core.engine.save_checkpoint(str(path), "none", True, json.dumps(meta))
    check = unchanged(model, opt)
    with pytest.raises(ValueError, match=r"metadata\['param_groups'\]\[1\].*" + match):
        opt.load_checkpoint(path)
    check()


# ---- tensor learning rates -----------------------------------------------------------------

@pytest.mark.parametrize("fraction", FRACTIONS)
def test_tensor_learning_rate_works_as_a_float_one(fraction):
    check_tensor_lr(fraction, "cpu")


def check_tensor_lr(fraction, device):
    results = []
    for lr in (float(torch.tensor(1e-2)), torch.tensor(1e-2)):  # the same value
        model = make_mlp(seed=7).to(device)
        opt = tandem.torch.AdamW(model.parameters(), lr=lr, offload_fraction=fraction,
                                 chunk_elements=64)
        assert opt.param_groups[0]["lr"] is lr  # kept as given, as torch keeps it
        sched = torch.optim.lr_scheduler.StepLR(opt, step_size=2, gamma=0.5)
        train(model, opt, [(x.to(device), y.to(device)) for x, y in batches(5, seed=8)],
              sched)
        results.append(params_bits(model))
    assert same_bits(*results)
    ref_model = make_mlp(seed=7).to(device)
    ref = torch.optim.AdamW(ref_model.parameters(), lr=1e-2)
    sched = torch.optim.lr_scheduler.StepLR(ref, step_size=2, gamma=0.5)
    train(ref_model, ref, [(x.to(device), y.to(device)) for x, y in batches(5, seed=8)], sched)
    assert max_rel_diff(model, ref_model) < 1e-5
    with pytest.raises(ValueError, match=r"group 0: lr must be finite and >= 0, got nan"):
        tandem.torch.AdamW(make_mlp().parameters(), lr=torch.tensor(math.nan))


# ---- copies --------------------------------------------------------------------------------

@pytest.mark.parametrize("fraction", FRACTIONS)
@pytest.mark.parametrize("how", ["deepcopy", "pickle"])
def test_copies_are_independent_optimizers(fraction, how):
    check_copies(fraction, how, "cpu")


def duplicate(obj, how):
    if how == "deepcopy":
        return copy.deepcopy(obj)
    return pickle.loads(pickle.dumps(obj))


def check_copies(fraction, how, device):
    model = make_mlp(seed=11).to(device)
    opt = tandem.torch.AdamW(model.named_parameters(), lr=1e-2, offload_fraction=fraction,
                             chunk_elements=64, **QUANTIZED)
    data = [(x.to(device), y.to(device)) for x, y in batches(6, seed=12)]
    train(model, opt, data[:3])
    model2, opt2 = duplicate((model, opt), how)
    assert type(opt2) is tandem.torch.AdamW and opt2 is not opt
    assert all(a is b for a, b in zip(opt2.param_groups[0]["params"], model2.parameters()))
    assert opt2.param_names == opt.param_names and opt2.step_count == 3
    before = params_bits(model)
    train(model2, opt2, data[3:])       # the copy steps alone
    assert same_bits(params_bits(model), before)
    train(model, opt, data[3:])         # then the original, with the same batches
    assert same_bits(params_bits(model2), params_bits(model))
    assert opt2.tensor_step_counts() == opt.tensor_step_counts() == [6] * 6
    # torch.optim, side by side: the same behaviour.
    ref_model = make_mlp(seed=11).to(device)
    ref = torch.optim.AdamW(ref_model.parameters(), lr=1e-2)
    train(ref_model, ref, data[:3])
    ref_model2, ref2 = duplicate((ref_model, ref), how)
    assert all(a is b for a, b in zip(ref2.param_groups[0]["params"], ref_model2.parameters()))


def test_shallow_copy_is_refused():
    opt = tandem.torch.AdamW(make_mlp().parameters(), lr=1e-2)
    with pytest.raises(TypeError, match="copy.deepcopy"):
        copy.copy(opt)


# ---- a checkpoint that cannot survive one step ---------------------------------------------
# A file whose every CRC checks out but whose state overflows at the next finite step (a
# q8 variance scale at the largest finite bf16 with code 255: sqrt(v) squares to inf; a
# step above 2^52) is refused by load_checkpoint, naming the tensor, and the optimizer is
# left as it was (the engine's ValidateRestorable, engine/snapshot.cc). State dicts and DCP:
# tests/python_dist/test_restorable_state.py.

_TAG = "<IIIIQ"  # kind, tensor, codec, reserved, raw length (docs/checkpoint_format.md)


def rewrite_checkpoint(path, edit_manifest=None, edit_section=None):
    """Rewrites the uncompressed checkpoint at `path` with every CRC recomputed:
    edit_section(manifest, section, payload bytearray) may change a section's bytes in
    place, edit_manifest(manifest) the manifest; the file verifies afterwards."""
    import struct
    data = bytearray(open(path, "rb").read())
    offset, length = struct.unpack_from("<QQ", data, len(data) - 48)
    version = struct.unpack_from("<I", data, len(data) - 48 + 20)[0]
    manifest = json.loads(bytes(data[offset:offset + length]))
    for sec in manifest["sections"]:
        assert sec["compression"] == "none"
        payload = data[sec["offset"]:sec["offset"] + sec["length"]]
        if edit_section is not None:
            edit_section(manifest, sec, payload)
            data[sec["offset"]:sec["offset"] + sec["length"]] = payload
        tag = struct.pack(_TAG, sec["kind"], sec["tensor"], 0, 0, sec["raw_length"])
        sec["crc32c"] = tandem._C.crc32c(tag + bytes(payload))
    if edit_manifest is not None:
        edit_manifest(manifest)
    text = json.dumps(manifest).encode()
    crc = tandem._C.crc32c(struct.pack(_TAG, 0, 0xFFFFFFFF, 0, 0, len(text)) + text)
    size = offset + len(text) + 48
    footer = struct.pack("<QQIIQ", offset, len(text), crc, version, size) + b"TNDMEND1"
    footer += struct.pack("<I", 0)
    footer += struct.pack("<I", tandem._C.crc32c(footer))
    with open(path, "wb") as f:
        f.write(bytes(data[:offset]) + text + footer)


def _unsteppable_variance(edited):
    """A section edit: the first tensor of 64 elements or more gets group 1 of its q8
    variance at the largest finite scale with one code at 255; its name goes to edited."""
    def edit(manifest, sec, payload):
        k = next(i for i, t in enumerate(manifest["tensors"]) if t["numel"] >= 64)
        if sec["tensor"] != k:
            return
        edited[:] = [manifest["tensors"][k]["name"]]
        if sec["kind"] == 10:  # v_scales (bf16 bits): scale 1 = the largest finite bf16
            payload[2:4] = (0x7F7F).to_bytes(2, "little")
        elif sec["kind"] == 9:  # v_codes (u8): group 1 zero but element 37 at the top
            payload[32:64] = bytes(32)
            payload[37] = 255
    return edit


@pytest.mark.skipif(not tandem._C.has_checkpoint, reason="built without checkpoint/")
@pytest.mark.parametrize("edit, match", [
    ("variance", r"v_scales\[1\] = 3\.38953139e\+38 with v_codes\[37\] = 255 decodes to "
                 r"sqrt\(v\) = 3\.38953139e\+38, whose square \(the variance the step uses\) "
                 r"is infinite: the state cannot survive one step"),
    (2 ** 53, r"step 9007199254740992 is above 2\^52, the largest a run may resume at"),
    (2 ** 52 + 1, r"step 4503599627370497 is above 2\^52"),
], ids=["q8-variance-overflows", "step-2^53", "step-2^52+1"])
def test_checkpoint_that_cannot_survive_one_step_is_refused_at_load(tmp_path, edit, match):
    model = make_mlp()
    opt = tandem.torch.AdamW(model.parameters(), lr=1e-2, offload_fraction=0.5, **QUANTIZED)
    train(model, opt, batches(2))
    path = str(tmp_path / "a.ckpt")
    opt.save_checkpoint(path)
    rewrite_checkpoint(path)  # unedited, the rewritten file loads: the rewrite is sound
    opt.load_checkpoint(path)
    edited = []
    if edit == "variance":
        rewrite_checkpoint(path, edit_section=_unsteppable_variance(edited))
        match = r"tensor '%s'.*" % edited[0].replace(".", r"\.") + match
    else:
        rewrite_checkpoint(path, edit_manifest=lambda m: m.update(step=edit))
    before, weights = copy.deepcopy(opt.state_dict()), params_bits(model)
    with pytest.raises(ValueError, match=match) as caught:
        opt.load_checkpoint(path)
    assert "CRC" not in str(caught.value)  # refused for what it holds, not as damage
    assert bits_equal(opt.state_dict(), before)
    assert same_bits(params_bits(model), weights)
    train(model, opt, batches(1))  # and the optimizer goes on
