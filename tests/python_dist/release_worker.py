"""One rank of the FSDP2 early start and gradient release tests
(tests/python_dist/test_fsdp_release.py), started by torchrun on CPUs with gloo (or on
GPUs with NCCL: --device cuda).

The model of fsdp_worker.py (uneven and empty shards, 1-D vectors, f32-moment widths),
trained with FSDP2's real forward and backward: each rank draws its own batch per (rank,
step, micro-batch), so the reduce-scatter averages different gradients. FSDP2 runs the
post-accumulate-grad hooks of the sharded parameters after each reduce-scatter, which
hand the gradients to the engine (--early plain/speculative, --release). Steps in
--clip-steps scale the loss up (clipping triggers); --nan-rank puts a NaN into that rank's
loss at --nan-step (the step is skipped on every rank).

Every rank writes a torch.save file (rank 0 to --out, rank r to <out>.rank<r>): the full
parameters, its local state arrays (bit patterns), the norms and applied flags, and per
step whether every p.grad was None after backward and how many tensors the engine was
handed during backward. --second-grad runs two micro-batches with release and no
accumulating(): the error raised through backward is recorded. --fraction 0.5,1 gives
each rank its own offload fraction (rank r the r-th, cyclically).
"""

import argparse
import contextlib
import os
import sys
import warnings

import torch
import torch.distributed as dist

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fsdp_worker  # noqa: E402
from fsdp_worker import build, cpu_params, record_path  # noqa: E402

import tandem.torch  # noqa: E402


def make_optimizer(args, model):
    return fsdp_worker.make_optimizer(args, model, release_grads=args.release,
                                      early_start=args.early == "plain",
                                      speculative_early_start=args.early == "speculative",
                                      in_place_grad_bytes=args.in_place_grad_bytes)


def batch(rank, step, micro, device):
    g = torch.Generator().manual_seed(rank * 100003 + step * 101 + micro)
    return torch.randint(0, 50, (4, 4), generator=g).to(device)


def state_bits(opt):
    """This rank's local state arrays, as bytes, in a fixed order."""
    out = []
    for entry in opt.state_dict()["state"].values():
        for key in sorted(entry):
            value = entry[key]
            if hasattr(value, "to_local"):
                value = value.to_local()
            if isinstance(value, torch.Tensor):
                out.append(value.detach().reshape(-1).contiguous().cpu().view(torch.uint8).clone())
    return out


def run_steps(args, model, opt, record):
    rank = dist.get_rank()
    k = args.accum
    for step in range(args.steps):
        opt.zero_grad()
        if args.early == "speculative":
            opt.begin_step()
        for micro in range(k):
            last = micro == k - 1
            if args.accum_mode == "nosync":
                model.set_requires_gradient_sync(last)
            context = (opt.accumulating() if args.accum_mode == "context" and not last
                       else contextlib.nullcontext())
            with context:
                loss = model(batch(rank, step, micro, args.device)) * (1e-3 / k)
                if step in args.clip_steps:
                    loss = loss * 1e4
                if step == args.nan_step and rank == args.nan_rank:
                    loss = loss * float("nan")
                try:
                    loss.backward()
                except RuntimeError as e:
                    if not args.second_grad:
                        raise
                    record["error"] = str(e)
                    return
        record["released"].append(all(p.grad is None for p in model.parameters()))
        record["handed"].append(opt._core.handed)
        opt.step()
        record["norms"].append(opt.last_result.grad_norm)
        record["applied"].append(bool(opt.last_result.applied))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--steps", type=int, default=6)
    ap.add_argument("--fraction", type=lambda s: [float(x) for x in s.split(",")],
                    default=[0.5], help="offload fraction; a list gives rank r the r-th")
    ap.add_argument("--formats", default="bf16+ecc8/q8/q8")
    ap.add_argument("--offload-compute", default="host")
    ap.add_argument("--clip", type=float, default=1.0)
    ap.add_argument("--clip-steps", type=lambda s: [int(x) for x in s.split(",") if x],
                    default=[1, 4])
    ap.add_argument("--release", action="store_true")
    ap.add_argument("--early", choices=("off", "plain", "speculative"), default="off")
    ap.add_argument("--in-place-grad-bytes", type=int, default=0,
                    help="in_place_grad_bytes: speculated chunks read handed gradients in place")
    ap.add_argument("--accum", type=int, default=1, help="micro-batches per step")
    ap.add_argument("--accum-mode", choices=("plain", "context", "nosync"), default="plain",
                    help="the micro-batches but the last: as they are, inside "
                         "opt.accumulating(), or with set_requires_gradient_sync(False)")
    ap.add_argument("--hsdp", action="store_true", help="a (2, world/2) mesh")
    ap.add_argument("--nan-rank", type=int, default=None)
    ap.add_argument("--nan-step", type=int, default=-1)
    ap.add_argument("--second-grad", action="store_true")
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    args.plain = False

    fractions = args.fraction
    world, mesh = fsdp_worker.init(args)
    args.fraction = fractions[dist.get_rank() % len(fractions)]
    model = build(args, mesh)
    record = {"norms": [], "applied": [], "released": [], "handed": [], "world": world}
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        opt = make_optimizer(args, model)
        run_steps(args, model, opt, record)
    record["warnings"] = [str(w.message) for w in caught
                          if issubclass(w.category, tandem.torch.TandemWarning)
                          and w.category is not tandem.torch.SkippedStepWarning]
    record["rank"] = dist.get_rank()
    record["params"] = cpu_params(model, local=False)
    record["state"] = state_bits(opt)
    record["step_count"] = opt.step_count
    torch.save(record, record_path(args.out, dist.get_rank()))
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
