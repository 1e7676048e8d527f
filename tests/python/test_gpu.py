"""GPU mode (skipped without a CUDA device): bit-identity with host mode and across
fractions, streams other than the default, early start, state dicts moving between GPU
and host mode, and the torch.optim semantics of test_source_of_truth, test_missing_grads,
test_accumulation, test_robustness and test_named on the GPU."""

import pytest
import torch

import tandem.torch
from helpers import batches, make_mlp, params_bits, same_bits, train

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")


def step_with_grads(device, fraction, steps=4, stream=None, **options):
    """Steps an MLP's parameters on `device` with gradients generated on the CPU, so GPU
    and host mode see the very same inputs."""
    model = make_mlp(seed=3).to(device)
    opt = tandem.torch.AdamW(model.parameters(), lr=1e-2, weight_decay=0.1,
                             offload_fraction=fraction, chunk_elements=64, **options)
    g = torch.Generator().manual_seed(11)
    for _ in range(steps):
        opt.zero_grad()
        for p in model.parameters():
            p.grad = torch.randn(p.shape, generator=g).to(p.device, p.dtype)
        if stream is not None:
            with torch.cuda.stream(stream):
                opt.step()
        else:
            opt.step()
    torch.cuda.synchronize()
    return [b.cpu() for b in params_bits(model)], opt


@pytest.mark.parametrize("formats", [
    dict(master="f32", momentum="f32", variance="f32"),
    dict(master="bf16+ecc8", momentum="q8", variance="q8"),
])
def test_gpu_equals_host_mode_at_every_fraction(formats):
    host, _ = step_with_grads("cpu", 0.0, **formats)
    for fraction in (0.0, 0.5, 1.0):
        gpu, opt = step_with_grads("cuda", fraction, **formats)
        assert opt.mode == "gpu"
        assert same_bits(gpu, host), fraction


def test_non_default_stream():
    ref, _ = step_with_grads("cuda", 0.5)
    got, _ = step_with_grads("cuda", 0.5, stream=torch.cuda.Stream())
    assert same_bits(got, ref)


def test_early_start_on_gpu_is_bit_identical():
    results = []
    for early in (False, True):
        model = make_mlp(seed=7).cuda()
        opt = tandem.torch.AdamW(model.parameters(), lr=1e-2, offload_fraction=0.5,
                                 early_start=early, chunk_elements=64)
        handles = opt.register_forward_waits(model)
        data = [(x.cuda(), y.cuda()) for x, y in batches(10, seed=8)]
        losses = train(model, opt, data)
        for h in handles:
            h.remove()
        results.append((losses, params_bits(model)))
    assert results[0][0] == results[1][0]
    assert same_bits(results[0][1], results[1][1])


def test_state_dict_from_gpu_loads_in_host_mode():
    gpu_bits, gpu_opt = step_with_grads("cuda", 0.5, master="bf16+ecc8", momentum="q8",
                                        variance="q8")
    model = make_mlp(seed=99)
    host_opt = tandem.torch.AdamW(model.parameters(), lr=1e-2, weight_decay=0.1,
                                  master="bf16+ecc8", momentum="q8", variance="q8")
    host_opt.load_state_dict(gpu_opt.state_dict())
    assert same_bits(params_bits(model), gpu_bits)


# ---- torch.optim semantics on the GPU ----------------------------------------------------

import test_accumulation  # noqa: E402
import test_missing_grads  # noqa: E402
import test_robustness  # noqa: E402
import test_source_of_truth  # noqa: E402

FRACTIONS = (0.0, 0.5, 1.0)


@pytest.mark.parametrize("fraction", FRACTIONS)
@pytest.mark.parametrize("master", test_source_of_truth.MASTERS)
@pytest.mark.parametrize("dtype", test_source_of_truth.DTYPES, ids=["fp32", "bf16"])
def test_gpu_load_state_dict_after_build_matches_torch(fraction, master, dtype):
    test_source_of_truth.check_issue_repro(fraction, master, dtype, "cuda")


@pytest.mark.parametrize("fraction", FRACTIONS)
@pytest.mark.parametrize("master", test_source_of_truth.MASTERS)
@pytest.mark.parametrize("dtype", test_source_of_truth.DTYPES, ids=["fp32", "bf16"])
@pytest.mark.parametrize("write", test_source_of_truth.WRITES,
                         ids=lambda w: w.__name__.strip("_"))
def test_gpu_written_weights_are_picked_up(fraction, master, dtype, write):
    expected, got = test_source_of_truth.written_then_stepped(fraction, master, dtype, write,
                                                              device="cuda")
    test_source_of_truth.assert_holds(expected, got, master, dtype)


@pytest.mark.parametrize("fraction", FRACTIONS)
def test_gpu_reload_mid_training_matches_torch(fraction):
    test_source_of_truth.check_reload_mid_training(fraction, "cuda")


@pytest.mark.parametrize("fraction", FRACTIONS)
def test_gpu_frozen_after_build_does_not_move(fraction):
    test_missing_grads.check_frozen_after_build(
        fraction, dict(master_format="bf16+ecc8", momentum_format="q8"), "cuda")


@pytest.mark.parametrize("fraction", FRACTIONS)
@pytest.mark.parametrize("algo", ["adamw", "sgd"])
def test_gpu_freeze_unfreeze_loop_matches_torch(fraction, algo):
    test_missing_grads.check_freeze_unfreeze_loop(fraction, algo, "cuda")


@pytest.mark.parametrize("fraction", FRACTIONS)
def test_gpu_expert_without_gradient_matches_torch(fraction):
    test_missing_grads.check_moe(fraction, "cuda")


@pytest.mark.parametrize("fraction", FRACTIONS)
@pytest.mark.parametrize("early", ["plain", "speculative"])
@pytest.mark.parametrize("k", [1, 3])
def test_gpu_accumulation_with_early_start_is_bit_identical(fraction, early, k):
    formats = test_accumulation.FORMATS[1]
    ref, _ = test_accumulation.run(k, fraction, formats, device="cuda")
    got, _ = test_accumulation.run(k, fraction, formats, early=early, device="cuda")
    quiet, caught = test_accumulation.run(k, fraction, formats, early=early,
                                          use_context=True, device="cuda")
    assert same_bits(got, ref) and same_bits(quiet, ref) and caught == []


def test_gpu_replaced_gradient_is_copied_or_refused():
    results = []
    for replace in (False, True):
        model = make_mlp().cuda()
        opt = tandem.torch.AdamW(model.named_parameters(), lr=1e-2, offload_fraction=0.5,
                                 chunk_elements=64)
        train(model, opt, [(x.cuda(), y.cuda()) for x, y in batches(1)])
        g = torch.Generator().manual_seed(4)
        for p in model.parameters():
            new = torch.randn(p.shape, generator=g).cuda()
            if replace:
                p.grad.data = new
            else:
                p.grad = new
        opt.step()
        results.append([b.cpu() for b in params_bits(model)])
    assert same_bits(results[0], results[1])
    model[0].bias.grad.data = torch.zeros(37, dtype=torch.float16, device="cuda")
    with pytest.raises(ValueError, match=r"'0.bias' \(shape \(37,\), torch.float32\)"):
        opt.step()


def test_gpu_names_and_shapes_reach_the_engine():
    model = make_mlp().cuda()
    opt = tandem.torch.AdamW(model.named_parameters(), offload_fraction=0.5)
    tensors = opt._core.engine.snapshot()["tensors"]
    assert [t["name"] for t in tensors] == [n for n, _ in model.named_parameters()]
    assert [list(t["shape"]) for t in tensors] == [list(p.shape) for p in model.parameters()]


@pytest.mark.parametrize("fraction", FRACTIONS)
def test_gpu_state_dict_from_another_thread_sees_a_state_between_steps(fraction):
    test_robustness.check_concurrent_state_dicts(fraction, "cuda")


def test_gpu_skipped_steps_are_counted():
    model = make_mlp().cuda()
    opt = tandem.torch.AdamW(model.parameters(), lr=1e-2, offload_fraction=0.5)
    before = [b.cpu() for b in params_bits(model)]
    x, y = batches(1)[0]
    opt.zero_grad()
    (torch.nn.functional.mse_loss(model(x.cuda()), y.cuda()) * float("nan")).backward()
    with pytest.warns(tandem.torch.SkippedStepWarning):
        opt.step()
    assert opt.skipped_steps == 1
    assert same_bits([b.cpu() for b in params_bits(model)], before)


# ---- torch.optim semantics of test_grads_as_torch, test_param_groups_change and
# ---- test_inputs_checked on the GPU ---------------------------------------------------------

import test_grads_as_torch  # noqa: E402
import test_inputs_checked  # noqa: E402
import test_param_groups_change  # noqa: E402


@pytest.mark.parametrize("fraction", FRACTIONS)
def test_gpu_second_step_with_the_same_gradient_steps_again(fraction):
    test_grads_as_torch.check_second_step(fraction, "cuda")


@pytest.mark.parametrize("fraction", FRACTIONS)
def test_gpu_gradient_written_through_data_is_stepped(fraction):
    test_grads_as_torch.check_hidden_writes(fraction, test_grads_as_torch._through_data,
                                            "cuda")


@pytest.mark.parametrize("fraction", FRACTIONS)
@pytest.mark.parametrize("move", ["_swap", "_rotate", "_transpose", "_transpose_swap"])
def test_gpu_gradients_trading_places(fraction, move):
    test_grads_as_torch.check_traded_gradients(fraction, getattr(test_grads_as_torch, move),
                                               "cuda")


@pytest.mark.parametrize("fraction", FRACTIONS)
@pytest.mark.parametrize("early", ["plain", "speculative"])
@pytest.mark.parametrize("edit", ["_clip", "_scale_in_place", "_replace", "_data_assign"])
def test_gpu_gradient_changed_after_early_start_is_redone(fraction, early, edit):
    test_grads_as_torch.check_early_start_redone(fraction, early,
                                                 getattr(test_grads_as_torch, edit), "cuda")


@pytest.mark.parametrize("fraction", FRACTIONS)
def test_gpu_zero_grad_from_another_thread_never_splits_a_step(fraction):
    test_grads_as_torch.check_concurrent_zero_grad(fraction, "cuda")


@pytest.mark.parametrize("fraction", FRACTIONS)
@pytest.mark.parametrize("algo", ["adamw", "sgd"])
def test_gpu_params_appended_and_removed_are_followed(fraction, algo):
    test_param_groups_change.check_appended_and_removed(fraction, algo, "cuda")


@pytest.mark.parametrize("fraction", FRACTIONS)
@pytest.mark.parametrize("algo", ["adamw", "sgd"])
def test_gpu_add_param_group_as_backbone_finetuning(fraction, algo):
    test_param_groups_change.check_backbone_finetuning(fraction, algo, "cuda")


@pytest.mark.parametrize("fraction", FRACTIONS)
def test_gpu_tensor_learning_rate(fraction):
    test_inputs_checked.check_tensor_lr(fraction, "cuda")


@pytest.mark.parametrize("fraction", FRACTIONS)
@pytest.mark.parametrize("how", ["deepcopy", "pickle"])
def test_gpu_copies_are_independent_optimizers(fraction, how):
    test_inputs_checked.check_copies(fraction, how, "cuda")


@pytest.mark.parametrize("fraction", [0.0, 0.5, 1.0])
@pytest.mark.parametrize("compute", ["host", "gpu", "0.5"])
def test_gpu_release_is_bit_identical_to_no_release(fraction, compute):
    # release_grads on the GPU: each gradient handed over from autograd's hook on its
    # stream, copied where the step needs it, p.grad None after backward; the bits of
    # the same loop without release (the GPU's backward gives other gradients than the
    # CPU's, so host mode is compared where the gradients are given: above).
    from test_release import release_bits
    release_bits(fraction, compute, device="cuda")
