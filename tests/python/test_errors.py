"""(e) Clear Python exceptions for what the binding or the engine refuses."""

import os

import pytest
import torch

import tandem._C
import tandem.torch
from helpers import batches, make_mlp, train


def param(t):
    return torch.nn.Parameter(t)


def test_non_contiguous_parameter():
    with pytest.raises(ValueError, match="not contiguous"):
        tandem.torch.AdamW([param(torch.zeros(4, 3).t())])


def test_unsupported_dtype():
    with pytest.raises(ValueError, match="unsupported dtype torch.float64"):
        tandem.torch.AdamW([param(torch.zeros(4, dtype=torch.float64))])


def test_sparse_gradient():
    p = param(torch.zeros(4, 3))
    opt = tandem.torch.SGD([p], lr=0.1)
    p.grad = torch.zeros(4, 3).to_sparse()
    with pytest.raises(ValueError, match="sparse gradients"):
        opt.step()


def test_sparse_gradient_at_construction():
    p = param(torch.zeros(4, 3))
    p.grad = torch.zeros(4, 3).to_sparse()
    with pytest.raises(ValueError, match="sparse gradients"):
        tandem.torch.SGD([p], lr=0.1)


def test_mixed_devices():
    with pytest.raises(ValueError, match="mixed devices"):
        tandem.torch.AdamW([param(torch.zeros(4)), param(torch.zeros(4, device="meta"))])


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_mixed_cpu_and_cuda():
    with pytest.raises(ValueError, match="mixed devices"):
        tandem.torch.AdamW([param(torch.zeros(4, device="cuda")), param(torch.zeros(4))])


@pytest.mark.skipif(torch.cuda.device_count() < 2, reason="needs two CUDA devices")
def test_parameter_on_another_gpu():
    with pytest.raises(ValueError, match="first parameter is on cuda:0"):
        tandem.torch.AdamW([param(torch.zeros(4, device="cuda:0")),
                            param(torch.zeros(4, device="cuda:1"))])


def test_engine_errors_become_value_errors():
    model = make_mlp()
    with pytest.raises(ValueError, match="offload_fraction"):
        tandem.torch.AdamW(model.parameters(), offload_fraction=1.5)
    with pytest.raises(ValueError, match="chunk_elements"):
        tandem.torch.AdamW(model.parameters(), chunk_elements=33)
    with pytest.raises(ValueError, match="variance format q8"):
        tandem.torch.Lion(model.parameters(), variance="q8")
    with pytest.raises(ValueError, match="beta1|betas|group 0"):
        tandem.torch.AdamW(model.parameters(), betas=(1.5, 0.999))
    with pytest.raises(ValueError, match="bf17|master"):
        tandem.torch.AdamW(model.parameters(), master="bf17")
    with pytest.raises(ValueError, match="amsgrad"):
        tandem.torch.AdamW(model.parameters(), amsgrad=True)


def test_sgd_nesterov_names_what_it_lacks():
    # Nesterov without momentum used to blame the dampening, which was 0 as asked.
    model = make_mlp()
    with pytest.raises(ValueError, match=r"momentum = 0\.000000 must be > 0 when nesterov") as e:
        tandem.torch.SGD(model.parameters(), lr=0.1, nesterov=True)
    assert "dampening" not in str(e.value)
    with pytest.raises(ValueError, match=r"dampening = 0\.500000 must be 0 when nesterov"):
        tandem.torch.SGD(model.parameters(), lr=0.1, momentum=0.9, dampening=0.5, nesterov=True)


def test_bad_learning_rate_changes_nothing():
    model = make_mlp()
    opt = tandem.torch.AdamW(model.parameters(), lr=1e-3)
    opt.param_groups[0]["lr"] = float("nan")
    with pytest.raises(ValueError, match="learning rate"):
        train(model, opt, batches(1))


def test_reallocated_parameter_of_another_shape_or_dtype():
    # Same shape and dtype rebinds (test_rebind.py); another shape or dtype raises,
    # naming the parameter, and changes nothing.
    for change in (lambda w: w.half(), lambda w: w[:3].clone()):
        model = make_mlp()
        opt = tandem.torch.AdamW(model.named_parameters(), lr=1e-3)
        model[0].weight.data = change(model[0].weight.data)
        with pytest.raises(RuntimeError, match="'0.weight'.*built for shape"):
            opt.step()
        assert opt.rebinds == 0 and opt.step_count == 0


def test_new_param_groups_are_taken():
    # As torch.optim (test_param_groups_change.py has the details); a bad one raises.
    model = make_mlp()
    opt = tandem.torch.AdamW(list(model.parameters())[:2], lr=1e-3)
    with pytest.raises(ValueError, match="appears twice"):
        opt.add_param_group({"params": list(model.parameters())[1:]})
    opt.add_param_group({"params": list(model.parameters())[2:], "lr": 1e-4})
    assert opt.param_groups[1]["lr"] == 1e-4 and opt.param_groups[1]["eps"] == 1e-8
    train(model, opt, batches(1))
    assert opt.tensor_step_counts() == [1] * 6


def test_non_finite_gradient_skips_step():
    model = make_mlp()
    opt = tandem.torch.AdamW(model.parameters(), lr=1e-3)
    before = [p.detach().clone() for p in model.parameters()]
    opt.zero_grad()
    for p in model.parameters():
        p.grad = torch.zeros_like(p)
    next(model.parameters()).grad[0, 0] = float("inf")
    with pytest.warns(tandem.torch.SkippedStepWarning):
        opt.step()
    assert opt.last_result.applied is False
    assert opt.skipped_steps == 1
    assert all(torch.equal(a, p) for a, p in zip(before, model.parameters()))


def test_zero_grad_keeps_buffers_and_model_zero_grad_is_adopted():
    model = make_mlp()
    opt = tandem.torch.SGD(model.parameters(), lr=0.1)
    train(model, opt, batches(2))
    ptrs = [p.grad.data_ptr() for p in model.parameters()]
    opt.zero_grad(set_to_none=True)  # torch.optim's default: p.grad = None
    assert all(p.grad is None for p in model.parameters())
    x, y = batches(1)[0]
    torch.nn.functional.mse_loss(model(x), y).backward()  # the same buffers come back
    assert [p.grad.data_ptr() for p in model.parameters()] == ptrs
    opt.step()
    model.zero_grad(set_to_none=True)  # torch's own: p.grad = None
    x, y = batches(1)[0]
    torch.nn.functional.mse_loss(model(x), y).backward()
    opt.step()  # copies the new gradients into the engine's buffers
    assert [p.grad.data_ptr() for p in model.parameters()] == ptrs
    assert opt.last_result.applied and opt.last_result.grad_norm > 0


@pytest.mark.skipif(not tandem._C.has_checkpoint, reason="built without checkpoint/")
def test_save_checkpoint_to_a_directory_says_so(tmp_path, monkeypatch):
    model = make_mlp()
    opt = tandem.torch.AdamW(model.parameters(), lr=1e-3)
    monkeypatch.chdir(tmp_path)
    for path in (".", str(tmp_path)):
        with pytest.raises(ValueError, match=r"'%s': is a directory; name a file in it"
                                             % path.replace(".", r"\.")):
            opt.save_checkpoint(path)
    assert os.listdir(tmp_path) == []
