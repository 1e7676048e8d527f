"""bench/fsdp_step.py --activation-checkpointing, without a GPU: the benchmark's own
shard() (fully_shard per block, then the root; full activation checkpointing first) on a
small fsdp_train.Llama in one process, a 1-rank gloo group. Checkpointing wraps every
block in every mode, recomputes each block's forward in the backward, and changes no
gradient bit."""

import importlib.util
import os
import tempfile

import pytest
import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch.distributed.algorithms._checkpoint.checkpoint_wrapper import CheckpointWrapper
from torch.distributed.device_mesh import init_device_mesh

pytestmark = pytest.mark.filterwarnings("ignore:DTensor random operators:UserWarning")

BENCH = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "bench")
LAYERS = 2


@pytest.fixture(scope="module")
def fsdp_step():
    spec = importlib.util.spec_from_file_location("fsdp_step", os.path.join(BENCH, "fsdp_step.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)  # puts bench/ and examples/ on sys.path
    return module


@pytest.fixture(scope="module")
def mesh():
    store = tempfile.NamedTemporaryFile(delete=False)
    dist.init_process_group("gloo", init_method="file://" + store.name, rank=0, world_size=1)
    yield init_device_mesh("cpu", (1,))
    dist.destroy_process_group()
    os.unlink(store.name)


def sharded_on_meta(fsdp_step, mesh, mode, checkpointing):
    from fsdp_train import Llama

    dtype = torch.bfloat16 if mode in fsdp_step.TANDEM_MODES else torch.float32
    with torch.device("meta"):
        model = Llama(layers=LAYERS).to(dtype)
    return fsdp_step.shard(model, mesh, mode, checkpointing)


def build(fsdp_step, mesh, mode, checkpointing):
    """As the benchmark's child builds it (meta device, shard, to_empty, normal init),
    at a small size on the CPU."""
    model = sharded_on_meta(fsdp_step, mesh, mode, checkpointing)
    model.to_empty(device="cpu")
    torch.manual_seed(0)
    with torch.no_grad():
        for p in model.parameters():
            p.normal_(0, 0.02)
    return model


def grads_and_forwards(model, monkeypatch):
    """Every parameter's gradient after one forward and backward, and how many times a
    block's forward ran."""
    import fsdp_train

    calls = []
    forward = fsdp_train.Block.forward

    def counted(self, x):
        calls.append(1)
        return forward(self, x)

    monkeypatch.setattr(fsdp_train.Block, "forward", counted)
    ids = torch.arange(2 * 17).remainder(512).view(2, 17)
    logits = model(ids[:, :-1])
    F.cross_entropy(logits.float().flatten(0, 1), ids[:, 1:].flatten()).backward()
    monkeypatch.undo()
    grads = [p.grad.full_tensor() for p in model.parameters()]
    return grads, len(calls)


@pytest.mark.parametrize("mode", ["none", "cpu_offload", "tandem", "tandem_cpu_offload"])
def test_every_block_is_wrapped_in_every_mode(fsdp_step, mesh, mode):
    from fsdp_train import Block

    # On the meta device: cpu_offload's pinned host shards need a GPU driver.
    wrapped = sharded_on_meta(fsdp_step, mesh, mode, True)
    plain = sharded_on_meta(fsdp_step, mesh, mode, False)
    assert all(isinstance(b, CheckpointWrapper) for b in wrapped.layers)
    assert all(isinstance(b._checkpoint_wrapped_module, Block) for b in wrapped.layers)
    assert all(isinstance(b, Block) for b in plain.layers)
    # The same parameters, in the same order (named through the wrapper).
    assert [p.shape for p in wrapped.parameters()] == [p.shape for p in plain.parameters()]


@pytest.mark.parametrize("mode,policy,mixed", [("none", False, True),
                                                ("cpu_offload", True, True),
                                                ("tandem", False, False),
                                                ("tandem_cpu_offload", True, False)])
def test_each_mode_shards_with_its_policies(fsdp_step, mesh, mode, policy, mixed,
                                            monkeypatch):
    # CPUOffloadPolicy where the parameters live on the host; torch's mixed precision
    # where they are fp32 (the Tandem modes' shards are bf16).
    import torch.distributed.fsdp as fsdp
    seen = []
    monkeypatch.setattr(fsdp, "fully_shard", lambda module, **kw: seen.append(kw))
    sharded_on_meta(fsdp_step, mesh, mode, False)
    assert len(seen) == LAYERS + 1
    assert all(isinstance(kw.get("offload_policy"), fsdp.CPUOffloadPolicy) == policy
               for kw in seen)
    assert all(("mp_policy" in kw) == mixed for kw in seen)


@pytest.mark.parametrize("mode", ["none", "tandem"])
def test_checkpointing_recomputes_and_changes_no_gradient_bit(fsdp_step, mesh, mode,
                                                              monkeypatch):
    plain, plain_calls = grads_and_forwards(build(fsdp_step, mesh, mode, False), monkeypatch)
    ckpt, ckpt_calls = grads_and_forwards(build(fsdp_step, mesh, mode, True), monkeypatch)
    assert plain_calls == LAYERS
    assert ckpt_calls == 2 * LAYERS  # each block's forward again in the backward
    assert len(plain) == len(ckpt)
    for a, b in zip(plain, ckpt):
        assert a.dtype == b.dtype and torch.equal(a.view(torch.uint8), b.view(torch.uint8))


def test_a_tandem_mode_names_its_own_fraction(fsdp_step):
    assert fsdp_step.mode_fraction("f0.5") == 0.5
    assert fsdp_step.mode_fraction("f1") == 1.0
    assert fsdp_step.mode_fraction("f1.5") is None  # outside [0, 1]: not a fraction
    assert fsdp_step.mode_fraction("fast") is None
    assert fsdp_step.mode_fraction("release") is None
    assert fsdp_step.mode_memory("g48") == 48.0 and fsdp_step.mode_memory("g") is None
    assert fsdp_step.mode_memory("f0.5") is None


def test_the_report_checks_parameters_on_the_host(fsdp_step, capsys):
    import argparse
    args = argparse.Namespace(model="llama3-8b", layers=2, seq=16, nproc=1,
                              activation_checkpointing=True, text=False, clip=0.0,
                              state="bf16+ecc8/q8/q8", offload_compute="auto", json=None,
                              gpu_memory_gib=16.0)
    row = dict(layers=2, params=10, forward_backward_ms=8.0, step_ms=2.0, exposed_share=0.2,
               tokens_per_s_per_gpu=1.0, mfu=0.1, gpu_peak_gib=1.0, losses=[2.0, 1.0],
               gpu_memory_gib=16.0)
    tandem = dict(row, fraction=1.0, compute_split=dict(share=0.0), release=True,
                  speculative=True, speculated_rolled_back_chunks=[[4, 0]])
    results = {"cpu_offload": dict(row, iteration_ms=1000.0),
               "tandem_cpu_offload": dict(tandem, iteration_ms=90.0, offload_compute="host"),
               "tandem+g48": dict(tandem, iteration_ms=60.0, offload_compute="auto",
                                  gpu_memory_gib=48.0)}
    fsdp_step.report(args, results)
    out = capsys.readouterr().out
    assert "tandem+g48: each GPU held to 48.00 GiB" in out
    assert "tandem_cpu_offload: state bf16+ecc8/q8/q8, offload_fraction 1, offload_compute host" in out
    lines = out.splitlines()
    speedup = next(x for x in lines if x.startswith("tandem_cpu_offload vs cpu_offload"))
    assert speedup.endswith("11.111  (target >= 10: met)")
    ratio = next(x for x in lines if x.startswith("tandem_cpu_offload / tandem+g48 iteration"))
    assert ratio.endswith("1.500  (target <= 1.5: met)")
    assert "tandem_cpu_offload step exposed" not in out  # the GPU-parameter mode's target


def test_the_report_says_how_often_clipping_triggered(fsdp_step, capsys):
    import argparse
    args = argparse.Namespace(model="llama3-8b", layers=2, seq=16, nproc=1,
                              activation_checkpointing=False, text=False, clip=1.0,
                              state="bf16+ecc8/q8/q8", offload_compute="auto", json=None,
                              gpu_memory_gib=None)
    row = dict(layers=2, params=10, iteration_ms=10.0, forward_backward_ms=8.0, step_ms=2.0,
               exposed_share=0.2, tokens_per_s_per_gpu=1.0, mfu=0.1, gpu_peak_gib=1.0,
               losses=[2.0, 1.0])
    results = {"none": dict(row, grad_norms=[0.5, 2.0, 3.0], clip_triggered=2),
               "tandem+speculative+f0.5": dict(
                   row, fraction=0.5, compute_split=dict(share=1.0), release=False,
                   speculative=True, grad_norms=[0.5, 2.0], clip_triggered=1,
                   speculated_rolled_back_chunks=[[4, 0], [4, 4]])}
    fsdp_step.report(args, results)
    out = capsys.readouterr().out
    assert "none: gradient norm 0.5..3, clipping at 1 triggered at 2 of 3 steps" in out
    assert ("tandem+speculative+f0.5: gradient norm 0.5..2, clipping at 1 triggered at 1 of "
            "2 steps; speculation rolled back at 1") in out
    assert "offload_fraction 0.5," in out
    results["tandem+speculative+f0.5"]["fractions"] = [1.0, 0.65]
    fsdp_step.report(args, results)
    assert "offload_fraction 1/0.65 (by local rank)" in capsys.readouterr().out


def test_fractions_may_differ_by_local_rank(fsdp_step):
    import argparse
    assert fsdp_step.fraction_list("0.5") == [0.5]
    assert fsdp_step.fraction_list("1,0.9,0.65,0.8") == [1.0, 0.9, 0.65, 0.8]
    for bad in ("1.5", "0.5,x", ""):
        with pytest.raises(argparse.ArgumentTypeError):
            fsdp_step.fraction_list(bad)
    assert [fsdp_step.rank_fraction([1.0, 0.5], r) for r in range(4)] == [1.0, 0.5, 1.0, 0.5]


def test_the_report_names_the_share_offload_compute_set_and_the_in_place_budget(fsdp_step,
                                                                                  capsys):
    import argparse
    args = argparse.Namespace(model="llama3-70b", layers=2, seq=16, nproc=1,
                              activation_checkpointing=True, text=True, clip=100.0,
                              state="bf16+ecc8/q8/q8", offload_compute="gpu", json=None,
                              gpu_memory_gib=79.65)
    row = dict(layers=2, params=10, iteration_ms=10.0, forward_backward_ms=8.0, step_ms=2.0,
               exposed_share=0.2, tokens_per_s_per_gpu=1.0, mfu=0.1, gpu_peak_gib=1.0,
               losses=[2.0, 1.0], grad_norms=[1.0], clip_triggered=0)
    # An explicit offload_compute runs no model: compute_split is all zeros.
    split = dict(share=0.0, bound="")
    results = {"none:1": dict(row), "tandem+inplace": dict(
        row, fraction=0.5, compute_split=split, release=True, speculative=True,
        in_place_grad_bytes=64 * 2**30, speculated_rolled_back_chunks=[[4, 0]])}
    fsdp_step.report(args, results)
    out = capsys.readouterr().out
    assert "offload_compute gpu (share on the GPU 1.000)" in out
    assert "in place 64.0 GiB" in out
    assert "each GPU held to 79.65 GiB of memory in all" in out
    assert fsdp_step.gpu_share(dict(compute_split=dict(share=0.25, bound="h2d")), "auto") == 0.25
    assert fsdp_step.gpu_share(dict(compute_split=split), "host") == 0.0
    assert fsdp_step.gpu_share(dict(compute_split=split), "0.5") == 0.5


def test_a_plan_sets_the_tandem_options(fsdp_step, tmp_path):
    import argparse
    import json
    import tandem
    plan = tandem.plan("llama3-70b", gpu_mem="141GB", host_mem="440GiB", fsdp2=True,
                       gpus_per_node=4, seq=4096, recompute="full", grad_release=True,
                       speculative_early_start=True, in_place_grad_bytes="8GiB")
    path = tmp_path / "plan.json"
    path.write_text(json.dumps(plan.data))
    args = argparse.Namespace(plan=str(path), fraction=[1.0], offload_compute="auto",
                              state="f32/f32/f32", release=False, speculative=False,
                              speculative_host_gib=None, speculative_stream_gib=None,
                              inplace=False, in_place_grad_gib=4.0)
    said = fsdp_step.apply_plan(args)
    kw = plan.optimizer_kwargs
    assert args.fraction == [kw["offload_fraction"]]
    assert args.offload_compute == str(kw["offload_compute"])  # the share (0.5) the plan chose
    assert args.state == "bf16+ecc8/q8/q8" and args.release and args.speculative
    assert int(args.speculative_stream_gib * 2**30) == kw["speculative_stream_bytes"] > 0
    assert args.inplace and args.in_place_grad_gib == 8.0
    assert "offload_fraction=%s" % kw["offload_fraction"] in said
    small = tandem.plan("llama3-70b", gpu_mem="8GB", host_mem="64GiB")
    path.write_text(json.dumps(small.data))
    with pytest.raises(ValueError, match="no optimizer_kwargs"):
        fsdp_step.apply_plan(args)
    lion = tandem.plan("llama3-8b", gpu_mem="141GB", host_mem="64GiB", algo="lion")
    path.write_text(json.dumps(lion.data))
    with pytest.raises(ValueError, match="the plan is for Lion; this benchmark runs AdamW"):
        fsdp_step.apply_plan(args)
