"""Early start and gradient release under FSDP2 (fully_shard, DTensor) on CPUs with gloo,
1 to 4 processes (docs/distributed.md, "Early start and gradient release").

Each case starts tests/python_dist/release_worker.py under torchrun with FSDP2's real
backward, whose post-accumulate-grad hooks hand every shard's gradient to the engine as
soon as its reduce-scatter assigned it. Against the same run with early start off (the
gradients read at step()), every rank's parameters, local state arrays, norms and
skipped steps are compared bit for bit, through steps that clip and a NaN on one rank.
"""

import os
import pytest
import torch

from workers import run_worker

WORKER = os.path.join(os.path.dirname(__file__), "release_worker.py")
TENSORS = 9  # the model's parameters: every one is handed over during backward
NAN_STEP = 3
STEPS = 20  # the bit-identity runs at 1, 2 and 4 processes (the others: the worker's 6)


def run(tmp, name, nproc, *args):
    """Runs the worker on `nproc` processes; returns every rank's record."""
    return run_worker(WORKER, tmp, name, nproc, *args)


def assert_same(got, want, what):
    for a, b in zip(got, want):
        assert a["applied"] == b["applied"], what
        assert a["norms"] == b["norms"], what
        for name in b["params"]:
            x, y = a["params"][name], b["params"][name]
            assert torch.equal(x.view(-1).view(torch.uint8), y.view(-1).view(torch.uint8)), (
                "%s: %s differs on rank %d" % (what, name, a["rank"]))
        assert len(a["state"]) == len(b["state"])
        assert all(torch.equal(x, y) for x, y in zip(a["state"], b["state"])), (
            "%s: rank %d's state differs" % (what, a["rank"]))


@pytest.fixture(scope="module")
def tmp(tmp_path_factory):
    return str(tmp_path_factory.mktemp("fsdp_release"))


def reference(tmp, nproc, *args):
    ref = run(tmp, "ref%d_%s" % (nproc, "_".join(map(str, args))), nproc,
              "--nan-rank", nproc - 1, "--nan-step", NAN_STEP, *args)
    applied, norms = ref[0]["applied"], ref[0]["norms"]
    assert applied.count(False) == 1 and not applied[NAN_STEP], applied
    assert norms[1] > 1.0 and norms[4] > 1.0, norms      # clipping triggers
    assert any(n < 1.0 for n in norms), norms            # and not everywhere
    assert not any(r["released"][0] for r in ref)        # p.grad kept without release
    assert all(h == 0 for r in ref for h in r["handed"])
    return ref


@pytest.mark.parametrize("nproc", [1, 2, 4])
def test_release_and_early_start_are_bit_identical(tmp, nproc):
    ref = reference(tmp, nproc, "--steps", STEPS)
    assert len(ref[0]["applied"]) == STEPS
    modes = ([("--release",), ("--early", "plain"), ("--release", "--early", "speculative"),
              ("--early", "speculative")] if nproc == 2 else
             [("--release",), ("--release", "--early", "speculative")])
    for mode in modes:
        what = "%d ranks %s" % (nproc, " ".join(mode))
        got = run(tmp, "got%d_%s" % (nproc, "_".join(m.strip("-") for m in mode)), nproc,
                  "--nan-rank", nproc - 1, "--nan-step", NAN_STEP, "--steps", STEPS, *mode)
        assert_same(got, ref, what)
        # Every shard was handed over in backward (empty shards included) and, with
        # release, p.grad is None after it.
        assert all(h == TENSORS for r in got for h in r["handed"]), what
        assert all(all(r["released"]) == ("--release" in mode) for r in got), what


def test_ranks_may_each_keep_their_own_fraction(tmp):
    # A node whose links differ can offload more on a rank with a faster one: the bits do
    # not depend on the fraction, so ranks at 0.5 and 1 (state streamed) with release and
    # speculation equal ranks at 0.5 without either.
    ref = reference(tmp, 2, "--offload-compute", "gpu")
    got = run(tmp, "mixed_fractions", 2, "--nan-rank", 1, "--nan-step", NAN_STEP, "--release",
              "--early", "speculative", "--fraction", "0.5,1", "--offload-compute", "gpu")
    assert_same(got, ref, "fractions 0.5 and 1 on the two ranks")


@pytest.mark.parametrize("fraction,compute,in_place", [(1.0, "gpu", 0), (1.0, "gpu", 1 << 20),
                                                       (1.0, "0.5", 0), (0.0, "host", 0)])
def test_release_at_every_fraction_and_compute_share(tmp, fraction, compute, in_place):
    # in_place: the speculated streamed chunks read the handed gradients where FSDP2 left
    # them (in_place_grad_bytes), the bits unchanged.
    args = ("--fraction", fraction, "--offload-compute", compute)
    ref = reference(tmp, 2, *args)
    got = run(tmp, "rel_%s_%s_%d" % (fraction, compute, in_place), 2, "--nan-rank", 1,
              "--nan-step", NAN_STEP, "--release", "--early", "speculative",
              "--in-place-grad-bytes", in_place, *args)
    assert_same(got, ref, "fraction %s compute %s in place %d" % (fraction, compute, in_place))


@pytest.mark.parametrize("mode", ["context", "nosync"])
def test_accumulation_with_release_is_exact(tmp, mode):
    # The micro-batches but the last inside opt.accumulating() (FSDP2 reduces each one
    # and adds into p.grad; nothing is handed over) or with set_requires_gradient_sync(
    # False) (FSDP2 reduces once): the last one's hooks hand the sum over.
    ref = run(tmp, "acc_ref_" + mode, 2, "--accum", 2, "--accum-mode", mode, "--steps", 3)
    got = run(tmp, "acc_rel_" + mode, 2, "--accum", 2, "--accum-mode", mode, "--steps", 3,
              "--release")
    assert_same(got, ref, "accumulation " + mode)
    assert all(all(r["released"]) for r in got)


def test_a_second_gradient_under_release_is_refused(tmp):
    got = run(tmp, "second", 2, "--accum", 2, "--release", "--second-grad", "--steps", 2)
    for r in got:
        assert "second gradient in one step" in r["error"], r.get("error")
        assert "accumulating()" in r["error"] and "set_requires_gradient_sync" in r["error"]
        assert r["step_count"] == 0  # the step was discarded, nothing changed


def test_hsdp_2x2_release_is_exact_and_warns(tmp):
    ref = run(tmp, "hsdp_ref", 4, "--hsdp", "--steps", 3)
    got = run(tmp, "hsdp_rel", 4, "--hsdp", "--steps", 3, "--release")
    assert_same(got, ref, "HSDP 2x2")
    assert any("HSDP" in w for w in got[0]["warnings"])


def test_grad_scaler_is_refused_with_the_alternative():
    import tandem.torch
    torch.manual_seed(0)
    model = torch.nn.Linear(8, 4)
    opt = tandem.torch.AdamW(model.parameters(), release_grads=True)
    before = [p.detach().clone() for p in model.parameters()]
    scaler = torch.amp.GradScaler("cpu", init_scale=1024.0)
    scaler.scale(model(torch.randn(2, 8)).sum()).backward()
    with pytest.raises(ValueError, match=r"GradScaler cannot unscale released gradients.*"
                                         r"loss_scale="):
        scaler.step(opt)
    assert opt.step_count == 0
    assert all(torch.equal(a, b) for a, b in zip(model.parameters(), before))
