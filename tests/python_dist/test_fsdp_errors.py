"""What tandem.torch refuses with DTensor parameters (docs/distributed.md, "The
contract"): each a ValueError naming the parameter and saying what to do. One process,
a 1-rank gloo group."""

import pytest
import torch
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.fsdp import fully_shard
from torch.distributed.tensor import Replicate, Shard, distribute_tensor

import tandem.torch
from tandem._core import dist as _dist
from tandem._core import state

pytestmark = pytest.mark.usefixtures("one_rank_group")


def sharded_linear():
    model = torch.nn.Linear(64, 32)
    fully_shard(model, mesh=init_device_mesh("cpu", (1,)))
    return model


def test_a_sharded_model_steps():
    model = sharded_linear()
    opt = tandem.torch.AdamW(model.named_parameters(), lr=1e-2)
    model(torch.randn(4, 64)).sum().backward()
    opt.step()
    assert opt.last_result.applied and opt.last_result.stepped_tensors == 2


def test_plain_and_sharded_parameters_are_not_mixed():
    model = sharded_linear()
    extra = torch.nn.Parameter(torch.zeros(8))
    with pytest.raises(ValueError, match="'extra' is a plain tensor while other"):
        tandem.torch.AdamW(list(model.named_parameters()) + [("extra", extra)])


def test_early_start_hands_fsdp2_gradients_over():
    # FSDP2 runs the sharded parameters' post-accumulate-grad hooks after its
    # reduce-scatter: early start and release take the gradients there (the bits:
    # test_fsdp_release.py).
    for options in (dict(early_start=True), dict(release_grads=True)):
        model = sharded_linear()
        opt = tandem.torch.AdamW(model.named_parameters(), lr=1e-2, **options)
        model(torch.randn(4, 64)).sum().backward()
        assert opt._core.handed == 2
        assert all((p.grad is None) == ("release_grads" in options)
                   for p in model.parameters())
        opt.step()
        assert opt.last_result.applied and opt.last_result.stepped_tensors == 2


def test_other_placements_are_refused():
    mesh = init_device_mesh("cpu", (1,))
    p = torch.nn.Parameter(distribute_tensor(torch.randn(8, 64), mesh, [Shard(1)]))
    with pytest.raises(ValueError, match="'w': placement .*Shard\\(dim=1\\).* not supported"):
        tandem.torch.AdamW([("w", p)])


def test_replicated_parameters_are_stepped_whole():
    mesh = init_device_mesh("cpu", (1,))
    p = torch.nn.Parameter(distribute_tensor(torch.randn(8, 64), mesh, [Replicate()]))
    opt = tandem.torch.AdamW([("w", p)], momentum_format="q8", variance_format="q8")
    p.grad = distribute_tensor(torch.ones(8, 64), mesh, [Replicate()])
    opt.step()
    assert opt.last_result.applied


def test_group_rule_follows_the_global_shape():
    fmt = ("bf16+ecc8", "q8", "q8")
    assert _dist.tensor_formats(fmt, (4096, 4096), True) is None
    assert _dist.tensor_formats(fmt, (128256, 4096), True) is None
    f32 = {"master": "bf16+ecc8", "momentum": "f32", "variance": "f32"}
    assert _dist.tensor_formats(fmt, (4096,), True) == f32        # norm weights
    assert _dist.tensor_formats(fmt, (7, 40), True) == f32        # K not a multiple of 32
    assert _dist.tensor_formats(fmt, (4096,), False) is None      # not sharded: as given
    assert _dist.tensor_formats(("f32", "f32", "f32"), (4096,), True) is None
    assert state.array_shape("m_scales", (7, 96)) == (7, 3)
