"""A Megatron-Core GPT with Megatron-FSDP, trained by Megatron's optimizers and by
tandem.megatron_fsdp: the worker of the CPU tests (tests/python_mfsdp, gloo) and of the
GPU proof (bench/megatron_fsdp_proof.sh, NCCL). Run it under torchrun.

Each ``--train NAME,KIND[,key=value...]`` trains the same model (the same seed) for
``--steps`` steps in this process, one run after the other:

  KIND      megatron   Megatron's own inner optimizer (TE FusedAdam, apex, or its torch
                       AdamW fallback), Megatron-FSDP's fp32 main weights
            hdo        Megatron's HybridDeviceOptimizer (optimizer_cpu_offload, GPUs only)
            tandem     tandem.megatron.get_megatron_optimizer (MegatronFSDPAdam inside)
  fraction=F           offload fraction (tandem, hdo)
  compute=C            tandem's offload_compute (host, gpu, auto, or a share)
  formats=M/m/v        tandem's master/momentum/variance formats (default f32/f32/f32)
  main=bf16            Megatron-FSDP's main weights in bf16
                       (ddp_config.megatron_fsdp_main_params_dtype)
  main_grads=bf16      its main gradients in bf16 (default fp32: grad_reduce_in_fp32 with
                       megatron-core 0.16.1, megatron_fsdp_main_grads_dtype with 0.19.2)
  decoupled=1          gradients as param.decoupled_grad (megatron_fsdp_use_decoupled_grad,
                       which Megatron-LM sets with --use-precision-aware-optimizer)
                       main, main_grads=bf16 and decoupled need megatron-core 0.19.2's
                       DistributedDataParallelConfig fields (not in 0.16.1)
  grads=seeded         replace every gradient after Megatron-FSDP's reduce-scatter by one
                       drawn from (seed, step, parameter name): the same values at every
                       number of ranks, so that runs at different world sizes compare bit
                       for bit (with clip=0: Megatron's norm sums in a world-size order)
  clip=C               Megatron's clip_grad (default --clip)
  save=K               after K steps, save an fsdp_dtensor checkpoint into
                       --ckpt-root/NAME the way Megatron-LM does
  save_what=model      save the model weights only (--no-save-optim)
  load=DIR             before training, load the checkpoint in DIR the way Megatron-LM
                       does (its dummy-step and state checks recorded), then train from
                       its iteration to --steps
  model_only=1         with load: after one step, load the model weights only (the
                       optimizer's state stays) and call reload_model_params(), as
                       Megatron-LM's --no-load-optim does
  expect_error=1       the run must fail (a refused load): its error is recorded, and
                       the worker's exit status counts it as success

Rank 0 writes --out/result.json (per run: losses, grad norms, steps applied, step time,
GPU memory, the engine's memory report, the state keys of every rank, the load checks)
and --out/NAME.pt (the full parameters after training, and the full optimizer state
arrays at save and after load). Exits 0 when every run ran (the checks across runs are
the caller's), 1 when one failed, with the traceback in result.json.
"""

import argparse
import faulthandler
import gc
import json
import math
import os
import signal
import statistics
import sys
import time
import traceback
import warnings
import weakref
import zlib

os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")  # deterministic cuBLAS

import torch  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--device", choices=("cpu", "cuda"), default="cuda")
    p.add_argument("--train", action="append", default=[], help="NAME,KIND[,key=value...]")
    p.add_argument("--out", required=True, help="output directory")
    p.add_argument("--ckpt-root", default=None, help="checkpoint directory (default --out)")
    p.add_argument("--steps", type=int, default=6)
    p.add_argument("--layers", type=int, default=2)
    p.add_argument("--hidden", type=int, default=64)
    p.add_argument("--heads", type=int, default=4)
    p.add_argument("--ffn", type=int, default=96, help="MLP hidden size (SwiGLU: 2x rows)")
    p.add_argument("--vocab", type=int, default=128)
    p.add_argument("--seq", type=int, default=16)
    p.add_argument("--micro-batch", type=int, default=2)
    p.add_argument("--lr", type=float, default=3e-3)
    p.add_argument("--clip", type=float, default=1.0)
    p.add_argument("--seed", type=int, default=1234)
    p.add_argument("--bf16", type=int, default=1, help="bf16 model weights (Float16Module)")
    p.add_argument("--swiglu", type=int, default=1,
                   help="gated MLP (Megatron-LM's --swiglu: its checkpoints split linear_fc1)")
    args = p.parse_args(argv)
    args.runs = [parse_run(r) for r in args.train]
    if not args.runs:
        p.error("give at least one --train")
    return args


KINDS = ("megatron", "hdo", "tandem")


def parse_run(text):
    name, kind, *rest = text.split(",")
    if kind not in KINDS:
        raise SystemExit("--train %s: kind must be one of %s" % (text, ", ".join(KINDS)))
    run = {"name": name, "kind": kind}
    for item in rest:
        key, _, value = item.partition("=")
        run[key] = value
    return run


# ----------------------------------------------------------------------------------------
# Setup


def init(args):
    import datetime
    import torch.distributed as dist
    if args.device == "cpu":
        sys.path.insert(0, HERE)
        import mfsdp_cpu
        mfsdp_cpu.redirect()
        dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=300))
    else:
        local_rank = int(os.environ.get("LOCAL_RANK", "0"))
        torch.cuda.set_device(local_rank)
        dist.init_process_group("nccl", device_id=torch.device("cuda", local_rank))
    from megatron.core import parallel_state
    parallel_state.initialize_model_parallel(1, 1)
    if args.device == "cpu":
        mfsdp_cpu.patch_megatron()
    return dist.get_rank(), dist.get_world_size()


def device(args):
    return torch.device("cpu") if args.device == "cpu" else torch.device(
        "cuda", torch.cuda.current_device())


def build_model(args, seed, run):
    """GPTModel (local spec, SwiGLU MLP) in bf16 (Float16Module), wrapped in Megatron-FSDP
    (optim_grads_params; main weights and gradients as `run` says); the same seed gives
    the same weights at every world size."""
    from megatron.core.distributed import DistributedDataParallelConfig
    from megatron.core.distributed.fsdp.mcore_fsdp_adapter import FullyShardedDataParallel
    from megatron.core.models.gpt.gpt_layer_specs import get_gpt_layer_local_spec
    from megatron.core.models.gpt.gpt_model import GPTModel
    from megatron.core.transformer.module import Float16Module
    from megatron.core.transformer.transformer_config import TransformerConfig
    torch.manual_seed(seed)
    if args.device == "cuda":
        from megatron.core.tensor_parallel.random import model_parallel_cuda_manual_seed
        model_parallel_cuda_manual_seed(seed)
    dtype = torch.bfloat16 if args.bf16 else torch.float32
    config = TransformerConfig(
        num_layers=args.layers, hidden_size=args.hidden, num_attention_heads=args.heads,
        ffn_hidden_size=args.ffn, use_cpu_initialization=True, bf16=bool(args.bf16),
        params_dtype=dtype, pipeline_dtype=dtype, hidden_dropout=0.0, attention_dropout=0.0,
        gated_linear_unit=bool(args.swiglu),
        activation_func=torch.nn.functional.silu if args.swiglu else torch.nn.functional.gelu,
        init_method_std=0.02)
    model = GPTModel(config=config, transformer_layer_spec=get_gpt_layer_local_spec(),
                     vocab_size=args.vocab, max_sequence_length=args.seq)
    if args.device == "cuda":
        model.cuda(torch.cuda.current_device())
    if args.bf16:
        model = Float16Module(config, model)
    ddp = dict(use_megatron_fsdp=True, use_distributed_optimizer=True,
               data_parallel_sharding_strategy="optim_grads_params",
               overlap_grad_reduce=True, overlap_param_gather=True, **precision(run))
    if args.device == "cpu":
        import mfsdp_cpu
        ddp.update(mfsdp_cpu.GLOO_DDP_CONFIG)
    return FullyShardedDataParallel(config=config,
                                    ddp_config=DistributedDataParallelConfig(**ddp),
                                    module=model, device=device(args))


def precision(run):
    """The DistributedDataParallelConfig fields of `run`'s main weights and gradients
    (module docstring: main, main_grads, decoupled). Megatron-FSDP's dtypes moved from
    grad_reduce_in_fp32 (megatron-core 0.16.1: fp32 main weights always) to
    megatron_fsdp_main_params_dtype / _main_grads_dtype / _use_decoupled_grad (0.19.2,
    where grad_reduce_in_fp32 no longer reaches Megatron-FSDP: its main gradients would
    be bf16)."""
    from megatron.core.distributed import DistributedDataParallelConfig
    fields = DistributedDataParallelConfig.__dataclass_fields__
    grads = {"f32": torch.float32, "bf16": torch.bfloat16}[run.get("main_grads", "f32")]
    if "megatron_fsdp_main_grads_dtype" not in fields:
        asked = [k for k in ("main", "main_grads", "decoupled") if k in run]
        if asked:
            raise ValueError("--train %s: %s need a megatron-core whose "
                             "DistributedDataParallelConfig has megatron_fsdp_main_grads_dtype "
                             "(0.19.2 has, 0.16.1 has not)" % (run["name"], ", ".join(asked)))
        return dict(grad_reduce_in_fp32=True)
    main = {"f32": torch.float32, "bf16": torch.bfloat16}[run.get("main", "f32")]
    return dict(megatron_fsdp_main_params_dtype=main, megatron_fsdp_main_grads_dtype=grads,
                megatron_fsdp_use_decoupled_grad=run.get("decoupled") == "1")


def optimizer_config(args, run):
    from megatron.core.optimizer import OptimizerConfig
    kw = dict(optimizer="adam", lr=args.lr, min_lr=args.lr / 10, weight_decay=0.1,
              adam_beta1=0.9, adam_beta2=0.95, adam_eps=1e-8,
              clip_grad=float(run.get("clip", args.clip)), bf16=bool(args.bf16),
              use_distributed_optimizer=True)
    if run["kind"] == "hdo":
        kw.update(optimizer_cpu_offload=True,
                  optimizer_offload_fraction=float(run.get("fraction", 1.0)))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return OptimizerConfig(**kw)


def tandem_options(run):
    master, momentum, variance = run.get("formats", "f32/f32/f32").split("/")
    options = dict(offload_fraction=float(run.get("fraction", 0.0)), master_format=master,
                   momentum_format=momentum, variance_format=variance)
    if "compute" in run:
        compute = run["compute"]
        try:
            compute = float(compute)
        except ValueError:
            pass
        options["offload_compute"] = compute
    return options


def build_optimizer(args, model, run):
    from megatron.core.optimizer_param_scheduler import OptimizerParamScheduler
    config = optimizer_config(args, run)
    if run["kind"] == "tandem":
        import tandem.megatron
        opt = tandem.megatron.get_megatron_optimizer(config, [model], **tandem_options(run))
    else:
        from megatron.core.optimizer import get_megatron_optimizer
        opt = get_megatron_optimizer(config, [model])
    sched = OptimizerParamScheduler(
        opt, init_lr=0.0, max_lr=args.lr, min_lr=args.lr / 10, lr_warmup_steps=2,
        lr_decay_steps=args.steps, lr_decay_style="cosine", start_wd=0.05, end_wd=0.1,
        wd_incr_steps=args.steps, wd_incr_style="linear")
    return opt, sched


def inner_of(opt):
    parts = getattr(opt, "chained_optimizers", None) or [opt]
    return [o.optimizer for o in parts]


# ----------------------------------------------------------------------------------------
# Steps


def batch(args, step, rank, dev):
    g = torch.Generator().manual_seed(args.seed * 7919 + step * 131 + rank)
    tokens = torch.randint(0, args.vocab, (args.micro_batch, args.seq + 1), generator=g)
    tokens[:, 2::2] = tokens[:, 1:-1:2]  # a learnable pattern
    inputs, labels = tokens[:, :-1].contiguous(), tokens[:, 1:].contiguous()
    position_ids = torch.arange(args.seq).unsqueeze(0).expand(args.micro_batch, -1)
    mask = torch.triu(torch.ones(args.seq, args.seq, dtype=torch.bool), diagonal=1)
    return [t.to(dev) for t in (inputs, position_ids, mask.view(1, 1, args.seq, args.seq),
                                labels)]


def first_row(p):
    """The first global row of p's local shard (Megatron-FSDP's megatron_fsdp_slice)."""
    where = getattr(p, "megatron_fsdp_slice", None)
    if where is None:
        return 0
    return where.start // math.prod(p.shape[1:])


def seeded_grads(args, opt, step):
    """Note in the module docstring: grads=seeded."""
    for o in (getattr(opt, "chained_optimizers", None) or [opt]):
        for group in o.optimizer.param_groups:
            for p in group["params"]:
                grad = getattr(p, "decoupled_grad", None)
                if grad is None:
                    grad = p.grad
                if grad is None:
                    continue
                name = o._param_name(p)
                g = torch.Generator().manual_seed(
                    args.seed + 1000003 * step + zlib.crc32(name.encode()))
                full = torch.randn(tuple(p.shape), generator=g) * 1e-2
                mine = grad._local_tensor if hasattr(grad, "_local_tensor") else grad
                start = first_row(p)
                mine.copy_(full[start:start + mine.shape[0]].to(mine.dtype).view(mine.shape))


def train_step(args, model, opt, sched, step, rank, run):
    import torch.distributed as dist
    inputs, position_ids, mask, labels = batch(args, step, rank, device(args))
    model.zero_grad_buffer()
    opt.zero_grad()
    loss = model(inputs, position_ids, mask, labels=labels).float().mean()
    loss.backward()
    model.finish_grad_sync()
    if run.get("grads") == "seeded":
        seeded_grads(args, opt, step)
    ok, grad_norm, _ = opt.step()
    sched.step(1)
    reported = loss.detach().clone()
    dist.all_reduce(reported)
    reported /= dist.get_world_size()
    return float(reported), None if grad_norm is None else float(grad_norm), bool(ok)


def synchronize(args):
    if args.device == "cuda":
        torch.cuda.synchronize()


# ----------------------------------------------------------------------------------------
# Gathering uneven shards on rank 0 (never DTensor.full_tensor(): it assumes torch.chunk's
# shard sizes and hangs on Megatron-FSDP's)


def gather_rows(pieces):
    """[(first_row, local tensor)] of every rank -> the full tensor, on rank 0."""
    import torch.distributed as dist
    every = [None] * dist.get_world_size()
    dist.all_gather_object(every, [(r, t.detach().cpu()) for r, t in pieces])
    if dist.get_rank() != 0:
        return None
    out = []
    for k in range(len(pieces)):
        parts = sorted((rank_pieces[k] for rank_pieces in every), key=lambda x: x[0])
        if parts[0][1].dim() == 0:  # a replicated scalar ("step")
            out.append(parts[0][1])
            continue
        out.append(torch.cat([t for _, t in parts if t.numel()] or [parts[0][1]]))
    return out


def full_params(opt):
    """{name: full main weight} on rank 0."""
    names, pieces = [], []
    for o in (getattr(opt, "chained_optimizers", None) or [opt]):
        for group in o.optimizer.param_groups:
            for p in group["params"]:
                names.append(o._param_name(p))
                pieces.append((first_row(p), p._local_tensor))
    full = gather_rows(pieces)
    return None if full is None else dict(zip(names, full))


def full_state(fsdp_state):
    """{name.array: full tensor} of an fsdp_dtensor "state" on rank 0 (SwiGLU halves as
    they are), from the chunk each array carries."""
    keys, pieces = [], []
    for name in sorted(fsdp_state):
        for array, value in sorted(fsdp_state[name].items()):
            if hasattr(value, "_local_tensor"):
                chunk = value._local_tensor.__create_chunk_list__()[0]
                row = chunk.offsets[0] if len(chunk.offsets) else 0
                pieces.append((row, value._local_tensor))
            else:
                pieces.append((0, value))
            keys.append("%s.%s" % (name, array))
    full = gather_rows(pieces)
    return None if full is None else dict(zip(keys, full))


def every_rank(value):
    import torch.distributed as dist
    out = [None] * dist.get_world_size()
    dist.all_gather_object(out, value)
    return out


# ----------------------------------------------------------------------------------------
# Checkpoints, as Megatron-LM's training/checkpointing.py does for ckpt_format=fsdp_dtensor


FSDP_DTENSOR = {"distrib_optim_sharding_type": "fsdp_dtensor"}


def preprocess(model, state):
    """Megatron-LM's preprocess_fsdp_dtensor_state_dict: the SwiGLU split (args.swiglu),
    then the uneven-DTensor metadata (one collective per DTensor, in key order)."""
    state = dict(state)
    if model.config.gated_linear_unit:
        state = split_swiglu(model, state)
    from megatron.core.distributed.fsdp.src.megatron_fsdp.uneven_dtensor import (
        preprocess_state_dict_for_uneven_dtensor)
    preprocess_state_dict_for_uneven_dtensor(state)
    return state


def split_swiglu(model, state):
    from megatron.core.transformer.fsdp_dtensor_checkpoint import handle_swiglu_in_state_dict
    # The MegatronFSDP module: its state dict's keys and its optimizer's parameter names
    # (less their first "module.") both resolve from it.
    out = handle_swiglu_in_state_dict(model.module, state["model"], state.get("optimizer"))
    if out is not None:  # megatron-core >= 0.16 returns new dicts; 0.15 splits in place
        state["model"] = out[0]
        if "optimizer" in state:
            state["optimizer"] = out[1]
    return state


def save_checkpoint(path, model, opt, sched, iteration, model_only=False):
    import torch.distributed.checkpoint as dcp
    state = {"model": model.state_dict_for_save_checkpoint(), "iteration": iteration}
    if not model_only:
        state["optimizer"] = opt.sharded_state_dict({}, is_loading=False,
                                                    metadata=FSDP_DTENSOR)
        state["opt_param_scheduler"] = sched.state_dict()
    keys = sorted(flat_keys(state.get("optimizer", {})))
    dcp.save(preprocess(model, state), checkpoint_id=path)
    return state.get("optimizer"), keys


def flat_keys(d, prefix=""):
    out = []
    for k, v in d.items():
        if isinstance(v, dict):
            out += flat_keys(v, "%s%s." % (prefix, k))
        else:
            out.append("%s%s" % (prefix, k))
    return out


def load_checkpoint(path, model, opt, sched, model_only=False):
    """Returns (iteration, the optimizer's raw state dict after the load, checks)."""
    import torch.distributed.checkpoint as dcp
    from torch.distributed.checkpoint.default_planner import DefaultLoadPlanner
    checks = {}
    state = {"model": model.state_dict_for_save_checkpoint(), "iteration": 0}
    if not model_only:
        before = snapshot_for_dummy_step(opt)
        state["optimizer"] = opt.sharded_state_dict({}, is_loading=True, metadata=FSDP_DTENSOR)
        state["opt_param_scheduler"] = sched.state_dict()
        checks["dummy_step_changed_nothing"] = snapshot_for_dummy_step(opt) == before
    raw = {k: (v.copy() if isinstance(v, dict) else v) for k, v in state.items()}
    state = preprocess(model, state)
    dcp.load(state, checkpoint_id=path, planner=DefaultLoadPlanner(allow_partial_load=True))
    for k in ("model", "optimizer"):
        if k in raw:
            state[k] = raw[k]
    model.load_state_dict(state["model"], strict=False)
    if not model_only:
        opt.load_state_dict(state["optimizer"])
        sched.load_state_dict(state["opt_param_scheduler"])
    else:
        opt.reload_model_params()  # Megatron-LM's --no-load-optim does
    return int(state["iteration"]), raw.get("optimizer"), checks


def snapshot_for_dummy_step(opt):
    """Every main-weight shard's CRC and step count (0 before tandem's engine exists), as
    a comparable value."""
    out = []
    for inner in inner_of(opt):
        params = [p for group in inner.param_groups for p in group["params"]]
        core = getattr(inner, "_core", None)
        steps = core.tensor_step_counts() if core is not None else [0] * len(params)
        for p, step in zip(params, steps):
            mine = p._local_tensor.detach().cpu().contiguous()
            out.append((zlib.crc32(mine.view(torch.uint8).numpy().tobytes()), step))
    return out


# ----------------------------------------------------------------------------------------
# One run


def run_one(args, run, rank, record, tensors):
    gc.collect()
    if args.device == "cuda":
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats()
    seed = args.seed + (1 if "load" in run else 0)  # a loaded run starts from other weights
    model = build_model(args, seed, run)
    opt, sched = build_optimizer(args, model, run)
    full_params(opt)  # names every parameter while the model holds the optimizer's
    losses, norms, applied, times = [], [], [], []
    first = 0
    if "load" in run and not run.get("model_only"):
        first, raw, checks = load_checkpoint(run["load"], model, opt, sched)
        record["load_checks"] = checks
        tensors["loaded_state"] = full_state(raw["state"])
    save_at = int(run["save"]) if "save" in run else None
    for step in range(first, args.steps):
        synchronize(args)
        t0 = time.perf_counter()
        loss, norm, ok = train_step(args, model, opt, sched, step, rank, run)
        synchronize(args)
        times.append((time.perf_counter() - t0) * 1e3)
        losses.append(loss)
        norms.append(norm)
        applied.append(ok)
        if step + 1 == save_at:
            path = os.path.join(args.ckpt_root or args.out, run["name"])
            saved, keys = save_checkpoint(path, model, opt, sched, save_at,
                                          model_only=run.get("save_what") == "model")
            record["checkpoint"] = path
            record["state_keys_identical"] = len(set(map(tuple, every_rank(keys)))) == 1
            record["state_keys"] = len(keys)
            if saved is not None:
                tensors["saved_state"] = full_state(saved["state"])
            tensors["params_at_save"] = full_params(opt)
        if run.get("model_only") and step == first:
            # One step with this run's own weights, then the model weights of the
            # checkpoint: the engine must pick them up (its masters re-read).
            load_checkpoint(run["load"], model, opt, sched, model_only=True)
            record["model_only_masters_equal_params"] = masters_equal_params(opt)
            tensors["params_after_model_load"] = full_params(opt)
    record.update(first_step=first, losses=losses, grad_norms=norms, applied=applied,
                  step_ms_median=statistics.median(times[1:]) if len(times) > 1 else None)
    if args.device == "cuda":
        record["gpu_allocated_bytes"] = torch.cuda.memory_allocated()
        record["gpu_peak_bytes"] = torch.cuda.max_memory_allocated()
    inner = inner_of(opt)
    record["inner_optimizer"] = "%s.%s" % (type(inner[0]).__module__, type(inner[0]).__name__)
    if run["kind"] == "tandem":
        mem = inner[0].memory()
        record["engine_mode"] = inner[0].mode
        record["engine_memory"] = {"device_total": mem["device"]["total"],
                                   "host_total": mem["host"]["total"],
                                   "master": mem["device"]["master"] + mem["host"]["master"],
                                   "correction": mem["device"]["correction"]
                                   + mem["host"]["correction"]}
        record["skipped_steps"] = sum(o.skipped_steps for o in inner)
        record["engine_rebuilds"] = sum(o.rebuilds for o in inner)
        # Every rank's split of its shard's elements (engine.placement(): total,
        # offloaded, target), for the exact-fraction check.
        record["placements"] = every_rank([{k: v for k, v in o._core.engine.placement().items()
                                            if k in ("total", "offloaded", "target")}
                                           for o in inner])
    tensors["params"] = full_params(opt)
    finish_run(model)
    del model, opt, sched
    gc.collect()


def masters_equal_params(opt):
    """Every tandem master (decoded) equals its main weight, on every rank."""
    ok = True
    for inner in inner_of(opt):
        for group in inner.param_groups:
            for p in group["params"]:
                master = inner.get_unscaled_state(p, "master_param")
                ok &= torch.equal(master._local_tensor.cpu(), p._local_tensor.float().cpu())
    return all(every_rank(bool(ok)))


def main():
    args = parse_args()
    faulthandler.register(signal.SIGUSR1, all_threads=True)  # kill -USR1: stacks
    faulthandler.enable(all_threads=True)  # a crash (SIGSEGV, abort) prints every stack
    rank, world = init(args)
    os.makedirs(args.out, exist_ok=True)
    from torch.distributed.tensor import DTensor

    def no_full_tensor(self, *a, **k):
        raise AssertionError("DTensor.full_tensor() called on a Megatron-FSDP shard: it "
                             "assumes torch.chunk's sizes and hangs on uneven shards")

    DTensor.full_tensor = no_full_tensor  # the guard: nothing in these runs may call it
    import megatron.core
    result = {"argv": sys.argv, "world_size": world, "device": args.device,
              "versions": {"torch": torch.__version__,
                           "megatron.core": getattr(megatron.core, "__version__", "?")},
              "runs": {}, "errors": []}
    if args.device == "cuda":
        result["gpu"] = torch.cuda.get_device_name()
    return run_all(args, rank, result, lambda run, record, tensors: run_one(
        args, run, rank, record, tensors))


# Note [Dropping a Megatron-FSDP model]: MegatronFSDP keeps its hook handles in dicts
# (forward_pre_hooks, forward_hooks, backward_pre_hooks, grad_acc_hooks); the
# post-accumulate-grad hooks live in autograd's C++ nodes of the parameters and capture
# the module, a cycle Python's gc cannot see, so a model dropped with its hooks in place
# stays allocated (on GPUs every earlier run's model stayed in memory). megatron-fsdp's v2
# (experimental fully_shard) registers the same kind of hook on each unsharded parameter
# without keeping the handle. finish_run removes both; each run records how many
# parameters of earlier runs are still alive. Before the hooks go, the module's collectives
# still in flight (the parameter all-gathers it starts after each step for the next
# forward, a gradient reduce-scatter) are waited for: once the model is freed, an
# all-gather still writing into its buckets would write into freed memory (on CPUs gloo's
# threads do, and the next run aborts in malloc).
_FINISHED = []  # weak references to a few parameters of each finished run


def finish_run(model):
    _FINISHED.extend(weakref.ref(p) for p in list(model.parameters())[:3])
    for m in model.modules():
        for group in getattr(m, "_parameter_groups", None) or []:  # a v2 FsdpModule
            for p in getattr(group, "unsharded_parameters", None) or []:
                if getattr(p, "_post_accumulate_grad_hooks", None):
                    p._post_accumulate_grad_hooks.clear()  # what each handle's remove() does
        hooks = [getattr(m, a, None) for a in ("forward_pre_hooks", "forward_hooks",
                                                "backward_pre_hooks", "grad_acc_hooks")]
        if not isinstance(hooks[-1], dict):  # not a MegatronFSDP
            continue
        reduce = getattr(m, "grad_reduce_pipeline", None)
        if reduce is not None:
            reduce.wait_for_previous_grad_reduce(0)
        gather = getattr(m, "all_gather_pipeline", None)
        if gather is not None:
            with warnings.catch_warnings():  # "There are still pending all-gather tasks"
                warnings.simplefilter("ignore")
                gather.reset()  # waits for every pending all-gather, then frees the buckets
        for table in hooks:
            for handle in (table or {}).values():
                if hasattr(handle, "remove"):
                    handle.remove()
            if table:
                table.clear()


def earlier_runs_alive():
    gc.collect()
    return sum(r() is not None for r in _FINISHED)


def run_all(args, rank, result, run_one):
    """Runs every --train run (run_one(run, record, tensors)) into result["runs"], rank
    0 saving each run's tensors; a run's error is recorded (a failure unless the run has
    expect_error=1). Writes result.json on rank 0; returns the exit status (module
    docstring). The standalone worker's main loop too."""
    for run in args.runs:
        record, tensors = {"spec": run, "earlier_runs_alive": earlier_runs_alive()}, {}
        try:
            run_one(run, record, tensors)
            if run.get("expect_error"):
                result["errors"].append("%s: ran, but was expected to fail" % run["name"])
        except Exception:
            record["error"] = traceback.format_exc()
            if not run.get("expect_error"):
                result["errors"].append("%s: %s" % (run["name"], record["error"]))
                if rank == 0:
                    print("run %s failed:\n%s" % (run["name"], record["error"]), flush=True)
        result["runs"][run["name"]] = record
        if rank == 0:
            torch.save(tensors, os.path.join(args.out, run["name"] + ".pt"))
    errors = every_rank(len(result["errors"]))
    if rank == 0:
        with open(os.path.join(args.out, "result.json"), "w") as f:
            json.dump(result, f, indent=1)
    return 0 if not any(errors) else 1


def exit_with(code):
    """Leaves the process group and exits with `code`, without Python's finalization.

    gloo's worker threads drop each finished collective after its caller has returned,
    which releases Python objects (all_gather_object's tensors) and so takes the GIL. A
    process that exits right after its last collective (every rank but 0, which writes
    the results) can reach Py_Finalize first; the worker thread then exits inside a
    noexcept destructor and the process aborts ("terminate called without an active
    exception") after its work is done. os._exit skips finalization; everything this
    worker writes is closed by then."""
    import torch.distributed as dist
    if dist.is_initialized():
        dist.destroy_process_group()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


if __name__ == "__main__":
    exit_with(main())
