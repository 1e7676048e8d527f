"""A plain PyTorch model sharded by the standalone megatron-fsdp package (v1's
fully_shard_model, v2's megatron_fsdp.experimental.fully_shard), trained by
tandem.megatron_fsdp.MegatronFSDPAdam and by torch.optim.AdamW: the worker of
tests/python_mfsdp/test_standalone.py. Run it under torchrun; ``--device cpu`` runs on
CPU processes with gloo (tests/megatron/mfsdp_cpu.py, megatron.core hidden).

Each ``--train NAME,KIND[,key=value...]`` trains the same model (the same seed):

  KIND      torch      torch.optim.AdamW, stepped as megatron_fsdp.fully_shard_optimizer
                       steps it, without its zero-gradient initial step
            tandem     MegatronFSDPAdam with tandem.megatron_fsdp.fully_shard_optimizer
                       (v1) or megatron_fsdp.experimental.fully_shard_optimizer(...,
                       precision_aware=True) (v2)
            refusals   the misuses that must raise, each recorded as its error
  api=1|2              Megatron-FSDP v1 (default) or v2
  fraction=F, compute=C, formats=M/m/v   tandem's options
  decoupled=1          v1: use_decoupled_grad (gradients as param.decoupled_grad)
  main=bf16            bf16 model and main weights (v1: main_params_dtype=bfloat16)
  grads=seeded         every gradient replaced after backward by one drawn from (seed,
                       step, parameter name): the same at every world size
  save=K               after K steps: dcp.save({"model", "optimizer": state_dict()}) (v2:
                       the optimizer only: its masters hold the main weights)
  load=DIR             before training: dcp.load into load_template(), load_state_dict,
                       then train from the checkpoint's step

Rank 0 writes --out/result.json and --out/NAME.pt (full parameters, state arrays at
save and after load), as tests/megatron/mfsdp_gpt.py does.
"""

import argparse
import faulthandler
import os
import signal
import sys
import zlib

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import mfsdp_gpt  # noqa: E402  (gathering and comparing uneven shards)


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--device", choices=("cpu", "cuda"), default="cuda")
    p.add_argument("--train", action="append", default=[])
    p.add_argument("--out", required=True)
    p.add_argument("--steps", type=int, default=5)
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args(argv)
    args.runs = []
    for text in args.train:
        name, kind, *rest = text.split(",")
        run = {"name": name, "kind": kind}
        run.update(item.partition("=")[::2] for item in rest)
        args.runs.append(run)
    return args


class Block(torch.nn.Module):
    """A SwiGLU-shaped block whose parameters Megatron-FSDP shards very unevenly: whole
    rows, 1-D vectors cut anywhere, a 7-row and a 1-row matrix (empty on some ranks)."""

    def __init__(self, d=64, ff=96):
        super().__init__()
        self.norm = torch.nn.LayerNorm(d)
        self.fc1 = torch.nn.Linear(d, 2 * ff, bias=False)
        self.fc2 = torch.nn.Linear(ff, d, bias=False)
        self.odd = torch.nn.Linear(d, 7, bias=False)
        self.tiny = torch.nn.Parameter(torch.randn(1, d) * 0.1)

    def forward(self, x):
        g, u = self.fc1(self.norm(x)).chunk(2, -1)
        return (x + self.fc2(torch.nn.functional.silu(g) * u)
                + self.odd(x).sum(-1, keepdim=True) * 1e-2 + self.tiny)


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = torch.nn.Embedding(50, 64)
        self.blocks = torch.nn.ModuleList([Block(), Block()])
        self.head = torch.nn.Linear(64, 50, bias=False)

    def forward(self, ids):
        x = self.emb(ids)
        for b in self.blocks:
            x = b(x)
        logits = self.head(x).float()
        return torch.nn.functional.cross_entropy(logits.flatten(0, 1), ids.roll(-1, 1).flatten())


def init(args):
    import datetime
    import torch.distributed as dist
    if args.device == "cpu":
        import mfsdp_cpu
        mfsdp_cpu.redirect(standalone=True)
        dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=300))
    else:
        local_rank = int(os.environ.get("LOCAL_RANK", "0"))
        torch.cuda.set_device(local_rank)
        dist.init_process_group("nccl", device_id=torch.device("cuda", local_rank))
    return dist.get_rank(), dist.get_world_size()


def device(args):
    return torch.device("cpu") if args.device == "cpu" else torch.device(
        "cuda", torch.cuda.current_device())


def shard(args, run, net):
    """The model sharded by Megatron-FSDP v1 or v2 (`run`'s api), its parameters the
    distributed ones."""
    import torch.distributed as dist
    from torch.distributed.device_mesh import init_device_mesh
    from megatron_fsdp import MixedPrecisionPolicy
    bf16 = run.get("main") == "bf16"
    world = dist.get_world_size()
    if run.get("api", "1") == "2":
        from megatron_fsdp.experimental import Flat, fully_shard
        from megatron_fsdp.experimental.placement import Placements
        mesh = init_device_mesh(args.device, (world,), mesh_dim_names=("dp",))
        placements = Placements(dp_axes=["dp"], parameter=[Flat()], gradient=[Flat()],
                                optimizer=[Flat()])
        policy = MixedPrecisionPolicy(main_params_dtype=torch.bfloat16) if bf16 else None
        for b in net.blocks:
            fully_shard(b, mesh, placements, mixed_precision_policy=policy)
        fully_shard(net, mesh, placements, mixed_precision_policy=policy)
        return net
    from megatron_fsdp import fully_shard_model
    mesh = init_device_mesh(args.device, (world, 1), mesh_dim_names=("fsdp", "tp"))
    policy = (MixedPrecisionPolicy(main_params_dtype=torch.bfloat16,
                                   main_grads_dtype=torch.float32) if bf16
              else MixedPrecisionPolicy())
    model = fully_shard_model(net, device_mesh=mesh, dp_shard_dim="fsdp", tp_dim="tp",
                              fsdp_unit_modules=[Block], zero_dp_strategy=3,
                              device=device(args), mixed_precision_policy=policy,
                              use_decoupled_grad=run.get("decoupled") == "1")
    if args.device == "cpu":
        import mfsdp_cpu
        for config in (model.ddp_config, model.param_and_grad_buffer.ddp_config):
            for key, value in mfsdp_cpu.GLOO_DDP_CONFIG.items():
                setattr(config, key, value)
    model._replace_param_with_distributed_if_needed()
    return model


def tandem_options(run):
    master, momentum, variance = run.get("formats", "f32/f32/f32").split("/")
    options = dict(offload_fraction=float(run.get("fraction", 0.0)), master_format=master,
                   momentum_format=momentum, variance_format=variance)
    if "compute" in run:
        options["offload_compute"] = run["compute"]
    return options


HYPER = dict(lr=1e-2, betas=(0.9, 0.95), eps=1e-8, weight_decay=0.1)


def first_rows(params):
    """Each parameter's first global row on this rank (megatron_fsdp_slice, else the
    rows of the lower ranks: Megatron-FSDP v2 cuts flat buffers in rank order)."""
    rows = [None if getattr(p, "megatron_fsdp_slice", None) is None else mfsdp_gpt.first_row(p)
            for p in params]
    if any(r is None for r in rows):
        counts = mfsdp_gpt.every_rank([int(p._local_tensor.shape[0]) for p in params])
        import torch.distributed as dist
        rank = dist.get_rank()
        rows = [sum(c[k] for c in counts[:rank]) for k in range(len(params))]
    return rows


def seeded_grads(args, names, params, rows, step):
    """grads=seeded (module docstring)."""
    for name, p, row in zip(names, params, rows):
        grad = getattr(p, "decoupled_grad", None)
        if grad is None:
            grad = p.grad
        if grad is None:
            continue
        g = torch.Generator().manual_seed(args.seed + 1000003 * step + zlib.crc32(name.encode()))
        full = torch.randn(tuple(p.shape), generator=g) * 1e-2
        mine = grad._local_tensor if hasattr(grad, "_local_tensor") else grad
        mine.copy_(full[row:row + mine.shape[0]].to(mine.dtype).view(mine.shape))


def full_params(names, params):
    pieces = list(zip(first_rows(params), [p._local_tensor for p in params]))
    full = mfsdp_gpt.gather_rows(pieces)
    return None if full is None else dict(zip(names, full))


def crcs(params):
    return [zlib.crc32(p._local_tensor.detach().cpu().contiguous().view(torch.uint8)
                       .numpy().tobytes()) for p in params]


def refusals(args, run, record):
    """The misuses that must raise, each recorded as "ExceptionType: message"."""
    import megatron_fsdp
    from tandem import megatron_fsdp as tmf

    def attempt(key, fn):
        try:
            fn()
            record[key] = None
        except Exception as e:  # recorded for the test to check
            record[key] = "%s: %s" % (type(e).__name__, e)

    import torch.distributed as dist
    from torch.distributed.device_mesh import init_device_mesh
    torch.manual_seed(args.seed)
    net = Net()
    opt = tmf.MegatronFSDPAdam(net.parameters(), **HYPER)
    mesh = init_device_mesh(args.device, (dist.get_world_size(), 1),
                            mesh_dim_names=("fsdp", "tp"))
    attempt("fully_shard_with_tandem", lambda: megatron_fsdp.fully_shard(
        net, opt, device_mesh=mesh, dp_shard_dim="fsdp", tp_dim="tp",
        fsdp_unit_modules=[Block], device=device(args)))
    attempt("wrap_torch_adamw", lambda: tmf.fully_shard_optimizer(
        torch.optim.AdamW(Net().parameters())))


def run_one(args, run, record, tensors):
    import torch.distributed as dist
    import torch.distributed.checkpoint as dcp
    if run["kind"] == "refusals":
        refusals(args, run, record)
        return
    torch.manual_seed(args.seed + (1 if "load" in run else 0))
    net = Net()
    if run.get("main") == "bf16":
        net = net.bfloat16()
    model = shard(args, run, net.to(device(args)) if args.device == "cuda" else net)
    names = [n for n, _ in model.named_parameters()]
    params = [p for _, p in model.named_parameters()]
    rows = first_rows(params)
    api = run.get("api", "1")
    if run["kind"] == "torch":
        opt = torch.optim.AdamW(params, **HYPER)
    else:
        from tandem import megatron_fsdp as tmf
        opt = tmf.MegatronFSDPAdam(params, **HYPER, **tandem_options(run))
        before = crcs(params)
        if api == "2":
            from megatron_fsdp.experimental import fully_shard_optimizer
            fully_shard_optimizer(opt, precision_aware=True)
        else:
            tmf.fully_shard_optimizer(opt)
        record["wrap_changed_no_weight"] = all(mfsdp_gpt.every_rank(crcs(params) == before))
    first = 0
    if "load" in run:
        template = {"optimizer": opt.load_template(), "step": 0}
        if api == "1":
            template["model"] = model.state_dict()
        dcp.load(template, checkpoint_id=run["load"])
        if api == "1":
            model.load_state_dict(template["model"])
        opt.load_state_dict(template["optimizer"])  # its masters restore the main weights
        first = int(template["step"])
        tensors["loaded_state"] = full_state(opt, params)
    losses, applied = [], []
    for step in range(first, args.steps):
        g = torch.Generator().manual_seed(args.seed * 7919 + step * 131 + dist.get_rank())
        ids = torch.randint(0, 50, (2, 8), generator=g).to(device(args))
        loss = model(ids)
        loss.backward()
        if run.get("grads") == "seeded":
            seeded_grads(args, names, params, rows, step)
        if run["kind"] == "torch" and api == "1":
            opt.step()  # model_auto_sync: the gradients were reduced in backward
            model.install_optimized_model_weights()
            opt.zero_grad()
            model.zero_grad_buffer()
        else:
            opt.step()
            opt.zero_grad()
        reported = loss.detach().float().clone()
        dist.all_reduce(reported)
        losses.append(float(reported) / dist.get_world_size())
        applied.append(getattr(opt, "last_result", (True,))[0] if run["kind"] == "tandem"
                       else True)
        if "save" in run and step + 1 == int(run["save"]):
            osd = opt.state_dict()
            keys = sorted(mfsdp_gpt.flat_keys(osd))
            record["state_keys_identical"] = len(set(map(tuple, mfsdp_gpt.every_rank(keys)))) == 1
            path = os.path.join(args.out, run["name"])
            state = {"optimizer": osd, "step": step + 1}
            if api == "1":
                # v2's model state dict (megatron-fsdp 0.6.1) carries DTensor's default
                # chunks, which do not describe its uneven shards: loading it at another
                # world size fails. The optimizer's masters hold the main weights.
                state["model"] = model.state_dict()
            dcp.save(state, checkpoint_id=path)
            record["checkpoint"] = path
            tensors["saved_state"] = full_state(opt, params)
    record.update(first_step=first, losses=losses, applied=applied)
    tensors["params"] = full_params(names, params)
    mfsdp_gpt.finish_run(model)


def full_state(opt, params):
    """{index.array: full tensor} of the optimizer's state on rank 0."""
    sd = opt.state_dict()
    state = {str(k): v for k, v in sd["state"].items()}
    return mfsdp_gpt.full_state(state)


def main():
    args = parse_args()
    faulthandler.register(signal.SIGUSR1, all_threads=True)  # kill -USR1: stacks
    faulthandler.enable(all_threads=True)  # a crash (SIGSEGV, abort) prints every stack
    rank, world = init(args)
    os.makedirs(args.out, exist_ok=True)
    import megatron_fsdp
    result = {"argv": sys.argv, "world_size": world, "device": args.device,
              "versions": {"torch": torch.__version__,
                           "megatron_fsdp": getattr(megatron_fsdp, "__version__", "?")},
              "runs": {}, "errors": []}
    return mfsdp_gpt.run_all(args, rank, result, lambda run, record, tensors: run_one(
        args, run, record, tensors))

if __name__ == "__main__":
    mfsdp_gpt.exit_with(main())
