"""FSDP2 + tandem.torch: a small Llama-style model trained with fully_shard, gradient
clipping, a cosine schedule and a DCP save/resume (docs/distributed.md).

    torchrun --nproc_per_node 2 examples/fsdp_train.py                 # CPUs, gloo
    torchrun --nproc_per_node 2 examples/fsdp_train.py --device cuda   # GPUs, NCCL
    torchrun --nproc_per_node 2 examples/fsdp_train.py --resume        # also checks a resume
    torchrun --nproc_per_node 2 examples/fsdp_train.py --params-on-host --device cuda

With --resume the run saves a DCP checkpoint halfway, then a second model and optimizer
(fresh, as after a restart) load it and run the second half again; the example prints
whether the resumed weights equal the uninterrupted ones bit for bit. Any world size
works for either half (--resume-world is for the test that loads at another one).

With --params-on-host the shards live in host memory (FSDP2's CPUOffloadPolicy) and
the optimizer steps them there, each shard's update started during backward as its
gradient lands, speculatively (docs/distributed.md, "Parameters on the host").
"""

import argparse
import math
import os
import sys
import tempfile
import time

import torch
import torch.distributed as dist
import torch.distributed.checkpoint as dcp
import torch.nn.functional as F
from torch.distributed.checkpoint.state_dict import get_state_dict, set_state_dict
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.fsdp import CPUOffloadPolicy, MixedPrecisionPolicy, fully_shard

import tandem.torch


# ---------------------------------------------------------------------------------------
# A Llama-style decoder in plain PyTorch: RMSNorm, rotary attention, SwiGLU.

class RMSNorm(torch.nn.Module):
    def __init__(self, dim, eps=1e-5):
        super().__init__()
        self.eps = eps
        self.weight = torch.nn.Parameter(torch.ones(dim))

    def forward(self, x):
        x32 = x.float()
        return (x32 * torch.rsqrt(x32.pow(2).mean(-1, keepdim=True) + self.eps)).to(
            x.dtype) * self.weight


def rotary(x, base=10000.0):
    b, h, t, d = x.shape
    inv = 1.0 / base ** (torch.arange(0, d, 2, device=x.device, dtype=torch.float32) / d)
    ang = torch.arange(t, device=x.device, dtype=torch.float32)[:, None] * inv[None, :]
    cos, sin = ang.cos().to(x.dtype), ang.sin().to(x.dtype)
    x1, x2 = x[..., 0::2], x[..., 1::2]
    return torch.stack((x1 * cos - x2 * sin, x1 * sin + x2 * cos), dim=-1).flatten(-2)


class Block(torch.nn.Module):
    def __init__(self, dim, heads, kv_heads, hidden):
        super().__init__()
        self.heads, self.kv_heads = heads, kv_heads
        kv_dim = dim // heads * kv_heads
        self.attn_norm = RMSNorm(dim)
        self.wqkv = torch.nn.Linear(dim, dim + 2 * kv_dim, bias=False)
        self.wo = torch.nn.Linear(dim, dim, bias=False)
        self.mlp_norm = RMSNorm(dim)
        self.w_gate_up = torch.nn.Linear(dim, 2 * hidden, bias=False)
        self.w_down = torch.nn.Linear(hidden, dim, bias=False)

    def forward(self, x):
        b, t, d = x.shape
        hd = d // self.heads
        q, k, v = self.wqkv(self.attn_norm(x)).split(
            [d, hd * self.kv_heads, hd * self.kv_heads], dim=-1)
        q = q.view(b, t, self.heads, hd).transpose(1, 2)
        k = k.view(b, t, self.kv_heads, hd).transpose(1, 2)
        v = v.view(b, t, self.kv_heads, hd).transpose(1, 2)
        a = F.scaled_dot_product_attention(rotary(q), rotary(k), v, is_causal=True,
                                           enable_gqa=self.kv_heads != self.heads)
        x = x + self.wo(a.transpose(1, 2).reshape(b, t, d))
        gate, up = self.w_gate_up(self.mlp_norm(x)).chunk(2, dim=-1)
        return x + self.w_down(F.silu(gate) * up)


class Llama(torch.nn.Module):
    """Defaults: a small model for the example. Llama-3-8B's shapes are
    Llama(vocab=128256, dim=4096, layers=32, heads=32, kv_heads=8, hidden=14336)."""

    def __init__(self, vocab=512, dim=128, layers=4, heads=4, kv_heads=2, hidden=352):
        super().__init__()
        self.embed = torch.nn.Embedding(vocab, dim)
        self.layers = torch.nn.ModuleList(Block(dim, heads, kv_heads, hidden)
                                          for _ in range(layers))
        self.norm = RMSNorm(dim)
        self.lm_head = torch.nn.Linear(dim, vocab, bias=False)

    def forward(self, ids):
        x = self.embed(ids)
        for layer in self.layers:
            x = layer(x)
        return self.lm_head(self.norm(x))


# ---------------------------------------------------------------------------------------

def build(args, mesh):
    torch.manual_seed(0)  # the same initial weights on every rank and every run
    model = Llama()
    mp = MixedPrecisionPolicy(param_dtype=torch.bfloat16) if args.device == "cuda" else None
    kwargs = {"mesh": mesh, **({"mp_policy": mp} if mp else {})}
    options = dict(offload_fraction=args.offload_fraction)
    if args.params_on_host:
        # The shards stay in (pinned, where there is a GPU) host memory; the optimizer
        # updates them there during backward.
        kwargs["offload_policy"] = CPUOffloadPolicy(pin_memory=args.device == "cuda")
        options = dict(offload_fraction=1.0, offload_compute="host",
                       speculative_early_start=True, release_grads=True)
    else:
        model.to(args.device)
    for layer in model.layers:
        fully_shard(layer, **kwargs)
    fully_shard(model, **kwargs)
    opt = tandem.torch.AdamW(model.named_parameters(), lr=args.lr, betas=(0.9, 0.95),
                             weight_decay=0.1, master_format="bf16+ecc8",
                             momentum_format="q8", variance_format="q8", **options)
    warmup = 3

    def schedule(step):
        if step < warmup:
            return (step + 1) / warmup
        return 0.5 * (1 + math.cos(math.pi * (step - warmup) / max(1, args.steps - warmup)))

    sched = torch.optim.lr_scheduler.LambdaLR(opt, schedule)
    return model, opt, sched


def batch(step, args):
    # The same batch on every rank (a real run would give each rank its own data): random
    # tokens whose target is a fixed function of the token, which the model learns fast.
    g = torch.Generator().manual_seed(step)
    ids = torch.randint(0, 512, (args.batch, args.seq), generator=g)
    return ids.to(args.device), ((ids * 7 + 3) % 512).to(args.device)


def train(model, opt, sched, args, first, last, log):
    t0 = time.perf_counter()
    for step in range(first, last):
        inputs, targets = batch(step, args)
        if args.params_on_host:  # this step's lr and clip norm, before its backward
            opt.begin_step(max_grad_norm=args.max_grad_norm)
        logits = model(inputs)
        loss = F.cross_entropy(logits.float().flatten(0, 1), targets.flatten())
        loss.backward()
        opt.step(max_grad_norm=args.max_grad_norm)  # the clip norm comes from every rank
        opt.zero_grad()
        sched.step()
        if log and dist.get_rank() == 0:
            r = opt.last_result
            done = step + 1 - first
            eta = (time.perf_counter() - t0) / done * (last - step - 1)
            print("step %3d  loss %.4f  grad norm %.3f%s  lr %.2e  eta %.0fs"
                  % (step + 1, loss.item(), r.grad_norm, "" if r.applied else " (skipped)",
                     sched.get_last_lr()[0], eta), flush=True)


def same_weights(a, b, device):
    """Whether models a and b hold the same weights on every rank, bit for bit (each rank
    compares its own shards)."""
    same = all(torch.equal(p.to_local().cpu(), q.to_local().cpu())
               for p, q in zip(a.parameters(), b.parameters()))
    flag = torch.tensor([int(same)], device=device)
    dist.all_reduce(flag, op=dist.ReduceOp.MIN)
    return bool(flag.item())


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    ap.add_argument("--steps", type=int, default=12)
    ap.add_argument("--batch", type=int, default=4)
    ap.add_argument("--seq", type=int, default=64)
    ap.add_argument("--lr", type=float, default=3e-3)
    ap.add_argument("--max-grad-norm", type=float, default=1.0)
    ap.add_argument("--offload-fraction", type=float, default=0.5)
    ap.add_argument("--resume", action="store_true",
                    help="save halfway with DCP, load into a fresh model and compare")
    ap.add_argument("--checkpoint-dir", default=None)
    ap.add_argument("--params-on-host", action="store_true",
                    help="CPUOffloadPolicy: the shards in host memory, stepped there")
    args = ap.parse_args()

    dist.init_process_group("nccl" if args.device == "cuda" else "gloo")
    if args.device == "cuda":
        torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", "0")))
    mesh = init_device_mesh(args.device, (dist.get_world_size(),))
    if dist.get_rank() == 0:
        print("FSDP2 + tandem.torch on %d %s rank(s): %d steps, %s"
              % (dist.get_world_size(), args.device, args.steps,
                 "parameters on the host" if args.params_on_host
                 else "offload fraction %g" % args.offload_fraction))

    model, opt, sched = build(args, mesh)
    half = args.steps // 2
    train(model, opt, sched, args, 0, half, log=True)
    ckpt = args.checkpoint_dir or tempfile.mkdtemp(prefix="tandem-fsdp-")
    if args.resume:
        ckpt = [ckpt]
        dist.broadcast_object_list(ckpt, src=0)
        ckpt = ckpt[0]
        msd, osd = get_state_dict(model, opt)
        dcp.save({"model": msd, "optim": osd, "sched": sched.state_dict()},
                 checkpoint_id=ckpt)
    train(model, opt, sched, args, half, args.steps, log=True)

    rc = 0
    if args.resume:
        # A restart: fresh model, optimizer and scheduler, state from the checkpoint.
        model2, opt2, sched2 = build(args, mesh)
        msd, osd = get_state_dict(model2, opt2)
        state = {"model": msd, "optim": osd, "sched": sched2.state_dict()}
        dcp.load(state, checkpoint_id=ckpt)
        set_state_dict(model2, opt2, model_state_dict=msd, optim_state_dict=osd)
        sched2.load_state_dict(state["sched"])
        train(model2, opt2, sched2, args, half, args.steps, log=False)
        same = same_weights(model, model2, args.device)
        if dist.get_rank() == 0:
            print("resumed from %s at step %d: weights %s the uninterrupted run's"
                  % (ckpt, half, "equal, bit for bit," if same else "DIFFER from"))
        rc = 0 if same else 1
    dist.destroy_process_group()
    return rc


if __name__ == "__main__":
    sys.exit(main())
