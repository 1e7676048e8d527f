"""Gradient accumulation with early start: k micro-batches per step give the very bits
of early start off, with plain and speculative early start, with and without
``opt.accumulating()`` (host mode, offload fractions 0, 0.5 and 1)."""

import warnings

import pytest
import torch

import tandem.torch
from helpers import batches, make_mlp, params_bits, same_bits

FRACTIONS = (0.0, 0.5, 1.0)
FORMATS = [
    dict(master_format="f32"),
    dict(master_format="bf16+ecc8", momentum_format="q8", variance_format="q8"),
]


def run(k, fraction, formats, early="off", use_context=False, steps=4, device="cpu"):
    """Trains `steps` steps of k micro-batches each; returns (bits, warnings caught)."""
    model = make_mlp(seed=12).to(device)
    opt = tandem.torch.AdamW(model.parameters(), lr=3e-3, weight_decay=0.1,
                             offload_fraction=fraction, chunk_elements=64, max_grad_norm=5.0,
                             early_start=early == "plain",
                             speculative_early_start=early == "speculative", **formats)
    data = [(x.to(device), y.to(device)) for x, y in batches(steps * k, seed=13)]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for t in range(steps):
            opt.zero_grad()
            if early == "speculative":
                opt.begin_step()
            for i in range(k):
                x, y = data[t * k + i]
                loss = torch.nn.functional.mse_loss(model(x), y) / k
                if use_context and i < k - 1:
                    with opt.accumulating():
                        loss.backward()
                else:
                    loss.backward()
            opt.step()
            assert opt.last_result.applied
    return [b.cpu() for b in params_bits(model)], [w for w in caught
                                if issubclass(w.category, tandem.torch.TandemWarning)]


@pytest.mark.parametrize("fraction", FRACTIONS)
@pytest.mark.parametrize("formats", FORMATS, ids=["f32", "q8"])
@pytest.mark.parametrize("early", ["plain", "speculative"])
@pytest.mark.parametrize("k", [1, 2, 3, 4])
def test_accumulation_with_early_start_is_bit_identical(fraction, formats, early, k):
    ref, _ = run(k, fraction, formats)
    got, caught = run(k, fraction, formats, early=early)
    assert same_bits(got, ref)
    accumulation_warnings = [w for w in caught
                             if w.category is tandem.torch.EarlyStartAccumulationWarning]
    assert len(accumulation_warnings) == (1 if k > 1 else 0)  # once per optimizer
    for w in accumulation_warnings:
        assert str(w.message).startswith("early_start: parameter 'g0.p"), str(w.message)


@pytest.mark.parametrize("fraction", FRACTIONS)
@pytest.mark.parametrize("early", ["plain", "speculative"])
@pytest.mark.parametrize("k", [2, 4])
def test_accumulating_context_is_bit_identical_and_quiet(fraction, early, k):
    ref, _ = run(k, fraction, FORMATS[1])
    got, caught = run(k, fraction, FORMATS[1], early=early, use_context=True)
    assert same_bits(got, ref)
    assert caught == []


def test_accumulating_context_restores_the_flag():
    opt = tandem.torch.AdamW(make_mlp().parameters(), early_start=True)
    with pytest.raises(KeyError):
        with opt.accumulating():
            assert opt._handover.accumulating
            raise KeyError("x")
    assert not opt._handover.accumulating
