"""FSDP2 (fully_shard, DTensor) + tandem.torch on CPUs with gloo, 1 to 4 processes.

Each case starts tests/python_dist/fsdp_worker.py under torchrun and compares the full
parameters it writes. Gradients are given per (step, parameter) from a seed, the same at
every world size (fsdp_worker.py), so that sharded and unsharded runs can be compared bit
for bit; one pair of runs uses FSDP2's real forward/backward instead.
"""

import math
import os

import pytest
import torch

from workers import run_worker

WORKER = os.path.join(os.path.dirname(__file__), "fsdp_worker.py")
Q8 = "bf16+ecc8/q8/q8"
F32 = "f32/f32/f32"


def run(tmp, name, nproc, *args):
    """Runs the worker on `nproc` processes; returns what rank 0 recorded."""
    return run_worker(WORKER, tmp, name, nproc, *args)[0]


def assert_same_params(a, b):
    assert a["params"].keys() == b["params"].keys()
    for name in a["params"]:
        x, y = a["params"][name], b["params"][name]
        assert torch.equal(x.view(-1).view(torch.uint8), y.view(-1).view(torch.uint8)), (
            "%s differs: world %d vs %d, max |diff| %g" % (
                name, a["world"], b["world"], (x.double() - y.double()).abs().max()))


@pytest.fixture(scope="module")
def tmp(tmp_path_factory):
    return str(tmp_path_factory.mktemp("fsdp"))


@pytest.fixture(scope="module")
def reference(tmp):
    """One process, fully_shard on a 1-rank mesh, quantized state, 5 steps."""
    return run(tmp, "ref", 1, "--formats", Q8, "--steps", 5)


@pytest.fixture(scope="module")
def saved_at_4(tmp):
    """4 processes, saved with DCP after step 2, then on to step 5."""
    return run(tmp, "save4", 4, "--formats", Q8, "--steps", 5, "--save-at", 2,
               "--ckpt", os.path.join(tmp, "ck4"))


def test_four_ranks_equal_one_bit_for_bit(reference, saved_at_4):
    # (7, 96) on 4 ranks is 2, 2, 2, 1 rows; (3, 96) leaves rank 3 an empty shard.
    assert all(reference["applied"]) and all(saved_at_4["applied"])
    assert_same_params(reference, saved_at_4)
    assert reference["norms"] == saved_at_4["norms"]


@pytest.mark.parametrize("compute", ["gpu", "0.5"])
def test_streamed_shards_equal_one_bit_for_bit(tmp, reference, compute):
    # offload_compute streams host-resident state (host mode: through host slots, the
    # streaming data path) of each rank's local shards: the bits do not change.
    got = run(tmp, "stream_" + compute, 2, "--formats", Q8, "--steps", 5, "--fraction", 1.0,
              "--offload-compute", compute)
    assert all(got["applied"])
    assert_same_params(reference, got)
    assert reference["norms"] == got["norms"]


def test_every_rank_has_the_same_state_keys(reference, saved_at_4):
    # Created at construction for every parameter: DCP never runs its fake step.
    assert saved_at_4["sharded_keys"] == reference["sharded_keys"]
    assert "odd.weight" in saved_at_4["sharded_keys"]


@pytest.mark.parametrize("nproc,fraction", [(3, 1.0), (2, 0.0), (1, 0.37)])
def test_dcp_reshards_exactly(tmp, reference, saved_at_4, nproc, fraction):
    del saved_at_4  # wrote the checkpoint
    resumed = run(tmp, "load%d" % nproc, nproc, "--formats", Q8, "--steps", 5,
                  "--fraction", fraction, "--load-from", os.path.join(tmp, "ck4"),
                  "--first-step", 2)
    assert_same_params(reference, resumed)


def test_dcp_back_to_four_ranks(tmp, reference, saved_at_4):
    del saved_at_4
    ck1 = os.path.join(tmp, "ck1")
    run(tmp, "load1save", 1, "--formats", Q8, "--steps", 3, "--load-from",
        os.path.join(tmp, "ck4"), "--first-step", 2, "--save-at", 3, "--ckpt", ck1)
    resumed = run(tmp, "load4", 4, "--formats", Q8, "--steps", 5, "--load-from", ck1,
                  "--first-step", 3)
    assert_same_params(reference, resumed)


def test_hsdp_2x2_equals_one_rank(tmp, reference):
    hsdp = run(tmp, "hsdp", 4, "--formats", Q8, "--steps", 5, "--hsdp")
    assert_same_params(reference, hsdp)
    # Replicas hold the same shards: counted once, the norm is the 1-rank norm, exactly.
    assert hsdp["norms"] == reference["norms"]


def test_plain_model_equals_three_ranks_with_f32_state(tmp):
    plain = run(tmp, "plain", 1, "--formats", F32, "--steps", 3, "--plain")
    sharded = run(tmp, "f32x3", 3, "--formats", F32, "--steps", 3)
    assert_same_params(plain, sharded)


def test_clipping_is_bit_identical_at_any_world_size(tmp):
    one = run(tmp, "clip1", 1, "--formats", Q8, "--steps", 3, "--clip", 1.0)
    three = run(tmp, "clip3", 3, "--formats", Q8, "--steps", 3, "--clip", 1.0)
    # The exact sum of squares (Note [Exact sum of squares]): the same norm, so the same
    # clip coefficient and the same weights, at 1 and 3 ranks.
    assert all(a > 1.0 for a in one["norms"])  # clipping triggers
    assert one["norms"] == three["norms"]
    assert_same_params(one, three)
    # The norm is torch's clip_grad_norm_ of the same gradients (which adds float32
    # squares in float32, in an order that depends on the world size) within an ulp or
    # two of float32.
    for run_ in (one, three):
        for ours, theirs in zip(run_["norms"], run_["torch_norms"]):
            assert math.isclose(ours, theirs, rel_tol=2.5e-7), (ours, theirs)


def test_a_nan_on_one_rank_skips_the_step_everywhere(tmp):
    skipped = run(tmp, "nan", 2, "--formats", Q8, "--steps", 3, "--nan-rank", 1,
                  "--nan-step", 2)
    assert skipped["applied"] == [True, True, False]  # rank 0's own gradients were finite
    two_steps = run(tmp, "two", 2, "--formats", Q8, "--steps", 2)
    assert_same_params(skipped, two_steps)


def test_real_backward_two_ranks_equal_one(tmp):
    # FSDP2's reduce-scatter averages two equal gradients: exact, so the runs agree.
    one = run(tmp, "bw1", 1, "--formats", Q8, "--steps", 3, "--grads", "backward")
    two = run(tmp, "bw2", 2, "--formats", Q8, "--steps", 3, "--grads", "backward")
    assert all(two["applied"])
    assert_same_params(one, two)


def test_fp32_export_loads_into_torch_adamw_under_fsdp2(tmp):
    out = run(tmp, "export", 2, "--formats", Q8, "--steps", 2, "--export-check")
    assert out["export_same"] and out["export_finite"]
