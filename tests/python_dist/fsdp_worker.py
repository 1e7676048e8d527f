"""One rank of the FSDP2 + tandem.torch tests (tests/python_dist/test_fsdp.py), started by
torchrun on CPUs with gloo (or on GPUs with NCCL: --device cuda).

A small model whose parameters have the shapes that matter to sharding: rows that do not
divide by the world size (7 rows on 4 ranks), fewer rows than ranks (an empty shard),
1-D vectors and a width that is not a multiple of 32 (f32 moments under the group rule),
and group-safe matrices. Each step's gradients are drawn from a seed per (step,
parameter) and handed to every rank's shard (`--grads given`), so that every world size
sees the same gradients; `--grads backward` runs forward and backward instead.

Every rank writes a torch.save file (rank 0 to --out, rank r > 0 to <out>.rank<r>) with
the full parameters after the run as that rank gathered them (`params`), its own local
shards (`local_params`), the grad norms of every step and the skipped-step flags.
--crc saves and loads the DCP checkpoints through tandem.dcp's CRC32C storage writer and
reader (docs/dcp_integrity.md) instead of DCP's plain ones.
"""

import argparse
import os
import sys
import zlib

import torch
import torch.distributed as dist
import torch.distributed.checkpoint as dcp
from torch.distributed.checkpoint.state_dict import (get_state_dict, set_state_dict,
                                                     get_optimizer_state_dict,
                                                     StateDictOptions)
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.fsdp import fully_shard
from torch.distributed.tensor import distribute_tensor

import tandem.dcp
import tandem.torch


class Toy(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = torch.nn.Embedding(50, 64)
        self.up = torch.nn.Linear(64, 96)         # weight (96, 64), bias (96,)
        self.odd = torch.nn.Linear(96, 7)         # (7, 96): uneven on 2, 3, 4 ranks
        self.tiny = torch.nn.Linear(96, 3, bias=False)  # (3, 96): an empty shard on 4
        self.norm = torch.nn.LayerNorm(96)
        self.wide = torch.nn.Parameter(torch.randn(5, 40) * 0.1)  # K = 40: f32 moments

    def forward(self, ids):
        h = self.norm(torch.relu(self.up(self.embed(ids))))
        return self.odd(h).sum() + self.tiny(h).pow(2).mean() + self.wide.sum() * 1e-3


def build(args, mesh):
    torch.manual_seed(1234)
    model = Toy().to(args.device)
    if args.plain:
        return model
    for m in (model.up, model.odd, model.tiny):
        fully_shard(m, mesh=mesh)
    fully_shard(model, mesh=mesh)
    return model


def make_optimizer(args, model, **options):
    """tandem.torch.AdamW over the model with the run's formats, fraction, clip and
    offload_compute, and `options` (release_worker.py's early start and release)."""
    formats = dict(zip(("master_format", "momentum_format", "variance_format"),
                       args.formats.split("/")))
    return tandem.torch.AdamW(model.named_parameters(), lr=1e-2, weight_decay=0.1,
                              offload_fraction=args.fraction, max_grad_norm=args.clip,
                              chunk_elements=256, offload_compute=args.offload_compute,
                              stream_chunk_bytes=4096, **formats, **options)


def given_grad(name, shape, dtype, step):
    """The full gradient of parameter `name` at `step` (on the CPU), from its seed."""
    g = torch.Generator().manual_seed(step * 1000003 + zlib.crc32(name.encode()))
    return torch.randn(tuple(shape), generator=g).to(dtype)


def given_grads(model, step, nan_rank):
    """The same full gradient on every world size, each rank taking its shard."""
    for name, p in model.named_parameters():
        full = given_grad(name, p.shape, p.dtype, step)
        if hasattr(p, "device_mesh"):
            grad = distribute_tensor(full.to(p.device), p.device_mesh, p.placements,
                                     src_data_rank=None)
            if nan_rank is not None and dist.get_rank() == nan_rank and name == "up.weight":
                grad._local_tensor.view(-1)[0] = float("nan")
            p.grad = grad
        else:
            p.grad = full.to(p.device)


def run_steps(args, model, opt, first, last, record):
    ids = torch.arange(16, device=args.device).remainder(50).view(4, 4)
    for step in range(first, last):
        if args.grads == "given":
            nan = args.nan_rank if step == args.nan_step else None
            given_grads(model, step, nan)
        else:
            model(ids).backward()
        # torch's own norm of the same gradients (max_norm=inf: nothing is scaled).
        norm = torch.nn.utils.clip_grad_norm_(model.parameters(), float("inf"))
        norm = norm.full_tensor() if hasattr(norm, "full_tensor") else norm
        record["torch_norms"].append(float(norm))
        opt.step()
        opt.zero_grad()
        r = opt.last_result
        record["norms"].append(r.grad_norm)
        record["applied"].append(bool(r.applied))


def export_check(args, model, opt, record):
    """tandem.torch.to_torch_state loads into torch.optim.AdamW over the same FSDP2
    model; torch's state equals the decoded moments, and torch's next step runs."""
    exported = tandem.torch.to_torch_state(opt)
    theirs = torch.optim.AdamW(model.parameters(), lr=1e-2, weight_decay=0.1)
    theirs.load_state_dict(exported)
    same = True
    for i, p in enumerate(model.parameters()):
        mine = exported["state"][i]
        for key in ("exp_avg", "exp_avg_sq"):
            a, b = theirs.state[p][key], mine[key]
            same &= tuple(a.placements) == tuple(p.placements)
            same &= torch.equal(a.full_tensor(), b.full_tensor())
    given_grads(model, 99, None)
    theirs.step()
    record["export_same"] = bool(same)
    record["export_finite"] = all(bool(torch.isfinite(p.full_tensor()).all())
                                  for p in model.parameters())


def cpu_params(model, local):
    """Every parameter, cloned to the CPU: gathered in full, or (`local`) this rank's own
    shard (the whole tensor where a parameter is not sharded)."""
    out = {}
    for name, p in model.named_parameters():
        if hasattr(p, "full_tensor"):
            p = p.to_local() if local else p.full_tensor()
        out[name] = p.detach().cpu().clone()
    return out


def record_path(out, rank):
    """Where `rank` writes its record: rank 0 to --out itself, rank r to <out>.rank<r>."""
    return out if rank == 0 else "%s.rank%d" % (out, rank)


def save_checkpoint(args, state):
    if args.crc:
        tandem.dcp.save(state, args.ckpt)
    else:
        dcp.save(state, checkpoint_id=args.ckpt)


def load_checkpoint(args, state):
    """Loads in place; with --crc a damaged item raises tandem.dcp.CheckpointCorruptError
    naming the file and the item, on every rank, before any tensor is written."""
    if not args.crc:
        dcp.load(state, checkpoint_id=args.load_from)
        return
    try:
        tandem.dcp.load(state, args.load_from)
    except tandem.dcp.CheckpointCorruptError as e:
        print("rank %d: %s: %s" % (dist.get_rank(), type(e).__name__, e), file=sys.stderr,
              flush=True)
        raise


def init(args):
    """Joins the process group (NCCL on --device cuda, else gloo; this rank's GPU) and
    returns (world size, mesh): (world,), or (2, world / 2) with --hsdp."""
    dist.init_process_group("nccl" if args.device == "cuda" else "gloo")
    world = dist.get_world_size()
    if args.device == "cuda":
        torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", "0")))
    if args.hsdp:
        return world, init_device_mesh(args.device, (2, world // 2),
                                       mesh_dim_names=("rep", "shard"))
    return world, init_device_mesh(args.device, (world,))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--steps", type=int, default=4)
    ap.add_argument("--fraction", type=float, default=0.5)
    ap.add_argument("--formats", default="bf16+ecc8/q8/q8")
    ap.add_argument("--offload-compute", default="auto",
                    help='"auto", "host", "gpu" or a share (host mode: streamed through host slots)')
    ap.add_argument("--clip", type=float, default=0.0)
    ap.add_argument("--grads", choices=("given", "backward"), default="given")
    ap.add_argument("--hsdp", action="store_true", help="a (2, world/2) mesh")
    ap.add_argument("--plain", action="store_true", help="no fully_shard (world size 1)")
    ap.add_argument("--nan-rank", type=int, default=None)
    ap.add_argument("--nan-step", type=int, default=-1)
    ap.add_argument("--save-at", type=int, default=None, help="DCP save after this step")
    ap.add_argument("--load-from", default=None, help="DCP load, then run the rest")
    ap.add_argument("--first-step", type=int, default=0, help="first step (after a load)")
    ap.add_argument("--ckpt", default=None)
    ap.add_argument("--crc", action="store_true",
                    help="save and load through tandem.dcp's CRC32C writer and reader")
    ap.add_argument("--export-check", action="store_true")
    ap.add_argument("--out", required=True)
    args = ap.parse_args()

    world, mesh = init(args)
    model = build(args, mesh)
    opt = make_optimizer(args, model)
    record = {"norms": [], "torch_norms": [], "applied": [], "world": world}

    if args.load_from:
        msd, osd = get_state_dict(model, opt)
        load_checkpoint(args, {"model": msd, "optim": osd})
        set_state_dict(model, opt, model_state_dict=msd, optim_state_dict=osd)
    first = args.first_step
    if args.save_at is not None:
        run_steps(args, model, opt, first, args.save_at, record)
        msd, osd = get_state_dict(model, opt)
        save_checkpoint(args, {"model": msd, "optim": osd})
        first = args.save_at
    run_steps(args, model, opt, first, args.steps, record)

    if args.export_check:
        export_check(args, model, opt, record)
    record["rank"] = dist.get_rank()
    record["params"] = cpu_params(model, local=False)
    record["local_params"] = cpu_params(model, local=True)
    record["sharded_keys"] = sorted(
        get_optimizer_state_dict(model, opt, options=StateDictOptions())["state"])
    torch.save(record, record_path(args.out, dist.get_rank()))
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
