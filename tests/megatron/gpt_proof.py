"""Proof on a GPU: Megatron-Core's DistributedOptimizer with tandem.megatron.

A small GPT built from Megatron-Core's own classes (GPTModel with the local, non-TE
layer spec, Float16Module, DistributedDataParallel, DistributedOptimizer, the
OptimizerParamScheduler with a decoupled lr for embedding/output, i.e. per-group lrs
whose ratio changes every step) trains on synthetic tokens with

  megatron     Megatron's own optimizer (TE FusedAdam, apex FusedAdam, or torch AdamW
               through Megatron's fallback: whichever its get_megatron_optimizer picks)
  tandem-off0  tandem.megatron, f32 states, offload_fraction 0
  tandem-off1  tandem.megatron, f32 states, offload_fraction 1 (all state on the host),
               checkpoint state handed to Megatron in host memory (state_device="cpu")
  tandem-q8    tandem.megatron, bf16+ecc8 masters, q8 moments, offload_fraction 0.5

and compares the losses; then, for each checkpoint sharding type of the
DistributedOptimizer, saves a distributed checkpoint (megatron.core.dist_checkpointing,
sharded_state_dict) of each tandem run in the middle of the run, loads it into
a model and optimizer built from another seed, and checks that the loaded optimizer
state equals the saved one and that the resumed steps match the uninterrupted run.

Run (one GPU, or more for data parallelism):
  torchrun --standalone --nproc-per-node 1 tests/megatron/gpt_proof.py --out proof.json
CPU check of imports, arguments and the model (no DDP, no optimizer step):
  python tests/megatron/gpt_proof.py --dry-run

Prints a table; writes JSON to --out; exits 1 if a check failed (2 on a crash, with
whatever was measured in the JSON).
"""

import argparse
import gc
import json
import os
import platform
import statistics
import sys
import tempfile
import time
import traceback
import warnings

os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")  # deterministic cuBLAS

import torch  # noqa: E402


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--out", default="gpt_proof.json", help="JSON results path")
    p.add_argument("--steps", type=int, default=16, help="training steps per run")
    p.add_argument("--resume-at", type=int, default=8,
                   help="checkpoint after this many steps, resume, run to --steps")
    p.add_argument("--layers", type=int, default=4)
    p.add_argument("--hidden", type=int, default=256)
    p.add_argument("--heads", type=int, default=8)
    p.add_argument("--vocab", type=int, default=2048)
    p.add_argument("--seq", type=int, default=128)
    p.add_argument("--micro-batch", type=int, default=8)
    p.add_argument("--lr", type=float, default=3e-3)
    p.add_argument("--clip-grad", type=float, default=1.0)
    p.add_argument("--seed", type=int, default=1234)
    p.add_argument("--sharding-types",
                   default="dp_reshardable,fully_reshardable",
                   help="DistributedOptimizer checkpoint formats to resume through "
                   "(megatron-core 0.16.1 refuses its fully_sharded_model_space: "
                   "\"ShardedTensor.flattened_range is not supported\")")
    p.add_argument("--ckpt-root", default=None, help="checkpoint directory (default: tmp)")
    p.add_argument("--loss-rtol", type=float, default=2e-2,
                   help="largest relative loss difference tandem f32 vs megatron")
    p.add_argument("--q8-loss-rtol", type=float, default=5e-2,
                   help="largest relative loss difference tandem-q8 vs megatron")
    p.add_argument("--dry-run", action="store_true",
                   help="CPU: imports, arguments and one forward/backward of the model")
    args = p.parse_args(argv)
    if not 0 < args.resume_at < args.steps:
        p.error("--resume-at must be in (0, --steps)")
    return args


# ------------------------------------------------------------------------------------------
# Setup


def init_distributed(dry_run):
    import torch.distributed as dist
    from megatron.core import parallel_state
    if "RANK" not in os.environ:  # a plain `python gpt_proof.py`: one rank
        os.environ.update(RANK="0", WORLD_SIZE="1", LOCAL_RANK="0", MASTER_ADDR="127.0.0.1",
                          MASTER_PORT=os.environ.get("MASTER_PORT", "29533"))
    local_rank = int(os.environ["LOCAL_RANK"])
    if dry_run:
        dist.init_process_group("gloo")
    else:
        torch.cuda.set_device(local_rank)
        dist.init_process_group("nccl", device_id=torch.device("cuda", local_rank))
    parallel_state.initialize_model_parallel(1, 1)
    return dist.get_rank(), dist.get_world_size()


def transformer_config(args, dry_run=False):
    from megatron.core.transformer.transformer_config import TransformerConfig
    return TransformerConfig(
        num_layers=args.layers, hidden_size=args.hidden, num_attention_heads=args.heads,
        use_cpu_initialization=True, bf16=True, params_dtype=torch.bfloat16,
        pipeline_dtype=torch.bfloat16, hidden_dropout=0.0, attention_dropout=0.0,
        init_method_std=0.02)


def build_model(args, seed, dry_run=False):
    """GPTModel (local spec) in bf16 (Float16Module), wrapped in Megatron's DDP with the
    distributed optimizer's gradient buffer; the same seed gives the same weights."""
    from megatron.core.models.gpt.gpt_layer_specs import get_gpt_layer_local_spec
    from megatron.core.models.gpt.gpt_model import GPTModel
    from megatron.core.transformer.module import Float16Module
    torch.manual_seed(seed)
    if not dry_run:
        from megatron.core.tensor_parallel.random import model_parallel_cuda_manual_seed
        model_parallel_cuda_manual_seed(seed)
    config = transformer_config(args, dry_run)
    gpt = GPTModel(config=config, transformer_layer_spec=get_gpt_layer_local_spec(),
                   vocab_size=args.vocab, max_sequence_length=args.seq)
    if dry_run:
        return Float16Module(config, gpt)
    gpt.cuda(torch.cuda.current_device())
    model = Float16Module(config, gpt)
    from megatron.core.distributed import (DistributedDataParallel,
                                           DistributedDataParallelConfig)
    ddp_config = DistributedDataParallelConfig(grad_reduce_in_fp32=True,
                                               overlap_grad_reduce=False,
                                               use_distributed_optimizer=True)
    return DistributedDataParallel(config=config, ddp_config=ddp_config, module=model)


def optimizer_config(args):
    from megatron.core.optimizer import OptimizerConfig
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return OptimizerConfig(
            optimizer="adam", lr=args.lr, min_lr=args.lr / 10, decoupled_lr=2 * args.lr,
            decoupled_min_lr=args.lr / 20, weight_decay=0.1, adam_beta1=0.9,
            adam_beta2=0.95, adam_eps=1e-8, clip_grad=args.clip_grad, bf16=True,
            use_distributed_optimizer=True)


RUNS = {
    "megatron": None,
    "tandem-off0": dict(offload_fraction=0.0),
    "tandem-off1": dict(offload_fraction=1.0, state_device="cpu"),
    "tandem-q8": dict(offload_fraction=0.5, master_format="bf16+ecc8", momentum_format="q8",
                      variance_format="q8"),
}


def config_overrides(config):
    """Megatron's standard per-group overrides (no weight decay on biases and norms; the
    decoupled lr of embedding and output weights), with the decoupled group marked
    is_decoupled_lr: megatron-core 0.16.1 leaves it False, so that group and the default
    one share their identifier keys and its load_state_dict gives both the same saved
    group (max_lr, min_lr), whichever the optimizer."""
    from megatron.core.optimizer import get_standard_config_overrides
    overrides = get_standard_config_overrides(config)
    for value in overrides.values():
        if "max_lr" in value:
            value["is_decoupled_lr"] = True
    return overrides


def build_optimizer(args, model, run):
    from megatron.core.optimizer_param_scheduler import OptimizerParamScheduler
    config = optimizer_config(args)
    options = RUNS[run]
    if options is None:
        from megatron.core.optimizer import get_megatron_optimizer
        opt = get_megatron_optimizer(config, [model], config_overrides(config))
    else:
        import tandem.megatron
        opt = tandem.megatron.get_megatron_optimizer(config, [model], config_overrides(config),
                                                     **options)
        inner = tandem.megatron.tandem_optimizers(opt)
        assert inner, "no TandemAdam inside the Megatron optimizer"
    sched = OptimizerParamScheduler(
        opt, init_lr=0.0, max_lr=args.lr, min_lr=args.lr / 10, lr_warmup_steps=2,
        lr_decay_steps=args.steps, lr_decay_style="cosine", start_wd=0.05, end_wd=0.1,
        wd_incr_steps=args.steps, wd_incr_style="linear")
    return opt, sched


def batch(args, step, rank, device):
    g = torch.Generator().manual_seed(args.seed * 7919 + step * 131 + rank)
    tokens = torch.randint(0, args.vocab, (args.micro_batch, args.seq + 1), generator=g)
    # A learnable pattern so the loss falls: every other token repeats its predecessor.
    tokens[:, 2::2] = tokens[:, 1:-1:2]
    inputs, labels = tokens[:, :-1].contiguous(), tokens[:, 1:].contiguous()
    position_ids = torch.arange(args.seq).unsqueeze(0).expand(args.micro_batch, -1)
    mask = torch.triu(torch.ones(args.seq, args.seq, dtype=torch.bool), diagonal=1)
    mask = mask.view(1, 1, args.seq, args.seq)
    return [t.to(device) for t in (inputs, position_ids, mask, labels)]


def train_step(args, model, opt, sched, step, rank, device):
    import torch.distributed as dist
    inputs, position_ids, mask, labels = batch(args, step, rank, device)
    model.zero_grad_buffer()
    opt.zero_grad()
    loss = model(inputs, position_ids, mask, labels=labels).float().mean()
    loss.backward()
    model.finish_grad_sync()
    ok, grad_norm, _ = opt.step()
    sched.step(1)
    reported = loss.detach().clone()
    dist.all_reduce(reported)
    reported /= dist.get_world_size()
    return float(reported), (float(grad_norm) if grad_norm is not None else None), bool(ok)


# ------------------------------------------------------------------------------------------
# State capture and checkpoints


def inner_params(opt):
    import tandem.megatron
    inner = tandem.megatron.tandem_optimizers(opt)
    return [(o, p) for o in inner for g in o.param_groups for p in g["params"]
            if p.numel() > 0]


def capture_state(opt):
    """Every engine tensor's (master, exp_avg, exp_avg_sq) as fp32 CPU tensors."""
    out = []
    for o, p in inner_params(opt):
        out.append([o.get_unscaled_state(p, n).float().cpu().clone()
                    for n in ("master_param", "exp_avg", "exp_avg_sq")])
    return out


def compare_states(a, b):
    if len(a) != len(b):
        return False, float("inf")
    equal, worst = True, 0.0
    for x, y in zip(a, b):
        for s, t in zip(x, y):
            if s.shape != t.shape:
                return False, float("inf")
            equal &= torch.equal(s, t)
            worst = max(worst, float((s - t).abs().max()) if s.numel() else 0.0)
    return equal, worst


def unwrap(model):
    """The GPTModel inside DistributedDataParallel and Float16Module (its sharded state
    dict's keys carry no wrapper prefix, and its load_state_dict takes them)."""
    while hasattr(model, "module"):
        model = model.module
    return model


def sharded_state(model, opt, sched, sharding_type, is_loading):
    model_sd = unwrap(model).sharded_state_dict()
    metadata = {"distrib_optim_sharding_type": sharding_type}
    return {"model": model_sd,
            "optimizer": opt.sharded_state_dict(model_sd, is_loading=is_loading,
                                                metadata=metadata),
            "scheduler": sched.state_dict()}


def save_checkpoint(path, model, opt, sched, sharding_type):
    from megatron.core import dist_checkpointing
    dist_checkpointing.save(sharded_state(model, opt, sched, sharding_type, False), path)


def load_checkpoint(path, model, opt, sched, sharding_type):
    from megatron.core import dist_checkpointing
    state = dist_checkpointing.load(sharded_state(model, opt, sched, sharding_type, True),
                                    path)
    unwrap(model).load_state_dict(state["model"])
    opt.load_state_dict(state["optimizer"])
    sched.load_state_dict(state["scheduler"])


def shared_dir(root, name, rank):
    import torch.distributed as dist
    holder = [None]
    if rank == 0:
        holder[0] = tempfile.mkdtemp(prefix=name + "-", dir=root)
    dist.broadcast_object_list(holder, src=0)
    return holder[0]


# ------------------------------------------------------------------------------------------
# The runs


def run_training(args, run, rank, device, checkpoints=()):
    """Trains `run` for args.steps; after args.resume_at steps saves one checkpoint per
    sharding type in `checkpoints` (name -> dir) and captures the optimizer state."""
    gc.collect()
    torch.cuda.empty_cache()
    torch.cuda.reset_peak_memory_stats()
    model = build_model(args, args.seed)
    opt, sched = build_optimizer(args, model, run)
    losses, norms, times, saved_state = [], [], [], None
    for step in range(args.steps):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        loss, norm, ok = train_step(args, model, opt, sched, step, rank, device)
        torch.cuda.synchronize()
        times.append((time.perf_counter() - t0) * 1e3)
        losses.append(loss)
        norms.append(norm)
        if not ok:
            raise RuntimeError("%s: step %d was not applied" % (run, step))
        if step + 1 == args.resume_at and checkpoints:
            saved_state = capture_state(opt)
            for sharding_type, path in checkpoints.items():
                save_checkpoint(path, model, opt, sched, sharding_type)
    info = {"losses": losses, "grad_norms": norms,
            "step_ms_median": statistics.median(times[2:]) if len(times) > 2 else None,
            # Model, gradient buffer and optimizer state on the GPU (the checkpoint's
            # transient copies are in the peak).
            "gpu_allocated_bytes": torch.cuda.memory_allocated(),
            "gpu_peak_bytes": torch.cuda.max_memory_allocated()}
    if RUNS[run] is not None:
        inner = __import__("tandem.megatron").megatron.tandem_optimizers(opt)
        info["engine_mode"] = inner[0].mode
        info["skipped_steps"] = sum(o.skipped_steps for o in inner)
        info["engine_rebuilds"] = sum(o.rebuilds for o in inner)
        mem = inner[0].memory()
        info["memory"] = {"device_total": mem["device"]["total"],
                          "host_total": mem["host"]["total"]}
    else:
        info["inner_optimizer"] = "%s.%s" % (type(opt.optimizer).__module__,
                                             type(opt.optimizer).__name__)
    del model, opt, sched
    gc.collect()
    torch.cuda.empty_cache()
    return info, saved_state


def run_resume(args, run, rank, device, sharding_type, path, saved_state, uninterrupted):
    """Builds from another seed, loads `path`, checks the state and resumes."""
    model = build_model(args, args.seed + 1)
    opt, sched = build_optimizer(args, model, run)
    load_checkpoint(path, model, opt, sched, sharding_type)
    loaded = capture_state(opt)
    equal, worst = compare_states(saved_state, loaded)
    losses = []
    for step in range(args.resume_at, args.steps):
        loss, _, ok = train_step(args, model, opt, sched, step, rank, device)
        losses.append(loss)
    ref = uninterrupted[args.resume_at:]
    diffs = [abs(a - b) / max(abs(b), 1e-12) for a, b in zip(losses, ref)]
    exact_formats = RUNS[run].get("master_format", "f32") == "f32"
    state_ok = equal if exact_formats else worst < 1e-2
    out = {"state_equal": equal, "state_max_abs_diff": worst, "losses_resumed": losses,
           "losses_uninterrupted": ref, "max_rel_loss_diff": max(diffs),
           "losses_identical": losses == ref,
           "ok": bool(state_ok and max(diffs) < 1e-3)}
    del model, opt, sched
    gc.collect()
    torch.cuda.empty_cache()
    return out


def cuda_device():
    return torch.device("cuda", torch.cuda.current_device())


def rel_diff(a, b):
    return max(abs(x - y) / max(abs(y), 1e-12) for x, y in zip(a, b))


def main(args):
    rank, world = init_distributed(args.dry_run)
    if args.dry_run:
        return dry_run(args, rank)
    torch.use_deterministic_algorithms(True, warn_only=True)
    device = cuda_device()
    import megatron.core
    import megatron.core.optimizer as mco
    import tandem
    result = {"argv": sys.argv, "args": vars(args), "world_size": world,
              "device": torch.cuda.get_device_name(device),
              "versions": {"torch": torch.__version__,
                           "megatron.core": getattr(megatron.core, "__version__", "?"),
                           "tandem": getattr(tandem, "__version__", "?"),
                           "python": platform.python_version()},
              "megatron_fallback_torch_adamw": bool(mco.USING_PYTORCH_OPTIMIZER),
              "runs": {}, "resume": {}, "checks": {}, "errors": []}
    try:
        root = args.ckpt_root or tempfile.gettempdir()
        types_ = [t for t in args.sharding_types.split(",") if t]
        try:
            import psutil  # noqa: F401  (dist_checkpointing's writer needs it)
        except ImportError:
            result["errors"].append("psutil is not installed: megatron.core.dist_checkpointing "
                                    "cannot save without it (pip install psutil); the "
                                    "checkpoint checks were skipped")
            types_ = []
        for run in RUNS:
            checkpoints = {}
            if RUNS[run] is not None:
                checkpoints = {t: shared_dir(root, "%s-%s" % (run, t), rank) for t in types_}
            try:
                info, saved = run_training(args, run, rank, device, checkpoints)
            except Exception as e:  # record and go on: one shot on the GPU
                result["errors"].append("%s: %s" % (run, traceback.format_exc()))
                if rank == 0:
                    print("run %s failed: %s" % (run, repr(e)[:300]), flush=True)
                continue
            result["runs"][run] = info
            for t, path in checkpoints.items():
                key = "%s/%s" % (run, t)
                try:
                    result["resume"][key] = run_resume(args, run, rank, device, t, path,
                                                       saved, info["losses"])
                except Exception as e:
                    result["errors"].append("%s: %s" % (key, traceback.format_exc()))
                    result["resume"][key] = {"ok": False, "error": repr(e)}
                    if rank == 0:
                        print("resume %s failed: %s" % (key, repr(e)[:300]), flush=True)
        runs = result["runs"]
        checks = result["checks"]
        if "megatron" in runs:
            base = runs["megatron"]["losses"]
            for run, tol in (("tandem-off0", args.loss_rtol), ("tandem-off1", args.loss_rtol),
                             ("tandem-q8", args.q8_loss_rtol)):
                if run in runs:
                    d = rel_diff(runs[run]["losses"], base)
                    checks["%s_vs_megatron" % run] = {"max_rel_loss_diff": d, "rtol": tol,
                                                      "ok": d <= tol}
        if "tandem-off0" in runs and "tandem-off1" in runs:
            a, b = runs["tandem-off0"]["losses"], runs["tandem-off1"]["losses"]
            checks["off0_vs_off1"] = {"identical": a == b, "max_rel_loss_diff": rel_diff(a, b),
                                      "ok": rel_diff(a, b) <= 1e-3}
        for run in RUNS:
            if run not in runs:
                checks["%s_ran" % run] = {"ok": False}
            else:  # information only: a short run on random tokens is noisy
                losses = runs[run]["losses"]
                runs[run]["loss_fell"] = (statistics.mean(losses[-3:]) <
                                          statistics.mean(losses[:3]))
        for key, r in result["resume"].items():
            checks["resume " + key] = {"ok": r.get("ok", False)}
        result["ok"] = bool(checks) and all(c["ok"] for c in checks.values()) and \
            not result["errors"]
    except Exception:
        result["errors"].append(traceback.format_exc())
        result["ok"] = False
    try:  # every rank checked its own shards: all must pass
        import torch.distributed as dist
        flag = torch.tensor([1 if result["ok"] else 0], device=device)
        dist.all_reduce(flag, op=dist.ReduceOp.MIN)
        result["all_ranks_ok"] = bool(flag.item())
        result["ok"] = result["ok"] and result["all_ranks_ok"]
    except Exception:
        result["errors"].append(traceback.format_exc())
        result["ok"] = False
    if rank == 0:
        print_table(args, result)
        with open(args.out, "w") as f:
            json.dump(result, f, indent=1)
        print("wrote %s; %s" % (args.out, "ALL CHECKS PASSED" if result["ok"] else
                                "SOME CHECKS FAILED"), flush=True)
    return 0 if result["ok"] else 1


def print_table(args, result):
    runs = result["runs"]
    names = [r for r in RUNS if r in runs]
    print("\n%s, world size %d, torch %s, megatron.core %s" % (
        result["device"], result["world_size"], result["versions"]["torch"],
        result["versions"]["megatron.core"]))
    print("%-6s" % "step" + "".join("%14s" % n for n in names))
    for s in range(args.steps):
        print("%-6d" % s + "".join("%14.6f" % runs[n]["losses"][s] for n in names))
    print("%-6s" % "ms" + "".join(
        "%14s" % ("%.1f" % runs[n]["step_ms_median"] if runs[n]["step_ms_median"] else "-")
        for n in names))
    print("%-6s" % "GiB" + "".join(
        "%14.3f" % (runs[n]["gpu_allocated_bytes"] / 2**30) for n in names)
        + "   (GPU memory allocated after training)")
    for name, c in result["checks"].items():
        extra = ", ".join("%s=%s" % (k, ("%.3g" % v) if isinstance(v, float) else v)
                          for k, v in c.items() if k != "ok")
        print("  %-44s %s  %s" % (name, "ok " if c["ok"] else "FAIL", extra))
    for key, r in result["resume"].items():
        if "error" not in r:
            print("  resume %-37s state_equal=%s max_state_diff=%.3g loss_diff=%.3g" % (
                key, r["state_equal"], r["state_max_abs_diff"], r["max_rel_loss_diff"]))
    for e in result["errors"]:
        print("ERROR:", e.strip().splitlines()[-1][:300])


def dry_run(args, rank):
    """CPU: the model builds and runs forward/backward; tandem.megatron imports and
    accepts the optimizer config; Megatron refuses nothing before DDP."""
    import tandem.megatron
    from megatron.core import utils

    def cpu_buffer(self, tensor_shape, dtype, name, mem_alloc_context=None):
        return torch.empty(tuple(tensor_shape), dtype=dtype)  # no CUDA here

    utils.GlobalMemoryBuffer.get_tensor = cpu_buffer
    import contextlib
    from megatron.core.tensor_parallel import random as tp_random
    tracker = tp_random.get_cuda_rng_tracker()
    tracker.fork = lambda *a, **k: contextlib.nullcontext()  # CUDA RNG states
    model = build_model(args, args.seed, dry_run=True)
    n = sum(p.numel() for p in model.parameters())
    inputs, position_ids, mask, labels = batch(args, 0, rank, torch.device("cpu"))
    loss = model(inputs, position_ids, mask, labels=labels).float().mean()
    loss.backward()
    dtypes = sorted({str(p.dtype) for p in model.parameters()})
    tandem.megatron._refuse(optimizer_config(args),
                            [type("Chunk", (), {"ddp_config": type("C", (), {
                                "use_megatron_fsdp": False,
                                "use_distributed_optimizer": True})()})()])
    print("dry run: %d parameters (%s), loss %.4f, gradients %s; tandem.megatron ok"
          % (n, ", ".join(dtypes), float(loss),
             all(p.grad is not None for p in model.parameters())))
    return 0


if __name__ == "__main__":
    arguments = parse_args()
    try:
        code = main(arguments)
    except Exception:
        traceback.print_exc()
        code = 2
    try:
        import torch.distributed as dist
        if dist.is_initialized():
            dist.destroy_process_group()
    except Exception:
        pass
    sys.exit(code)
