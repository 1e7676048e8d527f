"""Parameters on the host: FSDP2's CPUOffloadPolicy with tandem.torch (docs/distributed.md,
"Parameters on the host").

Each job runs tests/python_dist/host_params_worker.py under torchrun: the same model
three times in one process, without the policy (the reference, gradients read at
step()), with it, and with it and early start, each at offload fraction 1 with
offload_compute="host", through steps that clip (once ruling the speculation out, once
after chunks were speculated) and a NaN in one rank's shard (the others roll back),
every gradient of the early-start copy landing late as a device copy's may. Every rank's
parameters, state, norms and skipped steps must be the reference's, bit for bit. The
jobs run at 4, 2 and 1 processes, chained through DCP (4 save, 2 load and save, 1
loads): the state loaded at M ranks is the state saved at N. On CPUs (gloo) the policy
moves nothing; the CUDA case runs the same jobs on the GPUs there are (NCCL, pinned
shards, real copies) and skips without one. In-process tests check what the policy
leaves on a GPU run (CPU shards of a CUDA mesh, built without a GPU): the engine in host
mode, and hand-overs that wait for their copies.
"""

import os
import threading
import time

import pytest
import torch
import torch.distributed as dist
from torch.distributed.device_mesh import DeviceMesh, init_device_mesh
from torch.distributed.fsdp import CPUOffloadPolicy, fully_shard
from torch.distributed.tensor import Shard, distribute_tensor

import tandem.torch
from tandem._core import dist as _dist
from tandem._core.copied_grads import CopiedGrads

from workers import run_worker

WORKER = os.path.join(os.path.dirname(__file__), "host_params_worker.py")
TENSORS = 9  # the model's parameters: every one is handed over in every backward
NAN_STEP = 3
CLIP_STEPS = (1, 4)


def run(tmp, name, nproc, *args):
    return run_worker(WORKER, tmp, name, nproc, "--nan-rank", nproc - 1, "--nan-step",
                      NAN_STEP, *args)


def check_job(job, early):
    """Every copy equals the reference on every rank; early start handed every shard over
    in every backward and speculated; with release p.grad was None after backward."""
    for rank in job:
        ref = rank["plain"]
        assert ref["applied"] == [step != NAN_STEP for step in range(len(ref["applied"]))]
        assert all(ref["norms"][s] > 1.0 for s in CLIP_STEPS), ref["norms"]
        for copy in ("policy", "early"):
            got = rank[copy]
            what = "%s on rank %d of %d" % (copy, rank["rank"], rank["world"])
            assert got["mode"] == "host", what
            assert got["applied"] == ref["applied"] and got["norms"] == ref["norms"], what
            assert len(got["state"]) == len(ref["state"]), what
            assert all(torch.equal(a, b) for a, b in zip(got["state"], ref["state"])), what
            for name, x in ref["local_params"].items():
                assert torch.equal(got["local_params"][name].view(torch.uint8),
                                   x.view(torch.uint8)), "%s: %s" % (what, name)
            assert all(torch.equal(got["full"][k], v) for k, v in ref["full"].items()), what
        got = rank["early"]
        assert got["handed"] == [TENSORS] * len(got["handed"])
        assert all(got["released"]) == ("release" in early)
        if "speculative" in early:
            # Kept at the steps that neither clip nor skip; rolled back at the skipped one
            # on the ranks whose own gradients are finite (every chunk was speculated
            # there). How much of step 4 was speculated before its gradients ruled it out
            # depends on timing.
            assert all(got["speculated"][s][0] > 0 for s in (0, 2, 5)), got["speculated"]
            if rank["rank"] != rank["world"] - 1:
                assert got["speculated"][NAN_STEP][1] > 0, got["speculated"]


def same_full(a, b):
    return a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


@pytest.fixture(scope="module")
def tmp(tmp_path_factory):
    return str(tmp_path_factory.mktemp("host_params"))


def test_policy_equals_the_reference_at_4_2_1_ranks_and_reshards(tmp):
    # The early-start copy: release and speculation at 4 ranks, speculation alone at 2,
    # early start without either at 1.
    ck4, ck2 = os.path.join(tmp, "ck4"), os.path.join(tmp, "ck2")
    four = run(tmp, "four", 4, "--late-copies", "--save-to", ck4)
    check_job(four, "release+speculative")
    two = run(tmp, "two", 2, "--late-copies", "--early", "speculative",
              "--load-from", ck4, "--save-to", ck2)
    check_job(two, "speculative")
    one = run(tmp, "one", 1, "--late-copies", "--early", "plain", "--load-from", ck2)
    check_job(one, "plain")
    # N -> M: every copy loaded the saved copy's state, whole.
    for saved, loaded in ((four, two), (two, one)):
        for copy in ("plain", "policy", "early"):
            assert same_full(loaded[0][copy]["loaded"], saved[0]["early"]["full"]), copy


@pytest.mark.skipif(not torch.cuda.is_available(),
                    reason="needs a GPU: CPUOffloadPolicy's pinned shards and device copies")
def test_policy_equals_the_reference_on_gpus(tmp):
    n = min(4, torch.cuda.device_count())
    ck = os.path.join(tmp, "ck_gpu")
    first = run(tmp, "gpu%d" % n, n, "--device", "cuda", "--save-to", ck)
    check_job(first, "release+speculative")
    assert all(r["policy"]["host_shards"] and r["plain"]["mode"] == "gpu" for r in first)
    one = run(tmp, "gpu1", 1, "--device", "cuda", "--load-from", ck)
    check_job(one, "release+speculative")
    for copy in ("plain", "policy", "early"):
        assert same_full(one[0][copy]["loaded"], first[0]["early"]["full"]), copy


# ----------------------------------------------------------------------------------------
# In one process: CPU shards of a CUDA mesh, as CPUOffloadPolicy leaves them on a GPU run.


SHAPES = {"w": (16, 64), "v": (64,), "u": (5, 40)}


def values(seed, dtype=torch.float32):
    g = torch.Generator().manual_seed(seed)
    return {name: torch.randn(shape, generator=g).to(dtype) for name, shape in SHAPES.items()}


class _Sharded:
    def __init__(self, mesh):
        self.device_mesh = mesh
        self.placements = (Shard(0),)


def cuda_mesh_shards(tensors):
    """Parameters whose local shards are these CPU tensors, on a 1-rank CUDA mesh (built
    without a GPU: no backend initialised; its group is the world's)."""
    mesh = DeviceMesh("cuda", [0], _init_backend=False)
    mesh.get_group = lambda mesh_dim=None: dist.group.WORLD
    return [(name, torch.nn.Parameter(_dist.wrap_like(t.clone(), _Sharded(mesh), t.shape)))
            for name, t in tensors.items()]


def cpu_shards(tensors):
    mesh = init_device_mesh("cpu", (1,))
    return [(name, torch.nn.Parameter(distribute_tensor(t.clone(), mesh, [Shard(0)])))
            for name, t in tensors.items()]


def grad_like(p, t):
    return _dist.wrap_like(t.clone(), p, tuple(p.shape))


OPTIONS = dict(lr=1e-2, weight_decay=0.1, offload_fraction=1.0, offload_compute="host",
               max_grad_norm=1.0, chunk_elements=256)


def bits(opt, params):
    out = [p.to_local().reshape(-1).view(torch.uint8).clone() for _, p in params]
    for entry in opt.state_dict()["state"].values():
        for key in sorted(entry):
            v = entry[key]
            v = v.to_local() if hasattr(v, "to_local") else v
            out.append(v.reshape(-1).contiguous().view(torch.uint8).clone())
    return out


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_host_shards_of_a_cuda_mesh_step_in_host_mode(one_rank_group, dtype):
    # Each shard (bf16 or fp32) written in place, as the same shards of a CPU mesh are.
    del one_rank_group
    host, ref = cuda_mesh_shards(values(0, dtype)), cpu_shards(values(0, dtype))
    a = tandem.torch.AdamW(host, **OPTIONS)
    b = tandem.torch.AdamW(ref, **OPTIONS)
    assert a.mode == "host" and _dist.host_shards(a._core.params)
    assert not _dist.host_shards(b._core.params)
    before = [p.to_local().data_ptr() for _, p in host]
    for step, scale in enumerate((1.0, 100.0, 1.0)):  # the second clips
        grads = values(10 + step, dtype)
        for params in (host, ref):
            for name, p in params:
                p.grad = grad_like(p, grads[name] * scale)
        a.step()
        b.step()
        assert a.last_result == b.last_result
    assert all(torch.equal(x, y) for x, y in zip(bits(a, host), bits(b, ref)))
    assert [p.to_local().data_ptr() for _, p in host] == before
    assert not torch.equal(host[0][1].to_local(), values(0, dtype)["w"])


class _LateCopy:
    """A device copy in flight into `grad`: lands (`values` written) at the first
    synchronize(), after a pause; every other synchronize() waits for it."""

    def __init__(self, grad, values, log):
        self.grad, self.values, self.log = grad, values, log
        self.lock = threading.Lock()

    def synchronize(self):
        with self.lock:
            if self.values is not None:
                time.sleep(0.005)
                self.grad.to_local().copy_(self.values)
                self.values = None
                self.log.append(threading.current_thread().name)


@pytest.mark.parametrize("options", [dict(early_start=True), dict(release_grads=True),
                                     dict(release_grads=True, speculative_early_start=True)])
def test_hand_overs_wait_for_their_copies(one_rank_group, options):
    # As FSDP2 does under the policy: the gradient assigned (a pinned host tensor that
    # its copy has not written yet: NaN here) and the post-accumulate-grad hooks run at
    # once. An engine that read it then would see NaN and skip the step.
    del one_rank_group
    host, ref = cuda_mesh_shards(values(0)), cpu_shards(values(0))
    a = tandem.torch.AdamW(host, **OPTIONS, **options)
    b = tandem.torch.AdamW(ref, **OPTIONS)
    assert isinstance(a._handover.copied, CopiedGrads) and b._handover.copied is None
    landed, pending = [], {}
    a._handover.copied._fence = lambda grad: pending.pop(id(grad))
    for step, scale in enumerate((1.0, 100.0, 1.0)):
        grads = values(10 + step)
        if "speculative_early_start" in options:
            a.begin_step()
        for name, p in reversed(host):  # backward order
            p.grad = grad_like(p, torch.full(SHAPES[name], float("nan")))
            pending[id(p.grad)] = _LateCopy(p.grad, grads[name] * scale, landed)
            for hook in p._post_accumulate_grad_hooks.values():
                hook(p)
        for name, p in ref:
            p.grad = grad_like(p, grads[name] * scale)
        a.step()
        b.step()
        assert a.last_result == b.last_result
        assert not pending
    assert all(torch.equal(x, y) for x, y in zip(bits(a, host), bits(b, ref)))
    assert len(landed) == 3 * len(SHAPES)


def policy_linear():
    torch.manual_seed(0)
    model = torch.nn.Linear(64, 32)
    fully_shard(model, mesh=init_device_mesh("cpu", (1,)),
                offload_policy=CPUOffloadPolicy(pin_memory=False))
    return model


def deferred(opt):
    """Hand-overs deferred as for host shards of a GPU mesh, behind fences that are done."""
    opt._handover.copied = CopiedGrads(opt, fence=lambda grad: None)
    return opt


def test_accumulation_under_deferred_hand_overs(one_rank_group):
    # Each backward's gradients are handed over before it returns, so a second gradient
    # in one step finds the first handed over: with release it is refused through
    # backward, without it the early work is redone, as without deferral.
    del one_rank_group
    x = torch.randn(4, 64)
    model = policy_linear()
    opt = deferred(tandem.torch.AdamW(model.named_parameters(), release_grads=True,
                                      **OPTIONS))
    model(x).sum().backward()
    assert opt._core.handed == 2 and all(p.grad is None for p in model.parameters())
    with pytest.raises(RuntimeError, match="second gradient in one step"):
        model(x).sum().backward()
    opt.zero_grad()
    assert opt.step_count == 0
    results = []
    for early in (False, True):
        model = policy_linear()
        opt = tandem.torch.AdamW(model.named_parameters(), early_start=early, **OPTIONS)
        if early:
            deferred(opt)
        for _ in range(2):
            (model(x).sum() * 0.5).backward()
            (model(x).pow(2).mean()).backward()
            opt.step()
            opt.zero_grad()
        results.append([p.to_local().clone() for p in model.parameters()])
    assert all(torch.equal(a, b) for a, b in zip(*results))


def test_the_step_collective_runs_where_the_backend_wants_it():
    cpu, gpu = torch.device("cpu"), torch.device("cuda", 0)
    assert _dist.collective_device("gloo", cpu) == cpu
    assert _dist.collective_device("gloo", gpu) == cpu
    assert _dist.collective_device("nccl", gpu) == gpu
    assert _dist.collective_device("cpu:gloo,cuda:nccl", cpu) == cpu
