"""One rank of the tests of parameters on the host (tests/python_dist/
test_fsdp_host_params.py): FSDP2's CPUOffloadPolicy with tandem.torch, started by torchrun
on CPUs with gloo (or on GPUs with NCCL: --device cuda).

Three copies of fsdp_worker.py's model (uneven and empty shards, 1-D vectors, f32-moment
widths) train side by side in one process, from the same weights on the same batches
(FSDP2's real forward and backward, a batch per rank and step as release_worker.py
draws them), each with tandem.torch.AdamW at offload fraction 1 with
offload_compute="host":

  plain   fully_shard without a policy, the gradients read at step(): the reference (on
          GPUs the parameters and the engine are on the GPU);
  policy  fully_shard with CPUOffloadPolicy: the shards in host memory, the engine in host
          mode, the gradients read at step();
  early   the same with --early (default: release_grads and speculative_early_start):
          each shard's gradient handed over from FSDP2's hook during backward.

On CPUs the policy's copies are no copies (the mesh is the CPU's), so --late-copies makes
every gradient of `early` arrive as late as a device copy may: a hook registered before
the optimizer's takes the gradient FSDP2 assigned and fills it with NaN, and the fence
the optimizer waits on before handing it over (Note [Gradients copied to the host] in
tandem/_core/copied_grads.py) writes it back, a little later, on the thread that waits. An
engine that read a gradient before its fence would see the NaN and skip the step.

Steps in --clip-steps scale the loss up, so clipping triggers: at step 1 by 1e4 (the
first gradients already rule the speculation out), at step 4 by 8 (chunks speculated
first, rolled back at the step). --nan-rank puts a NaN into that rank's shard of the
gradient of embed.weight (the last one backward gives) at --nan-step, after the
reduce-scatter: the other ranks' gradients are finite, so they speculate and roll back
at the step, which is skipped on every rank. --load-from loads a DCP checkpoint into
every copy first (saved by --save-to at any world size); --save-to saves the `early`
copy after the last step.

Every rank writes a torch.save file (rank 0 to --out, rank r to <out>.rank<r>): per copy
its norms, applied flags, tensors handed over in each backward, whether every p.grad
was None after it, the host chunks speculated and rolled back, local parameters and
state (bit patterns), and the full parameters and state (every rank's shard, in rank
order) after the load and at the end.
"""

import argparse
import os
import sys
import threading
import time

import torch
import torch.distributed as dist
import torch.distributed.checkpoint as dcp
from torch.distributed.checkpoint.state_dict import get_state_dict, set_state_dict
from torch.distributed.fsdp import CPUOffloadPolicy, fully_shard

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fsdp_worker  # noqa: E402
from fsdp_worker import Toy, record_path  # noqa: E402
from release_worker import batch, state_bits  # noqa: E402

from tandem._core import dist as _dist  # noqa: E402
from tandem._core.copied_grads import CopiedGrads  # noqa: E402

COPIES = ("plain", "policy", "early")


def build(args, mesh, copy):
    """The model of `copy`: plain on the run's device; with the policy materialized on
    the CPU first, as FSDP2 requires (pinned only where there is a GPU to copy from)."""
    torch.manual_seed(1234)
    if copy == "plain":
        model = Toy().to(args.device)
        policy = {}
    else:
        model = Toy()
        policy = dict(offload_policy=CPUOffloadPolicy(pin_memory=args.device == "cuda"))
    for m in (model.up, model.odd, model.tiny):
        fully_shard(m, mesh=mesh, **policy)
    fully_shard(model, mesh=mesh, **policy)
    if dist.get_rank() == args.nan_rank:
        def poison(p):
            if args.step == args.nan_step:
                grad = p.grad._local_tensor
                if grad.device.type == "cpu" and torch.cuda.is_initialized():
                    torch.cuda.current_stream().synchronize()  # its copy has landed
                grad.view(-1)[0] = float("nan")
        model.embed.weight.register_post_accumulate_grad_hook(poison)
    return model


class LateCopies:
    """--late-copies (module docstring): a post-accumulate-grad hook on every parameter
    that keeps each new gradient aside and fills it with NaN, and fences that write it
    back when waited on."""

    def __init__(self, model):
        self.kept = {}  # id(grad) -> (grad, its values)
        for p in model.parameters():
            p.register_post_accumulate_grad_hook(self.scribble)

    def scribble(self, p):
        grad = p.grad._local_tensor
        self.kept[id(p.grad)] = (p.grad, grad.clone())
        grad.fill_(float("nan"))

    def fence(self, grad):
        return _Landing(self, grad)


class _Landing:
    """A copy in flight: the first synchronize() lands it; any other, on any thread,
    returns once it has landed (as a CUDA event's does)."""

    def __init__(self, late, grad):
        self.late, self.grad = late, grad
        self.lock = threading.Lock()

    def synchronize(self):
        with self.lock:
            kept = self.late.kept.pop(id(self.grad), None)
            if kept is not None:
                time.sleep(0.002)
                kept[0]._local_tensor.copy_(kept[1])


def make_optimizer(args, model, copy):
    early = copy == "early"
    late = LateCopies(model) if early and args.late_copies else None
    options = {}
    if early:
        options = dict(release_grads="release" in args.early,
                       speculative_early_start="speculative" in args.early,
                       early_start=args.early == "plain")
    opt = fsdp_worker.make_optimizer(args, model, **options)
    if late is not None:
        opt._handover.copied = CopiedGrads(opt, fence=late.fence)
    return opt


def gathered(t):
    """The full tensor of a Shard(0) DTensor (or plain tensor) from every rank's local
    shard in rank order, on the CPU."""
    mine = t.to_local() if hasattr(t, "to_local") else t
    every = [None] * dist.get_world_size()
    dist.all_gather_object(every, mine.detach().cpu().clone())
    return torch.cat(every) if mine.dim() > 0 else every[0]


def full_record(model, opt):
    """Full parameters and state arrays, by name (bit patterns as uint8)."""
    out = {}
    for name, p in model.named_parameters():
        out["param." + name] = gathered(p)
    for i, entry in opt.state_dict()["state"].items():
        for key in sorted(entry):
            if isinstance(entry[key], torch.Tensor):
                out["state.%s.%s" % (i, key)] = gathered(entry[key])
    return {k: v.reshape(-1).contiguous().view(torch.uint8) for k, v in out.items()}


def train(args, runs):
    rank = dist.get_rank()
    for step in range(args.steps):
        args.step = step
        for copy, (model, opt, record) in runs.items():
            opt.zero_grad()
            if copy == "early" and "speculative" in args.early:
                opt.begin_step()
            loss = model(batch(rank, step, 0, args.device)) * 1e-3
            loss = loss * args.clip_steps.get(step, 1.0)
            loss.backward()
            record["handed"].append(opt._core.handed)
            record["released"].append(all(p.grad is None for p in model.parameters()))
            opt.step()
            record["norms"].append(opt.last_result.grad_norm)
            record["applied"].append(bool(opt.last_result.applied))
            times = opt.last_step_times()
            record["speculated"].append((times["speculated_chunks"],
                                         times["rolled_back_chunks"]))


def scaled_steps(text):
    """--clip-steps: {step: loss scale} from "STEP:SCALE,..."."""
    return {int(step): float(scale) for step, scale in
            (item.split(":") for item in text.split(",") if item)}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--steps", type=int, default=6)
    ap.add_argument("--formats", default="bf16+ecc8/q8/q8")
    ap.add_argument("--early", choices=("release+speculative", "speculative", "release",
                                        "plain"), default="release+speculative")
    ap.add_argument("--late-copies", action="store_true")
    ap.add_argument("--clip-steps", type=scaled_steps, default="1:1e4,4:8",
                    help="STEP:SCALE,...: the loss of STEP scaled by SCALE")
    ap.add_argument("--nan-rank", type=int, default=None)
    ap.add_argument("--nan-step", type=int, default=-1)
    ap.add_argument("--load-from", default=None)
    ap.add_argument("--save-to", default=None)
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    args.fraction, args.offload_compute, args.clip, args.hsdp = 1.0, "host", 1.0, False
    if args.device == "cuda":  # the same kernels give every copy the same gradients
        os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
        torch.use_deterministic_algorithms(True, warn_only=True)

    world, mesh = fsdp_worker.init(args)
    runs = {}
    for copy in COPIES:
        model = build(args, mesh, copy)
        record = {"norms": [], "applied": [], "handed": [], "released": [],
                  "speculated": []}
        runs[copy] = (model, make_optimizer(args, model, copy), record)
    for model, opt, record in runs.values():
        if args.load_from:
            msd, osd = get_state_dict(model, opt)
            dcp.load({"model": msd, "optim": osd}, checkpoint_id=args.load_from)
            set_state_dict(model, opt, model_state_dict=msd, optim_state_dict=osd)
        record["mode"] = opt.mode
        record["host_shards"] = _dist.host_shards(opt._core.params)
        record["loaded"] = full_record(model, opt)
    train(args, runs)
    for model, opt, record in runs.values():
        record["state"] = state_bits(opt)
        record["local_params"] = {name: p.to_local().detach().cpu().clone()
                                  for name, p in model.named_parameters()}
        record["full"] = full_record(model, opt)
    if args.save_to:
        model, opt, _ = runs["early"]
        msd, osd = get_state_dict(model, opt)
        dcp.save({"model": msd, "optim": osd}, checkpoint_id=args.save_to)
    out = {copy: record for copy, (_, _, record) in runs.items()}
    out.update(rank=dist.get_rank(), world=world)
    torch.save(out, record_path(args.out, dist.get_rank()))
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
