"""Megatron-FSDP (the megatron-fsdp package, v1) with Tandem as its optimizer: a small
model sharded by fully_shard_model, stepped by tandem.megatron_fsdp.MegatronFSDPAdam
with half of the Adam state in host memory, a DCP checkpoint saved and loaded back
(docs/megatron_fsdp.md).

    torchrun --nproc_per_node 2 examples/megatron_fsdp_train.py --device cuda   # NCCL
    torchrun --nproc_per_node 2 examples/megatron_fsdp_train.py                 # CPUs, gloo

On CPUs Megatron-FSDP needs the test shims of tests/megatron/mfsdp_cpu.py (its CUDA calls
redirected, no NCCL-only reductions); with a GPU nothing is patched.
"""

import argparse
import os
import sys

import torch
import torch.distributed as dist

HERE = os.path.dirname(os.path.abspath(__file__))


class Block(torch.nn.Module):
    def __init__(self, width):
        super().__init__()
        self.up = torch.nn.Linear(width, 2 * width)
        self.down = torch.nn.Linear(2 * width, width)

    def forward(self, x):
        return x + self.down(torch.nn.functional.gelu(self.up(x)))


def build(args, device):
    from torch.distributed.device_mesh import init_device_mesh
    from megatron_fsdp import fully_shard_model
    from tandem.megatron_fsdp import MegatronFSDPAdam, fully_shard_optimizer
    torch.manual_seed(0)
    net = torch.nn.Sequential(*[Block(args.width) for _ in range(3)],
                              torch.nn.Linear(args.width, 1))
    mesh = init_device_mesh(device.type, (dist.get_world_size(), 1),
                            mesh_dim_names=("fsdp", "tp"))
    model = fully_shard_model(net, device_mesh=mesh, dp_shard_dim="fsdp", tp_dim="tp",
                              fsdp_unit_modules=[Block], zero_dp_strategy=3, device=device)
    if device.type == "cpu":  # gloo has no PREMUL_SUM (tests/megatron/mfsdp_cpu.py)
        for config in (model.ddp_config, model.param_and_grad_buffer.ddp_config):
            config.gradient_reduce_div_fusion = False
    model._replace_param_with_distributed_if_needed()  # the DTensor main-weight shards
    optimizer = fully_shard_optimizer(MegatronFSDPAdam(
        model.parameters(), lr=3e-3, weight_decay=0.01, offload_fraction=0.5))
    return model, optimizer


def train(model, optimizer, device, steps, first=0):
    losses = []
    for step in range(first, steps):
        g = torch.Generator().manual_seed(step * 100 + dist.get_rank())
        x = torch.randn(32, model.module[0].up.in_features, generator=g).to(device)
        loss = (model(x).squeeze(-1) - x.sum(-1).tanh()).square().mean()
        loss.backward()
        optimizer.step()   # finishes the gradient reduce-scatter, steps, installs weights
        optimizer.zero_grad()
        losses.append(float(loss.detach()))
    return losses


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--width", type=int, default=64)
    ap.add_argument("--ckpt", default=None, help="checkpoint directory (default: none)")
    args = ap.parse_args()
    if args.device == "cpu":
        sys.path.insert(0, os.path.join(HERE, "..", "tests", "megatron"))
        import mfsdp_cpu
        mfsdp_cpu.redirect(standalone=True)
        dist.init_process_group("gloo")
        device = torch.device("cpu")
    else:
        local_rank = int(os.environ.get("LOCAL_RANK", "0"))
        torch.cuda.set_device(local_rank)
        dist.init_process_group("nccl", device_id=torch.device("cuda", local_rank))
        device = torch.device("cuda", local_rank)
    import torch.distributed.checkpoint as dcp

    model, optimizer = build(args, device)
    half = args.steps // 2
    losses = train(model, optimizer, device, half)
    if args.ckpt:
        dcp.save({"model": model.state_dict(), "optimizer": optimizer.state_dict()},
                 checkpoint_id=args.ckpt)
        model, optimizer = build(args, device)  # a fresh start, then the checkpoint
        state = {"model": model.state_dict(), "optimizer": optimizer.load_template()}
        dcp.load(state, checkpoint_id=args.ckpt)
        model.load_state_dict(state["model"])
        optimizer.load_state_dict(state["optimizer"])
    losses += train(model, optimizer, device, args.steps, first=half)
    if dist.get_rank() == 0:
        print("loss %.4f -> %.4f over %d steps, %d ranks, offload_fraction 0.5"
              % (losses[0], losses[-1], args.steps, dist.get_world_size()))
    dist.destroy_process_group()
    return 0 if losses[-1] < losses[0] else 1


if __name__ == "__main__":
    sys.exit(main())
