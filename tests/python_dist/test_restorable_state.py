"""A state a run cannot go on from is refused when it is loaded, through state dicts and
DCP alike (the engine's Restore applies ValidateRestorable: include/tandem/snapshot.h),
naming the tensor, with the message `tandem-ckpt to-torch` and checkpoint files give
(tests/checkpoint/tool_test.cc), and the optimizer is left unchanged: a q8 variance whose
scale and code decode to an infinite variance, and a step above 2^52."""

import copy

import pytest

torch = pytest.importorskip("torch")
import torch.distributed.checkpoint as dcp  # noqa: E402

import tandem._C  # noqa: E402
import tandem.dcp  # noqa: E402
import tandem.torch  # noqa: E402

pytestmark = pytest.mark.filterwarnings("ignore:torch.distributed is disabled:UserWarning")

MESSAGE = ("v_scales[1] = 3.38953139e+38 with v_codes[37] = 255 decodes to sqrt(v) = "
           "3.38953139e+38, whose square (the variance the step uses) is infinite: the "
           "state cannot survive one step")


def _optimizer(seed):
    torch.manual_seed(seed)
    p = torch.nn.Parameter(torch.randn(64))
    opt = tandem.torch.AdamW([p], lr=1e-3, master_format="bf16+ecc8", momentum_format="q8",
                             variance_format="q8", offload_fraction=1.0)
    p.grad = torch.randn(64)
    opt.step()
    return p, opt


def _unstepable(sd):
    sd = copy.deepcopy(sd)
    s = sd["state"][0]
    s["v_scales"].view(torch.int16)[1] = 0x7F7F  # the largest finite bf16
    s["v_codes"][32:64] = 0
    s["v_codes"][37] = 255
    return sd


def _same(a, b):
    return all(torch.equal(x.reshape(-1).view(torch.uint8), y.reshape(-1).view(torch.uint8))
               if torch.is_tensor(x)
               else x == y for x, y in zip(a.values(), b.values()))


def test_state_dict_with_a_variance_that_cannot_be_stepped_is_refused():
    _, source = _optimizer(0)
    p, opt = _optimizer(1)
    before, weights = copy.deepcopy(opt.state_dict()["state"][0]), p.detach().clone()
    with pytest.raises(ValueError, match="tensor '.*': " + MESSAGE.replace("(", r"\(")
                       .replace(")", r"\)").replace("[", r"\[").replace("]", r"\]")
                       .replace("+", r"\+").replace("^", r"\^")):
        opt.load_state_dict(_unstepable(source.state_dict()))
    assert _same(opt.state_dict()["state"][0], before)
    assert torch.equal(p.detach(), weights)
    opt.load_state_dict(source.state_dict())  # the undamaged one loads


def test_through_dcp_too(tmp_path):
    _, source = _optimizer(0)
    path = str(tmp_path / "ckpt")
    tandem.dcp.save({"optim": _unstepable(source.state_dict())}, path)
    p, opt = _optimizer(1)
    target = {"optim": opt.state_dict()}
    tandem.dcp.load(target, path)  # the checkpoint is intact: DCP loads the values
    with pytest.raises(ValueError, match="cannot survive one step"):
        opt.load_state_dict(target["optim"])


def test_step_above_2_pow_52_is_refused():
    _, source = _optimizer(0)
    p, opt = _optimizer(1)
    sd = source.state_dict()
    for step in (2 ** 52 + 1, 2 ** 53):
        bad = copy.deepcopy(sd)
        bad["tandem"]["step"] = step  # the global step (each tensor's stays 1)
        with pytest.raises(ValueError, match=f"step {step} is above 2\\^52"):
            opt.load_state_dict(bad)
    assert opt.state_dict()["state"][0]["step"] == 1
