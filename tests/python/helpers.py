"""Helpers shared by the tandem.torch tests."""

import torch

import tandem.torch  # noqa: F401  (fails loudly if PYTHONPATH lacks <build>/python)


def make_mlp(seed=0, dtype=torch.float32):
    """A small MLP with odd sizes (not multiples of 32) and biases."""
    torch.manual_seed(seed)
    model = torch.nn.Sequential(
        torch.nn.Linear(13, 37), torch.nn.Tanh(), torch.nn.Linear(37, 29), torch.nn.Tanh(),
        torch.nn.Linear(29, 5))
    return model.to(dtype)


def batches(n, seed=1, dtype=torch.float32):
    g = torch.Generator().manual_seed(seed)
    out = []
    for _ in range(n):
        x = torch.randn(64, 13, generator=g, dtype=dtype)
        y = torch.randn(64, 5, generator=g, dtype=dtype)
        out.append((x, y))
    return out


def train(model, opt, data, scheduler=None, zero_first=True):
    """Runs one step per batch; returns the losses."""
    losses = []
    for x, y in data:
        if zero_first:
            opt.zero_grad()
        loss = torch.nn.functional.mse_loss(model(x).float(), y.float())
        loss.backward()
        opt.step()
        if scheduler is not None:
            scheduler.step()
        losses.append(loss.item())
    return losses


def params_bits(model):
    """Bit patterns of every parameter (for bit-for-bit comparisons)."""
    out = []
    for p in model.parameters():
        t = p.detach().contiguous()
        out.append(t.view(torch.int16 if t.element_size() == 2 else torch.int32).clone())
    return out


def same_bits(a, b):
    return len(a) == len(b) and all(torch.equal(x, y) for x, y in zip(a, b))
