"""Snapshot arrays cross the extension intact under NumPy 2 (this suite's venv has it;
Debian's NumPy 1.24 never showed the bug) with the extension built by Debian's pybind11
2.10, which read the element size from NumPy's dtype struct (see MoveToArray in
python/tandem_ext.cc). Before the fix every state_dict array held its first element
repeated, and every load_state_dict raised ("0-byte elements")."""

import numpy as np
import torch

import tandem.torch


def make_model():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(16, 24), torch.nn.Tanh(), torch.nn.Linear(24, 4))


def train(model, opt, steps, seed):
    g = torch.Generator().manual_seed(seed)
    for _ in range(steps):
        x = torch.randn(8, 16, generator=g)
        opt.zero_grad()
        model(x).pow(2).mean().backward()
        opt.step()


def test_numpy_is_2():
    # The point of running this file here; an older NumPy makes the other tests weaker.
    assert int(np.__version__.split(".")[0]) >= 2


def test_state_dict_masters_are_the_weights():
    model = make_model()
    opt = tandem.torch.AdamW(model.parameters(), lr=1e-2)
    train(model, opt, 2, seed=1)
    sd = opt.state_dict()
    for i, p in enumerate(model.parameters()):
        master = sd["state"][i]["master_f32"]
        assert torch.equal(master, p.detach().reshape(-1)), i
        assert sd["state"][i]["m_f32"].abs().max() > 0  # not a repeated first element
        assert len(set(sd["state"][i]["v_f32"].tolist())) > 1


def test_quantized_round_trip_continues_bit_identically():
    formats = dict(master_format="bf16+ecc8", momentum_format="q8", variance_format="q8")
    a, b = make_model(), make_model()
    opt_a = tandem.torch.AdamW(a.parameters(), lr=1e-2, **formats)
    opt_b = tandem.torch.AdamW(b.parameters(), lr=1e-2, **formats)
    train(a, opt_a, 3, seed=2)
    train(b, opt_b, 3, seed=2)
    saved = opt_b.state_dict()
    train(b, opt_b, 2, seed=5)          # move away, then back
    opt_b.load_state_dict(saved)
    train(a, opt_a, 2, seed=3)
    train(b, opt_b, 2, seed=3)
    for pa, pb in zip(a.parameters(), b.parameters()):
        assert torch.equal(pa, pb)
    sa, sb = opt_a.state_dict()["state"], opt_b.state_dict()["state"]
    for i in sa:
        for key in sa[i]:
            assert torch.equal(sa[i][key], sb[i][key]), (i, key)
