"""The standalone megatron-fsdp package with tandem.megatron_fsdp.MegatronFSDPAdam, on
CPU processes with gloo (tests/megatron/mfsdp_standalone.py: a plain PyTorch model whose
parameters Megatron-FSDP shards unevenly, several empty on some rank):

* v1 (fully_shard_model + tandem.megatron_fsdp.fully_shard_optimizer): against
  torch.optim.AdamW, offload fractions and offload_compute bit for bit, gradients as
  param.grad and as decoupled_grad, bf16 main weights with a bf16+ecc8 master, no
  initial zero-gradient step, DCP checkpoints saved at 2 ranks and loaded at 4;
* v2 (megatron_fsdp.experimental.fully_shard and its fully_shard_optimizer hooks,
  precision_aware=True): the same comparisons and checkpoints;
* the misuses that must raise."""

import os

import pytest
import torch

from conftest import bit_equal, launch, rel_diff, tensors


STEPS = 5
Q8 = "formats=bf16+ecc8/q8/q8"
BF16 = "main=bf16,decoupled=1," + Q8


@pytest.fixture(scope="module")
def two(tmp_path_factory):
    out = str(tmp_path_factory.mktemp("two"))
    runs = ["ref,torch", "t0,tandem", "t1,tandem,fraction=1,compute=gpu",
            "dec,tandem,decoupled=1,fraction=0.5",
            "b0,tandem," + BF16, "b1,tandem,fraction=1,compute=gpu," + BF16,
            "v2ref,torch,api=2", "v2t0,tandem,api=2",
            "v2t5,tandem,api=2,fraction=0.5,compute=host",
            "s1,tandem,fraction=1,compute=gpu,grads=seeded,save=3",
            "v2s,tandem,api=2,fraction=0.5,grads=seeded,save=3",
            "refusals,refusals"]
    return out, launch("mfsdp_standalone.py", 2, out, "--steps", STEPS,
                       *[a for r in runs for a in ("--train", r)])


@pytest.fixture(scope="module")
def four(tmp_path_factory, two):
    out = str(tmp_path_factory.mktemp("four"))
    two_out, _ = two
    runs = ["r1,tandem,fraction=0.5,grads=seeded,load=%s" % os.path.join(two_out, "s1"),
            "v2r,tandem,api=2,fraction=1,compute=gpu,grads=seeded,load=%s"
            % os.path.join(two_out, "v2s")]
    return out, launch("mfsdp_standalone.py", 4, out, "--steps", STEPS,
                       *[a for r in runs for a in ("--train", r)])


def test_a_finished_run_frees_its_model(two, four):
    # Note [Dropping a Megatron-FSDP model] (tests/megatron/mfsdp_gpt.py).
    for _, result in (two, four):
        assert {n: r["earlier_runs_alive"] for n, r in result["runs"].items()} == \
            {n: 0 for n in result["runs"]}


def test_every_step_is_applied(two, four):
    for _, result in (two, four):
        for name, run in result["runs"].items():
            if run["spec"]["kind"] != "refusals":
                assert run["applied"] and all(run["applied"]), name


@pytest.mark.parametrize("base,others", [("t0", ["t1", "dec"]), ("b0", ["b1"]),
                                         ("v2t0", ["v2t5"])])
def test_fractions_offload_compute_and_gradient_kinds_give_the_same_bits(two, base, others):
    out, result = two
    for name in others:
        assert result["runs"][name]["losses"] == result["runs"][base]["losses"], name
        assert bit_equal(tensors(out, name)["params"], tensors(out, base)["params"]), name


@pytest.mark.parametrize("ours,theirs", [("t0", "ref"), ("v2t0", "v2ref")])
def test_steps_follow_torch_adamw(two, ours, theirs):
    out, result = two
    assert rel_diff(result["runs"][ours]["losses"], result["runs"][theirs]["losses"]) < 1e-4
    a, b = tensors(out, ours)["params"], tensors(out, theirs)["params"]
    for name in a:
        torch.testing.assert_close(a[name], b[name], rtol=1e-5, atol=1e-6)


def test_bf16_main_weights_with_an_ecc8_master_train(two):
    _, result = two
    losses = result["runs"]["b0"]["losses"]
    assert rel_diff(losses, result["runs"]["t0"]["losses"]) < 1e-2
    assert losses != result["runs"]["t0"]["losses"]


def test_no_initial_zero_gradient_step(two):
    # megatron_fsdp.fully_shard_optimizer steps every optimizer once with zero gradients
    # (weight decay moves the weights); tandem's wrapper must not.
    _, result = two
    for name in ("t0", "t1", "dec", "b0", "v2t0"):
        assert result["runs"][name]["wrap_changed_no_weight"], name


def test_every_rank_saves_the_same_state_keys(two):
    _, result = two
    for name in ("s1", "v2s"):
        assert result["runs"][name]["state_keys_identical"], name


@pytest.mark.parametrize("saved,loaded", [("s1", "r1"), ("v2s", "v2r")])
def test_saved_at_2_loads_at_4_and_resumes_bit_identically(two, four, saved, loaded):
    # Gradients drawn per (step, parameter): the same at 2 and 4 ranks, so the resumed
    # run at 4 ranks must end with the bits of the uninterrupted one at 2.
    two_out, _ = two
    four_out, four_result = four
    assert bit_equal(tensors(two_out, saved)["saved_state"],
                     tensors(four_out, loaded)["loaded_state"])
    assert four_result["runs"][loaded]["first_step"] == 3
    assert bit_equal(tensors(four_out, loaded)["params"], tensors(two_out, saved)["params"])


def test_misuses_are_refused(two):
    _, result = two
    refusals = result["runs"]["refusals"]
    assert refusals["fully_shard_with_tandem"].startswith(
        "ValueError: MegatronFSDPAdam's parameters are fixed at construction")
    assert refusals["wrap_torch_adamw"].startswith(
        "TypeError: tandem.megatron_fsdp.fully_shard_optimizer takes a MegatronFSDPAdam")


def test_the_example_trains_through_a_checkpoint(tmp_path):
    # examples/megatron_fsdp_train.py, as docs/megatron_fsdp.md shows it (fewer steps):
    # exit 0 means the loss fell across a DCP save and load.
    import subprocess
    import sys
    example = os.path.join(os.path.dirname(__file__), "..", "..", "examples",
                           "megatron_fsdp_train.py")
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node",
           "2", example, "--steps", "8", "--ckpt", str(tmp_path / "ck")]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600,
                          env=dict(os.environ, OMP_NUM_THREADS="1"))
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-4000:]
    assert "over 8 steps, 2 ranks" in proc.stdout
