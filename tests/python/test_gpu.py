"""GPU mode (skipped without a CUDA device): bit-identity with host mode and across
fractions, streams other than the default, early start, and state dicts moving between
GPU and host mode."""

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
            p.grad.copy_(torch.randn(p.shape, generator=g).to(p.dtype))
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
