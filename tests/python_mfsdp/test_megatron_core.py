"""Megatron-Core's Megatron-FSDP (FullyShardedDataParallel) with tandem.megatron's
get_megatron_optimizer, on CPU processes with gloo at 4 and 2 ranks
(tests/megatron/mfsdp_gpt.py: a SwiGLU GPT in bf16 with fp32 main weights, Megatron's
DistributedOptimizer, OptimizerParamScheduler and its fsdp_dtensor checkpoints saved and
loaded the way Megatron-LM does).

Two jobs, each training every run from the same seed: at 4 ranks Megatron's own optimizer
(its torch AdamW fallback here) and Tandem at offload fractions 0, 0.5 (host compute)
and 1 (streamed compute), q8 moments with a bf16+ecc8 master, and two runs with gradients
drawn from (seed, step, name) that save checkpoints; at 2 ranks the same comparisons,
those checkpoints loaded at another fraction and resumed, a model-only load, and loads
that must be refused.

With a megatron-core whose DistributedDataParallelConfig sets Megatron-FSDP's main-weight
dtype and decoupled_grad (0.19.2; 0.16.1 has neither: those tests skip), the 4-rank job
also runs gradients as decoupled_grad, and bf16 main weights with a bf16+ecc8 master
at three fractions and through a checkpoint resumed at 2 ranks, and with a bf16+ecc16
master."""

import os

import pytest

from conftest import bit_equal, launch, rel_diff, tensors


def _sets_main_weight_dtype():
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # Megatron's import-time notices
        from megatron.core.distributed import DistributedDataParallelConfig
    fields = DistributedDataParallelConfig.__dataclass_fields__
    return "megatron_fsdp_main_params_dtype" in fields and \
        "megatron_fsdp_use_decoupled_grad" in fields


BF16_MAIN = _sets_main_weight_dtype()
needs_bf16_main = pytest.mark.skipif(
    not BF16_MAIN, reason="this megatron-core's DistributedDataParallelConfig has no "
    "megatron_fsdp_main_params_dtype / megatron_fsdp_use_decoupled_grad (0.19.2 has)")


STEPS = 6
Q8 = "formats=bf16+ecc8/q8/q8"
SEEDED = "grads=seeded,clip=0"  # the same gradients at every world size (mfsdp_gpt.py)
LOSS_RTOL = 2e-2     # tests/megatron/gpt_proof.py's tolerance for f32 state
Q8_LOSS_RTOL = 5e-2  # and for q8 moments with a bf16+ecc8 master
# bf16 main weights, gradients as decoupled_grad (fp32 main gradients), a bf16+ecc8 master:
# no fp32 copy of the weights anywhere.
BF16 = "main=bf16,decoupled=1,formats=bf16+ecc8/f32/f32"
BF16_Q8 = "main=bf16,decoupled=1,formats=bf16+ecc8/q8/q8"


def comparisons():
    return ["base,megatron", "t0,tandem,fraction=0", "t5,tandem,fraction=0.5,compute=host",
            "t1,tandem,fraction=1,compute=gpu", "q8,tandem,fraction=0.5," + Q8]


@pytest.fixture(scope="module")
def four(tmp_path_factory):
    out = str(tmp_path_factory.mktemp("four"))
    runs = comparisons() + [
        "model_saved,megatron,save=3,save_what=model",
        "s32,tandem,fraction=0.5,%s,save=3" % SEEDED,
        "sq8,tandem,fraction=0,%s,%s,save=3" % (Q8, SEEDED)]
    if BF16_MAIN:
        runs += ["dec,tandem,decoupled=1",
                 "b0,tandem,fraction=0," + BF16,
                 "b5,tandem,fraction=0.5,compute=host," + BF16,
                 "b1,tandem,fraction=1,compute=gpu," + BF16,
                 "b16,tandem,fraction=0," + BF16.replace("bf16+ecc8", "bf16+ecc16"),
                 "sb,tandem,fraction=0.5,%s,%s,save=3" % (BF16_Q8, SEEDED)]
    result = launch("mfsdp_gpt.py", 4, out, "--steps", STEPS,
                    *[a for r in runs for a in ("--train", r)])
    return out, result


@pytest.fixture(scope="module")
def two(tmp_path_factory, four):
    out = str(tmp_path_factory.mktemp("two"))
    four_out, _ = four
    ck = lambda name: os.path.join(four_out, name)  # noqa: E731
    runs = comparisons() + [
        "r32,tandem,fraction=1,compute=gpu,%s,load=%s" % (SEEDED, ck("s32")),
        "rq8,tandem,fraction=0.5,%s,%s,load=%s" % (Q8, SEEDED, ck("sq8")),
        "model_only,tandem,fraction=0.5,load=%s,model_only=1" % ck("s32"),
        "not_tandems,tandem,load=%s,expect_error=1" % ck("model_saved"),
        "other_formats,tandem,load=%s,expect_error=1" % ck("sq8")]
    if BF16_MAIN:
        runs += ["rb,tandem,fraction=1,compute=gpu,%s,%s,load=%s" % (BF16_Q8, SEEDED, ck("sb"))]
    result = launch("mfsdp_gpt.py", 2, out, "--steps", STEPS,
                    *[a for r in runs for a in ("--train", r)])
    return out, result


@pytest.fixture(params=["four", "two"])
def job(request):
    return request.getfixturevalue(request.param)


def test_every_step_is_applied(job):
    _, result = job
    for name, run in result["runs"].items():
        if "expect_error" not in run["spec"]:
            assert run["applied"] and all(run["applied"]), name


def test_a_finished_run_frees_its_model(job):
    # Note [Dropping a Megatron-FSDP model] (tests/megatron/mfsdp_gpt.py): the GPU memory
    # table compares runs of one process.
    _, result = job
    assert {name: run["earlier_runs_alive"] for name, run in result["runs"].items()} == \
        {name: 0 for name in result["runs"]}


def test_fractions_and_offload_compute_give_the_same_bits(job):
    out, result = job
    runs = result["runs"]
    base = tensors(out, "t0")["params"]
    for name in ("t5", "t1"):
        assert runs[name]["losses"] == runs["t0"]["losses"], name
        assert bit_equal(tensors(out, name)["params"], base), name


def test_the_offload_fraction_is_exact(job):
    # Of each rank's shard elements, the fraction given (to one 32-element block), not
    # whole parameters as Megatron's HybridDeviceOptimizer takes them.
    _, result = job
    for name, fraction in (("t0", 0.0), ("t5", 0.5), ("t1", 1.0), ("q8", 0.5)):
        for rank, placements in enumerate(result["runs"][name]["placements"]):
            for p in placements:
                assert p["target"] == round(fraction * p["total"]) or \
                    abs(p["target"] - fraction * p["total"]) < 1, (name, rank, p)
                assert abs(p["offloaded"] - p["target"]) < 32, (name, rank, p)


def test_losses_follow_megatrons_own_optimizer(job):
    _, result = job
    runs = result["runs"]
    base = runs["base"]["losses"]
    assert rel_diff(runs["t0"]["losses"], base) <= LOSS_RTOL
    assert rel_diff(runs["q8"]["losses"], base) <= Q8_LOSS_RTOL
    assert runs["q8"]["losses"] != runs["t0"]["losses"]  # q8 really is another format


def test_every_rank_saves_the_same_state_keys(four):
    _, result = four
    for name in ("s32", "sq8") + (("sb",) if BF16_MAIN else ()):
        assert result["runs"][name]["state_keys_identical"], name


def test_empty_shards_have_their_entries(four):
    # 4 ranks of a tiny model: most parameters have an empty shard somewhere; every
    # parameter still has every array in the checkpoint, with the parameter's numel.
    out, _ = four
    saved = tensors(out, "s32")["saved_state"]
    params = tensors(out, "s32")["params_at_save"]
    fc1 = [k for k in saved if k.endswith("linear_fc1.weight_w.master_f32")]
    assert fc1, "the SwiGLU halves are in the state dict"
    for name, full in params.items():
        if "linear_fc1" in name:
            w, v = saved[name + "_w.master_f32"], saved[name + "_v.master_f32"]
            assert bit_equal({"x": full}, {"x": __import__("torch").cat([w, v])})
        else:
            assert bit_equal({"x": full}, {"x": saved[name + ".master_f32"]}), name


@pytest.mark.parametrize("saved,loaded", [
    ("s32", "r32"), ("sq8", "rq8"), pytest.param("sb", "rb", marks=needs_bf16_main)])
def test_saved_at_4_loads_at_2_and_resumes_bit_identically(four, two, saved, loaded):
    four_out, _ = four
    two_out, two_result = two
    at_save, resumed = tensors(four_out, saved), tensors(two_out, loaded)
    assert bit_equal(at_save["saved_state"], resumed["loaded_state"])
    run = two_result["runs"][loaded]
    assert run["first_step"] == 3
    assert all(run["applied"])
    # The losses are not compared: each rank draws its own batch, so 4 and 2 ranks see
    # other data; the gradients the optimizer steps are drawn per (step, parameter).
    assert bit_equal(resumed["params"], at_save["params"])


def test_the_dummy_step_before_a_load_changes_nothing(two):
    _, result = two
    for name in ("r32", "rq8") + (("rb",) if BF16_MAIN else ()):
        assert result["runs"][name]["load_checks"]["dummy_step_changed_nothing"], name


def test_a_model_only_load_is_picked_up(four, two):
    four_out, _ = four
    two_out, result = two
    assert result["runs"]["model_only"]["model_only_masters_equal_params"]
    assert bit_equal(tensors(two_out, "model_only")["params_after_model_load"],
                     tensors(four_out, "s32")["params_at_save"])


def test_other_checkpoints_are_refused(two):
    _, result = two
    assert "holds no tandem.megatron_fsdp state" in result["runs"]["not_tandems"]["error"]
    assert "master='bf16+ecc8'" in result["runs"]["other_formats"]["error"]


@needs_bf16_main
def test_decoupled_grad_gives_the_bits_of_grad(four):
    # ddp_config.megatron_fsdp_use_decoupled_grad: Megatron-FSDP installs the gradients as
    # param.decoupled_grad; tandem.megatron switches Megatron's precision-aware mode on so
    # that its gradient norm and clipping read them there (clip=1 is active here: the
    # norms are above 1). Same gradients, same norm, same bits as param.grad.
    out, result = four
    runs = result["runs"]
    assert runs["dec"]["grad_norms"] == runs["t0"]["grad_norms"]
    assert all(n > 1 for n in runs["dec"]["grad_norms"])
    assert runs["dec"]["losses"] == runs["t0"]["losses"]
    assert bit_equal(tensors(out, "dec")["params"], tensors(out, "t0")["params"])


@needs_bf16_main
def test_bf16_main_weights_with_decoupled_grad_and_an_ecc8_master(four):
    out, result = four
    runs = result["runs"]
    base = tensors(out, "b0")["params"]
    # Megatron-FSDP's main weights are bf16, and the engine keeps no master of its own
    # beyond the 8-bit correction: no fp32 copy of the weights anywhere. (At fraction 0;
    # elements the host computes keep their bf16 master in host memory.)
    assert all(p.dtype == __import__("torch").bfloat16 for p in base.values())
    assert runs["b0"]["engine_memory"]["master"] == 0
    assert runs["b0"]["engine_memory"]["correction"] > 0
    # bf16+ecc16: twice the correction bits, still no master of its own.
    assert runs["b16"]["engine_memory"]["master"] == 0
    assert runs["b16"]["engine_memory"]["correction"] > runs["b0"]["engine_memory"]["correction"]
    assert rel_diff(runs["b16"]["losses"], runs["base"]["losses"]) <= LOSS_RTOL
    for name in ("b5", "b1"):
        assert runs[name]["losses"] == runs["b0"]["losses"], name
        assert bit_equal(tensors(out, name)["params"], base), name
    # Megatron's norm reads the fp32 decoupled gradients: at the first step (same weights,
    # same gradients) it is the norm of Megatron's own run with fp32 main weights.
    assert runs["b0"]["grad_norms"][0] == runs["base"]["grad_norms"][0]
    assert rel_diff(runs["b0"]["grad_norms"], runs["base"]["grad_norms"]) <= LOSS_RTOL
    assert rel_diff(runs["b0"]["losses"], runs["base"]["losses"]) <= LOSS_RTOL
