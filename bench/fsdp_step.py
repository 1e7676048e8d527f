"""One FSDP2 training iteration (forward, backward, optimizer step) on Llama-3-8B shapes:
Tandem at full offload against FSDP2 without offload and FSDP2 with CPUOffloadPolicy,
each in its own process, in one run (docs/benchmarks.md, "FSDP2 iteration").

    python3 bench/fsdp_step.py --layers 16 --json bench/results/fsdp_step_h200.json
    python3 bench/fsdp_step.py --layers 32 --nproc 2 --json bench/results/fsdp_step_h200x2.json

--nproc N runs each mode on N local GPUs (world size N, rank r on cuda:r); the GPU peak
is the largest rank's, the times rank 0's (FSDP2 keeps the ranks in step).

Modes (each a fresh `torchrun --nproc_per_node N` job, so GPU peaks do not mix):
  none         fp32 sharded parameters, bf16 compute (MixedPrecisionPolicy), torch's fused
               AdamW on the GPU: FSDP2 as most people run it.
  cpu_offload  the same with offload_policy=CPUOffloadPolicy(): parameters, gradients and
               torch's AdamW state on the host.
  tandem       bf16 sharded parameters, tandem.torch.AdamW with --state formats
               (master/m/v, default bf16+ecc8/q8/q8; f32/f32/f32 for fp32 state) at --fraction (default 1: all optimizer state in pinned host memory), its
               host-resident state computed where --offload-compute says (default auto).
Targets (issue): tandem >= 10x faster than cpu_offload, within 2.5x of none, GPU peak
<= 45% of none's. The table prints each figure against its target.

--activation-checkpointing (default off) wraps every transformer block in torch's
CheckpointWrapper (non-reentrant torch.utils.checkpoint) before fully_shard, as
torchtitan's "full" activation checkpointing does, in every mode alike: each block keeps
only its input for the backward and recomputes its forward there. The header and each
mode's JSON say whether it was on.
"""

import argparse
import functools
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "examples"))
from bench_args import command_line, git_commit, utc_now  # noqa: E402

LLAMA3_8B = dict(vocab=128256, dim=4096, heads=32, kv_heads=8, hidden=14336)


def checkpoint_blocks(model):
    """Full activation checkpointing: every block of `model.layers` (fsdp_train.Block)
    replaced by torch's CheckpointWrapper around it (non-reentrant checkpoint; no RNG state
    kept, the blocks draw no random numbers). Call before fully_shard, so that each
    block's FSDP unit is its wrapper (torchtitan's order)."""
    from torch.distributed.algorithms._checkpoint.checkpoint_wrapper import (
        CheckpointImpl, apply_activation_checkpointing, checkpoint_wrapper)
    from fsdp_train import Block

    wrap = functools.partial(checkpoint_wrapper, checkpoint_impl=CheckpointImpl.NO_REENTRANT,
                             preserve_rng_state=False)
    apply_activation_checkpointing(model, checkpoint_wrapper_fn=wrap,
                                   check_fn=lambda m: isinstance(m, Block))


def shard(model, mesh, mode, activation_checkpointing):
    """FSDP2 as `mode` runs it: one fully_shard per block, then the root; with
    `activation_checkpointing`, every block checkpointed first (the same in every mode)."""
    import torch
    from torch.distributed.fsdp import CPUOffloadPolicy, MixedPrecisionPolicy, fully_shard

    if activation_checkpointing:
        checkpoint_blocks(model)
    kwargs = {"mesh": mesh}
    if mode != "tandem":
        kwargs["mp_policy"] = MixedPrecisionPolicy(param_dtype=torch.bfloat16,
                                                   reduce_dtype=torch.float32)
    if mode == "cpu_offload":
        kwargs["offload_policy"] = CPUOffloadPolicy()
    for layer in model.layers:
        fully_shard(layer, **kwargs)
    fully_shard(model, **kwargs)
    return model


def child(args):
    import torch
    import torch.distributed as dist
    import torch.nn.functional as F
    from torch.distributed.device_mesh import init_device_mesh
    from fsdp_train import Llama

    dist.init_process_group("nccl")
    torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", "0")))
    mesh = init_device_mesh("cuda", (dist.get_world_size(),))
    dtype = torch.bfloat16 if args.mode == "tandem" else torch.float32
    with torch.device("meta"):
        model = Llama(layers=args.layers, **LLAMA3_8B).to(dtype)
    shard(model, mesh, args.mode, args.activation_checkpointing)
    model.to_empty(device="cpu" if args.mode == "cpu_offload" else "cuda")
    with torch.no_grad():
        for p in model.parameters():
            p.normal_(0, 0.02)
    params = sum(p.numel() for p in model.parameters())

    t0 = time.perf_counter()
    if args.mode == "tandem":
        import tandem.torch
        master, m, v = args.state.split("/")
        # A node profile (tandem-bench calibrate --ranks N): the rates of one of torchrun's
        # LOCAL_WORLD_SIZE ranks busy at once; without one, auto measures its own.
        rates = (tandem.machine_rates(args.profile, master=master, m=m, v=v)
                 if args.profile else None)
        opt = tandem.torch.AdamW(model.named_parameters(), lr=1e-5, weight_decay=0.1,
                                 offload_fraction=args.fraction,
                                 offload_compute=args.offload_compute,
                                 master_format=master, momentum_format=m,
                                 variance_format=v, machine_rates=rates)
    elif args.mode == "cpu_offload":
        opt = torch.optim.AdamW(model.parameters(), lr=1e-5, weight_decay=0.1)
    else:
        opt = torch.optim.AdamW(model.parameters(), lr=1e-5, weight_decay=0.1, fused=True)
    build_s = time.perf_counter() - t0

    g = torch.Generator().manual_seed(0)
    ids = torch.randint(0, LLAMA3_8B["vocab"], (1, args.seq + 1), generator=g).cuda()
    torch.cuda.reset_peak_memory_stats()
    fb, st, it = [], [], []
    for i in range(args.warmup + args.iters):
        torch.cuda.synchronize()
        a = time.perf_counter()
        logits = model(ids[:, :-1])
        loss = F.cross_entropy(logits.float().flatten(0, 1), ids[:, 1:].flatten())
        loss.backward()
        torch.cuda.synchronize()
        b = time.perf_counter()
        opt.step()
        opt.zero_grad()
        torch.cuda.synchronize()
        c = time.perf_counter()
        if i >= args.warmup:
            fb.append((b - a) * 1e3)
            st.append((c - b) * 1e3)
            it.append((c - a) * 1e3)
        print("  %s iteration %d: %.0f ms (forward+backward %.0f, step %.0f)"
              % (args.mode, i + 1, (c - a) * 1e3, (b - a) * 1e3, (c - b) * 1e3),
              file=sys.stderr, flush=True)
    peak = torch.tensor([torch.cuda.max_memory_allocated()], device="cuda")
    dist.all_reduce(peak, op=dist.ReduceOp.MAX)  # the largest rank's
    result = dict(mode=args.mode, layers=args.layers, params=params, seq=args.seq,
                  world_size=dist.get_world_size(),
                  activation_checkpointing=args.activation_checkpointing,
                  fraction=args.fraction if args.mode == "tandem" else None,
                  iteration_ms=statistics.median(it), forward_backward_ms=statistics.median(fb),
                  step_ms=statistics.median(st), iterations_ms=it,
                  gpu_peak_gib=peak.item() / 2**30,
                  optimizer_build_s=build_s)
    if args.mode == "tandem":
        result["offload_compute"] = args.offload_compute
        result["state"] = args.state
        result["profile"] = args.profile
        result["compute_split"] = opt.compute_split()
        result["step_times"] = opt.last_step_times()
        # One node, many ranks (docs/node_sharing.md): each rank's host CPUs and host
        # bytes, gathered, against the node's pinned budget.
        mine = dict(host_cpus=list(opt.host_cpus),
                    host_bytes=sum(opt.memory()["host"].values()))
        ranks = [None] * dist.get_world_size()
        dist.all_gather_object(ranks, mine)
        result["ranks"] = ranks
        result["node_pinned_budget"] = tandem._C.node_pinned_budget()
    if dist.get_rank() == 0:
        with open(args.child_out, "w") as f:
            json.dump(result, f)
    dist.destroy_process_group()


def _cpu_list(cpus):
    """"0-7,16-23" for a list of CPU ids; "any" for none (unrestricted)."""
    if not cpus:
        return "any"
    cpus, runs = sorted(cpus), []
    start = prev = cpus[0]
    for c in cpus[1:] + [None]:
        if c is not None and c == prev + 1:
            prev = c
            continue
        runs.append("%d" % start if start == prev else "%d-%d" % (start, prev))
        if c is not None:
            start = prev = c
    return ",".join(runs)


def state_arg(text):
    """--state MASTER/M/V, three formats."""
    if len(text.split("/")) != 3 or not all(text.split("/")):
        raise argparse.ArgumentTypeError("expected MASTER/M/V, e.g. f32/f32/f32, got %r" % text)
    return text


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--layers", type=int, default=16)
    ap.add_argument("--nproc", type=int, default=1, help="GPUs (ranks) per mode")
    ap.add_argument("--seq", type=int, default=2048)
    ap.add_argument("--iters", type=int, default=3)
    ap.add_argument("--warmup", type=int, default=1)
    ap.add_argument("--fraction", type=float, default=1.0)
    ap.add_argument("--state", type=state_arg, default="bf16+ecc8/q8/q8",
                    help="tandem's master/m/v formats (default bf16+ecc8/q8/q8)")
    ap.add_argument("--profile", default=None,
                    help="calibration profile whose rates auto uses (tandem.machine_rates, "
                         "for LOCAL_WORLD_SIZE ranks; default: auto measures its own)")
    ap.add_argument("--offload-compute", default="auto",
                    help='tandem: "auto", "host", "gpu" or a share (docs/user_guide.md)')
    ap.add_argument("--modes", default="none,cpu_offload,tandem")
    ap.add_argument("--activation-checkpointing", action="store_true",
                    help="checkpoint every transformer block's activations (full AC, "
                         "torch's CheckpointWrapper) in every mode")
    ap.add_argument("--json", default=None)
    ap.add_argument("--mode", help=argparse.SUPPRESS)
    ap.add_argument("--child-out", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.mode:
        return child(args)

    results = {}
    for mode in args.modes.split(","):
        out = tempfile.mktemp(suffix=".json")
        cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone",
               "--nproc_per_node", str(args.nproc), os.path.abspath(__file__), "--mode", mode,
               "--child-out", out] + sum(([k, str(v)] for k, v in (
                   ("--layers", args.layers), ("--seq", args.seq), ("--iters", args.iters),
                   ("--warmup", args.warmup), ("--fraction", args.fraction),
                   ("--offload-compute", args.offload_compute), ("--state", args.state))), [])
        if args.profile:
            cmd += ["--profile", os.path.abspath(args.profile)]
        if args.activation_checkpointing:
            cmd.append("--activation-checkpointing")
        print("fsdp_step: %s ..." % mode, file=sys.stderr, flush=True)
        rc = subprocess.run(cmd).returncode
        if rc != 0 or not os.path.exists(out):
            print("fsdp_step: %s failed (exit %d)" % (mode, rc), file=sys.stderr)
            continue
        with open(out) as f:
            results[mode] = json.load(f)

    rows = []
    none, off, tan = (results.get(m) for m in ("none", "cpu_offload", "tandem"))
    print("\nFSDP2, Llama-3-8B shapes, %d layers (%.2f Gparam), seq %d, world size %d, "
          "activation checkpointing %s"
          % (args.layers, next(iter(results.values()))["params"] / 1e9 if results else 0,
             args.seq, args.nproc, "on" if args.activation_checkpointing else "off"))
    if tan and "ranks" in tan:
        for r, x in enumerate(tan["ranks"]):
            print("tandem rank %d: %d host CPUs (%s), %.1f GiB host memory"
                  % (r, len(x["host_cpus"]), _cpu_list(x["host_cpus"]), x["host_bytes"] / 2**30))
        cpus = [set(x["host_cpus"]) for x in tan["ranks"]]
        disjoint = all(not (a & b) for i, a in enumerate(cpus) for b in cpus[i + 1:])
        total = sum(x["host_bytes"] for x in tan["ranks"])
        print("ranks' host CPUs disjoint: %s; host memory %.1f GiB of the node's pinned "
              "budget %.1f GiB" % ("yes" if disjoint else "NO", total / 2**30,
                                    tan["node_pinned_budget"] / 2**30))
    if tan:
        print("tandem: state %s, offload_fraction %g, offload_compute %s, share on the GPU %.3f"
              % (args.state, args.fraction, args.offload_compute,
                 tan["compute_split"]["share"]))
    print("%-12s %12s %12s %10s %10s" % ("mode", "iteration", "fwd+bwd", "step", "GPU peak"))
    for mode, r in results.items():
        print("%-12s %9.0f ms %9.0f ms %7.0f ms %6.1f GiB"
              % (mode, r["iteration_ms"], r["forward_backward_ms"], r["step_ms"],
                 r["gpu_peak_gib"]))
    checks = []
    if tan and off:
        checks.append(("tandem vs cpu_offload speed-up", off["iteration_ms"] / tan["iteration_ms"],
                       ">=", 10.0))
    if tan and none:
        checks.append(("tandem / none iteration time", tan["iteration_ms"] / none["iteration_ms"],
                       "<=", 2.5))
        checks.append(("tandem / none GPU peak", tan["gpu_peak_gib"] / none["gpu_peak_gib"],
                       "<=", 0.45))
    for name, value, op, limit in checks:
        ok = value >= limit if op == ">=" else value <= limit
        rows.append(dict(check=name, value=value, target="%s %g" % (op, limit), met=ok))
        print("%-32s %7.2f  (target %s %g: %s)" % (name, value, op, limit,
                                                   "met" if ok else "MISSED"))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(dict(benchmark="fsdp_step",
                           command=command_line("fsdp_step.py", sys.argv[1:]),
                           commit=git_commit(), date=utc_now(), world_size=args.nproc,
                           activation_checkpointing=args.activation_checkpointing,
                           results=results, checks=rows),
                      f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
