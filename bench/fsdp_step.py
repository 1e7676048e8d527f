"""FSDP2 training iterations (forward, backward, optimizer step) on Llama-3 shapes:
Tandem at full offload against FSDP2 without offload and FSDP2 with CPUOffloadPolicy,
each in its own process, in one run (docs/benchmarks.md, "FSDP2 iteration").

    python3 bench/fsdp_step.py --layers 16 --json bench/results/fsdp_step_h200.json
    python3 bench/fsdp_step.py --layers 32 --nproc 4 --modes none,tandem \
        --activation-checkpointing --release --speculative
    python3 bench/fsdp_step.py --model llama3-70b --layers 80 --nproc 4 --seq 4096 \
        --modes none:10,none,tandem --activation-checkpointing --release --speculative \
        --clip 1.0 --text --iters 20

--nproc N runs each mode on N local GPUs (world size N, rank r on cuda:r); the GPU peak
is the largest rank's, the times rank 0's (FSDP2 keeps the ranks in step): torch's
max_memory_allocated, which counts the engine's own device memory too (its GPU-resident
state, stream slots, the speculation's holding place come from torch's caching
allocator: Note [One GPU memory pool] in include/tandem/device_allocator.h). A mode may
name its own layer count (``none:10``: the model cut to 10 layers, as many as fit
without offload) and its own GPU memory (``tandem+g48``: --gpu-memory-gib 48 for that
mode); a mode that runs out of GPU memory is reported as such. A tandem mode
may add options of its own to the command's (``tandem+release``, ``tandem+speculative``,
``tandem+release+speculative``) and its own offload fraction (``tandem+f0.5``), so that
variants run against the same ``none``. ``--fraction 1,0.62,0.43,0.54`` gives each local
rank its own fraction (a node whose links differ: the bits do not depend on it).

Modes (each a fresh `torchrun --nproc_per_node N` job, so GPU peaks do not mix):
  none         fp32 sharded parameters, bf16 compute (MixedPrecisionPolicy), torch's fused
               AdamW on the GPU: FSDP2 as most people run it.
  cpu_offload  the same with offload_policy=CPUOffloadPolicy(): parameters, gradients and
               torch's AdamW state on the host.
  tandem       bf16 sharded parameters, tandem.torch.AdamW with --state formats
               (master/m/v, default bf16+ecc8/q8/q8; f32/f32/f32 for fp32 state) at --fraction (default 1: all optimizer state in pinned host memory), its
               host-resident state computed where --offload-compute says (default auto).
  tandem_cpu_offload
               parameters on the host too (docs/distributed.md, "Parameters on the
               host"): bf16 sharded parameters and their gradients in pinned host memory
               (CPUOffloadPolicy), tandem.torch.AdamW with --state formats in host mode
               over them (the state in host memory, the host kernels; offload_compute
               "host"), with --release and --speculative as tandem's. Its offload
               fraction (default 1, ``tandem_cpu_offload+f0``) splits the host step:
               the offloaded part runs through the engine's chunk pipeline, which early
               start and speculation overlap with backward; the rest is updated in place
               at step().
Tandem's gradient hand-over (docs/python.md, "Gradient release"): --release
(release_grads: each sharded gradient leaves the GPU as the engine takes it, from FSDP2's
post-accumulate-grad hooks), --speculative (speculative_early_start: begin_step() before
each forward, the offloaded state updated during backward, exact commit or roll back;
--speculative-host-gib and --speculative-stream-gib bound its backups per rank), --inplace
(with both: in_place_grad_bytes = --in-place-grad-gib, the speculative kernels read the
handed-over gradients on the GPU instead of uploading their copies), --clip
(max_grad_norm; torch's clip_grad_norm_ in the other modes). "exposed" is the time from
the end of backward to the end of the step.

--text trains on real text (the Python standard library's sources, bytes as tokens: a
different window per rank and iteration) and reports the loss; without it every
iteration sees one random batch. Tokens/s and MFU count seq tokens per GPU per iteration
and the model FLOPs 6 N + 12 L d s per token (no recompute) against --peak-tflops.

Targets (issue), printed against each figure: tandem >= 10x faster than cpu_offload
(tandem_cpu_offload too, and within 1.5x of tandem's iteration);
against none at the same layer count, Llama-3-8B: iteration within 1.10x (world size 1:
1.3x), GPU peak <= 30%, step exposed <= 10% of the iteration; with a cut none (none:L):
tandem's MFU >= 90% of none's.

--activation-checkpointing (default off) wraps every transformer block in torch's
CheckpointWrapper (non-reentrant torch.utils.checkpoint) before fully_shard, as
torchtitan's "full" activation checkpointing does, in every mode alike: each block keeps
only its input for the backward and recomputes its forward there. The header and each
mode's JSON say whether it was on.
"""

import argparse
import functools
import gzip
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
from bench_args import HookTimer, command_line, git_commit, utc_now  # noqa: E402

LLAMA3_8B = dict(vocab=128256, dim=4096, heads=32, kv_heads=8, hidden=14336)
LLAMA3_70B = dict(vocab=128256, dim=8192, heads=64, kv_heads=8, hidden=28672)
MODELS = {"llama3-8b": LLAMA3_8B, "llama3-70b": LLAMA3_70B}


def text_tokens():
    """Real text that ships with every Python: the standard library's sources, as bytes
    (token ids 0-255), in a fixed order."""
    root = os.path.dirname(os.__file__)
    chunks = []
    for name in sorted(os.listdir(root)):
        if name.endswith(".py"):
            with open(os.path.join(root, name), "rb") as f:
                chunks.append(f.read())
    return b"".join(chunks)


def model_flops_per_token(params, layers, dim, seq):
    """Training FLOPs per token without recompute: 6 N + 12 L d s (PaLM's MFU)."""
    return 6 * params + 12 * layers * dim * seq


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
    if mode not in TANDEM_MODES:
        kwargs["mp_policy"] = MixedPrecisionPolicy(param_dtype=torch.bfloat16,
                                                   reduce_dtype=torch.float32)
    if mode in HOST_PARAM_MODES:
        kwargs["offload_policy"] = CPUOffloadPolicy()
    for layer in model.layers:
        fully_shard(layer, **kwargs)
    fully_shard(model, **kwargs)
    return model


def child(args):
    import torch
    import torch.distributed as dist

    dist.init_process_group("nccl")
    torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", "0")))
    if args.gpu_memory_gib:
        hold_memory_beyond(int(args.gpu_memory_gib * 2**30))
    try:
        return train(args)
    except torch.OutOfMemoryError as e:
        # Every rank runs out at the same allocation (the same shapes): reported, not a
        # failure of the benchmark.
        if dist.get_rank() == 0:
            with open(args.child_out, "w") as f:
                json.dump(dict(mode=args.mode, layers=args.layers, oom=True,
                               error=str(e).split("\n")[0]), f)
        print("  %s: out of GPU memory: %s" % (args.mode, str(e).split("\n")[0]),
              file=sys.stderr, flush=True)
        os._exit(0)  # NCCL's teardown may wait for ranks that are gone


def trace_iteration(trace_file, iteration):
    """`iteration()` (one more, not among the measured ones) under torch.profiler on every
    rank; rank 0 writes its Chrome trace to `trace_file` (bench/trace_summary.py reads it:
    backward on the compute stream, the engine's copies and kernels beside it)."""
    import torch
    import torch.distributed as dist
    from torch.profiler import ProfilerActivity, profile

    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA],
                 with_stack=True) as prof:
        iteration()
        torch.cuda.synchronize()
    if dist.get_rank() == 0:
        plain = trace_file[:-len(".gz")]
        prof.export_chrome_trace(plain)
        with open(plain, "rb") as f, gzip.open(trace_file, "wb") as g:
            g.write(f.read())
        os.remove(plain)


_BALLAST = []  # the device memory hold_memory_beyond took: held until the process ends


def hold_memory_beyond(card_bytes):
    """Leave this process's GPU with `card_bytes` of memory in all: the rest of the
    device is allocated here, through the driver (outside torch's allocator and the
    engine's), before anything else, and held. A larger card (H200, 141 GB) then runs as
    a smaller one (H100, 80 GB): the CUDA context, NCCL, torch and the engine share what
    is left, and a run that needs more fails as it would there. Compute, HBM bandwidth
    and the host's links stay the larger card's."""
    import ctypes
    import torch

    torch.empty(1, device="cuda")  # the primary context, current on this thread
    total = torch.cuda.mem_get_info()[1]
    extra = total - card_bytes
    if extra <= 0:
        raise SystemExit("--gpu-memory-gib %.2f: this GPU has only %.2f GiB"
                         % (card_bytes / 2**30, total / 2**30))
    ptr = ctypes.c_uint64()
    rc = ctypes.CDLL("libcuda.so.1").cuMemAlloc_v2(ctypes.byref(ptr), ctypes.c_size_t(extra))
    if rc != 0:
        raise SystemExit("--gpu-memory-gib: cuMemAlloc of %d bytes (the GPU's %d beyond "
                         "%d) failed with CUDA error %d" % (extra, total, card_bytes, rc))
    _BALLAST.append(ptr)


def train(args):
    import torch
    import torch.distributed as dist
    import torch.nn.functional as F
    from torch.distributed.device_mesh import init_device_mesh
    from fsdp_train import Llama

    shapes = MODELS[args.model]
    world, rank = dist.get_world_size(), dist.get_rank()
    mesh = init_device_mesh("cuda", (world,))
    dtype = torch.bfloat16 if args.mode in TANDEM_MODES else torch.float32
    with torch.device("meta"):
        model = Llama(layers=args.layers, **shapes).to(dtype)
    shard(model, mesh, args.mode, args.activation_checkpointing)
    model.to_empty(device="cpu" if args.mode in HOST_PARAM_MODES else "cuda")
    with torch.no_grad():
        for p in model.parameters():
            p.normal_(0, 0.02)
    params = sum(p.numel() for p in model.parameters())

    t0 = time.perf_counter()
    if args.mode in TANDEM_MODES:
        import tandem.torch
        master, m, v = args.state.split("/")
        # A node profile (tandem-bench calibrate --ranks N): the rates of one of torchrun's
        # LOCAL_WORLD_SIZE ranks busy at once; without one, auto measures its own.
        rates = (tandem.machine_rates(args.profile, master=master, m=m, v=v)
                 if args.profile else None)
        spec = {}
        if args.speculative_host_gib is not None:
            spec["speculative_host_bytes"] = int(args.speculative_host_gib * 2**30)
        if args.speculative_stream_gib is not None:
            spec["speculative_stream_bytes"] = int(args.speculative_stream_gib * 2**30)
        if args.inplace:
            spec["in_place_grad_bytes"] = int(args.in_place_grad_gib * 2**30)
        if args.mode == "tandem_cpu_offload":  # host mode over the host shards
            args.offload_compute, rates = "host", None
        opt = tandem.torch.AdamW(model.named_parameters(), lr=args.lr, weight_decay=0.1,
                                 offload_fraction=rank_fraction(
                                     args.fraction, int(os.environ.get("LOCAL_RANK", rank))),
                                 offload_compute=args.offload_compute,
                                 master_format=master, momentum_format=m,
                                 variance_format=v, machine_rates=rates,
                                 max_grad_norm=args.clip or None,
                                 release_grads=args.release,
                                 speculative_early_start=args.speculative, **spec)
    elif args.mode == "cpu_offload":
        opt = torch.optim.AdamW(model.parameters(), lr=args.lr, weight_decay=0.1)
    else:
        opt = torch.optim.AdamW(model.parameters(), lr=args.lr, weight_decay=0.1, fused=True)
    build_s = time.perf_counter() - t0
    tandem_mode = args.mode in TANDEM_MODES

    if args.text:
        data = torch.frombuffer(bytearray(text_tokens()), dtype=torch.uint8)
    else:
        g = torch.Generator().manual_seed(0)
        fixed = torch.randint(0, shapes["vocab"], (1, args.seq + 1), generator=g).cuda()

    def batch(i):
        if not args.text:
            return fixed
        start = ((i * world + rank) * (args.seq + 1)) % (data.numel() - args.seq - 1)
        return data[start:start + args.seq + 1].long().view(1, -1).cuda()

    def forward_backward(ids):
        """begin_step (with speculation), forward and backward; the loss."""
        if tandem_mode and args.speculative:
            opt.begin_step()
        logits = model(ids[:, :-1])
        loss = F.cross_entropy(logits.float().flatten(0, 1), ids[:, 1:].flatten())
        loss.backward()
        return loss

    def step():
        """Clipping (torch's outside Tandem) and the step; the norm clipping saw, or None."""
        norm = None
        if args.clip and not tandem_mode:
            norm = torch.nn.utils.clip_grad_norm_(model.parameters(), args.clip)
            norm = float(norm.full_tensor() if hasattr(norm, "full_tensor") else norm)
        opt.step()
        if tandem_mode and args.clip:
            norm = float(opt.last_result.grad_norm)
        return norm

    torch.cuda.reset_peak_memory_stats()
    fb, st, it, losses, hooks, norms, spec_chunks = [], [], [], [], [], [], []
    hook_timer = HookTimer(opt) if tandem_mode else None
    for i in range(args.warmup + args.iters):
        ids = batch(i)
        torch.cuda.synchronize()
        a = time.perf_counter()
        loss = forward_backward(ids)
        torch.cuda.synchronize()
        b = time.perf_counter()
        hooks_ms = hook_timer.take() if hook_timer else 0.0
        norm = step()
        if norm is not None:
            norms.append(norm)
        if tandem_mode:
            times = opt.last_step_times()
            spec_chunks.append((times["speculated_chunks"] + times["speculated_stream_chunks"],
                                times["rolled_back_chunks"] + times["rolled_back_stream_chunks"]))
        opt.zero_grad()
        torch.cuda.synchronize()
        c = time.perf_counter()
        mean = loss.detach().clone()
        dist.all_reduce(mean)
        losses.append(mean.item() / world)
        if i >= args.warmup:
            fb.append((b - a) * 1e3)
            st.append((c - b) * 1e3)
            it.append((c - a) * 1e3)
            hooks.append(hooks_ms)
        print("  %s iteration %d: %.0f ms (forward+backward %.0f, step %.0f) loss %.4f"
              % (args.mode, i + 1, (c - a) * 1e3, (b - a) * 1e3, (c - b) * 1e3, losses[-1]),
              file=sys.stderr, flush=True)
    if args.trace_file:
        traced_ids = batch(args.warmup + args.iters)

        def traced():
            forward_backward(traced_ids)
            step()
            opt.zero_grad()
        trace_iteration(args.trace_file, traced)
    # The engine's device memory comes from torch's caching allocator: in the peak already.
    engine = opt.memory()["device"]["total"] if tandem_mode else 0
    peak = torch.tensor([torch.cuda.max_memory_allocated()], device="cuda")
    dist.all_reduce(peak, op=dist.ReduceOp.MAX)  # the largest rank's
    iteration_ms = statistics.median(it)
    flops = model_flops_per_token(params, args.layers, shapes["dim"], args.seq) * args.seq
    result = dict(mode=args.mode, model=args.model, layers=args.layers, params=params,
                  seq=args.seq, world_size=world,
                  activation_checkpointing=args.activation_checkpointing,
                  fraction=rank_fraction(args.fraction, 0) if tandem_mode else None,
                  fractions=args.fraction if tandem_mode else None,
                  iteration_ms=iteration_ms, forward_backward_ms=statistics.median(fb),
                  step_ms=statistics.median(st), iterations_ms=it,
                  exposed_share=statistics.median(st) / iteration_ms,
                  tokens_per_s_per_gpu=args.seq / (iteration_ms / 1e3),
                  mfu=flops / (iteration_ms / 1e3) / (args.peak_tflops * 1e12),
                  losses=losses, text=args.text, clip=args.clip, grad_norms=norms,
                  clip_triggered=sum(1 for n in norms if n > args.clip),
                  gpu_peak_gib=peak.item() / 2**30, engine_device_gib=engine / 2**30,
                  gpu_memory_gib=args.gpu_memory_gib,
                  optimizer_build_s=build_s)
    if tandem_mode:
        result["release"] = args.release
        result["speculative"] = args.speculative
        result["in_place_grad_bytes"] = spec.get("in_place_grad_bytes", 0)
        # per step: (chunks updated during backward, chunks of them rolled back)
        result["speculated_rolled_back_chunks"] = spec_chunks
        result["offload_compute"] = args.offload_compute
        result["state"] = args.state
        result["profile"] = args.profile
        result["compute_split"] = opt.compute_split()
        result["step_times"] = opt.last_step_times()
        # The hooks' host time in backward (tandem.torch's and the engine's hand-over), on
        # the thread that launches backward's kernels.
        result["hooks_ms"] = statistics.median(hooks)
        # One node, many ranks (docs/node_sharing.md): each rank's host CPUs and host
        # bytes, gathered, against the node's pinned budget.
        mine = dict(host_cpus=list(opt.host_cpus),
                    host_bytes=opt.memory()["host"]["total"],
                    rss_bytes=_rss_bytes())
        ranks = [None] * dist.get_world_size()
        dist.all_gather_object(ranks, mine)
        result["ranks"] = ranks
        result["node_pinned_budget"] = tandem._C.node_pinned_budget()
        result["node_mem_available_gib"] = _meminfo("MemAvailable") / 2**30
        result["node_mem_total_gib"] = _meminfo("MemTotal") / 2**30
    if dist.get_rank() == 0:
        with open(args.child_out, "w") as f:
            json.dump(result, f)
    dist.destroy_process_group()


def _rss_bytes():
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    return 0


def _meminfo(key):
    with open("/proc/meminfo") as f:
        for line in f:
            if line.startswith(key + ":"):
                return int(line.split()[1]) * 1024
    return 0


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
    ap.add_argument("--fraction", type=fraction_list, default=[1.0],
                    help="offload fraction; a comma list gives local rank r the r-th")
    ap.add_argument("--state", type=state_arg, default="bf16+ecc8/q8/q8",
                    help="tandem's master/m/v formats (default bf16+ecc8/q8/q8)")
    ap.add_argument("--profile", default=None,
                    help="calibration profile whose rates auto uses (tandem.machine_rates, "
                         "for LOCAL_WORLD_SIZE ranks; default: auto measures its own)")
    ap.add_argument("--offload-compute", default="auto",
                    help='tandem: "auto", "host", "gpu" or a share (docs/user_guide.md)')
    ap.add_argument("--modes", default="none,cpu_offload,tandem",
                    help="modes, each optionally with its own layer count: none:10")
    ap.add_argument("--model", choices=sorted(MODELS), default="llama3-8b")
    ap.add_argument("--activation-checkpointing", action="store_true",
                    help="checkpoint every transformer block's activations (full AC, "
                         "torch's CheckpointWrapper) in every mode")
    ap.add_argument("--release", action="store_true", help="tandem: release_grads")
    ap.add_argument("--speculative", action="store_true",
                    help="tandem: speculative_early_start, begin_step() before each forward")
    ap.add_argument("--speculative-host-gib", type=float, default=None)
    ap.add_argument("--speculative-stream-gib", type=float, default=None)
    ap.add_argument("--inplace", action="store_true",
                    help="tandem: speculative kernels read released gradients in place "
                         "(in_place_grad_bytes = --in-place-grad-gib)")
    ap.add_argument("--in-place-grad-gib", type=float, default=4.0)
    ap.add_argument("--clip", type=float, default=0.0, help="max gradient norm (0: none)")
    ap.add_argument("--lr", type=float, default=1e-5)
    ap.add_argument("--text", action="store_true", help="train on real text (module doc)")
    ap.add_argument("--peak-tflops", type=float, default=989.0,
                    help="the GPU's dense bf16 peak for MFU (H100/H200 SXM: 989)")
    ap.add_argument("--gpu-memory-gib", type=float, default=None,
                    help="run every mode as if each GPU had this much memory in all (the "
                         "rest allocated and held first; 79.65 for an H100 80GB on an H200)")
    ap.add_argument("--plan", default=None,
                    help="tandem-plan --json output: the tandem modes run its recommended "
                         "point (optimizer_kwargs), in place of --fraction, "
                         "--offload-compute, --state, --release, --speculative and the "
                         "speculation and in-place budgets")
    ap.add_argument("--trace", default=None, metavar="DIR",
                    help="after the measured iterations, one more under torch.profiler: "
                         "rank 0's Chrome trace in DIR/<mode>.json.gz")
    ap.add_argument("--trace-file", help=argparse.SUPPRESS)
    ap.add_argument("--mode-timeout", type=float, default=1800.0)
    ap.add_argument("--json", default=None)
    ap.add_argument("--mode", help=argparse.SUPPRESS)
    ap.add_argument("--child-out", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.mode:
        return child(args)
    if args.plan:
        try:
            print("fsdp_step: tandem from the plan %s: %s" % (args.plan, apply_plan(args)),
                  file=sys.stderr)
        except ValueError as e:
            ap.error("--plan %s: %s" % (args.plan, e))

    results = {}
    for spec in args.modes.split(","):
        mode, _, layers = spec.partition(":")
        mode, *extra = mode.split("+")
        fraction = [f for f in map(mode_fraction, extra) if f is not None]
        extra = [e for e in extra if mode_fraction(e) is None]
        memory = [g for g in map(mode_memory, extra) if g is not None]
        extra = [e for e in extra if mode_memory(e) is None]
        if mode not in ("none", "cpu_offload") + TANDEM_MODES or len(fraction) > 1 or \
                len(memory) > 1 or any(e not in MODE_OPTIONS for e in extra) or \
                (extra or fraction) and mode not in TANDEM_MODES:
            ap.error("mode %r: a mode is none[+gGIB], cpu_offload[+gGIB], "
                     "tandem[+%s][+fFRACTION][+gGIB] or tandem_cpu_offload[+%s][+fFRACTION][+gGIB], "
                     "each with [:layers]" % (spec, "|+".join(MODE_OPTIONS),
                                              "|+".join(MODE_OPTIONS)))
        layers = int(layers) if layers else args.layers
        out = tempfile.mktemp(suffix=".json")
        cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone",
               "--nproc_per_node", str(args.nproc), os.path.abspath(__file__), "--mode", mode,
               "--child-out", out] + sum(([k, str(v)] for k, v in (
                   ("--layers", layers), ("--seq", args.seq), ("--iters", args.iters),
                   ("--warmup", args.warmup),
                   ("--fraction", fraction[0] if fraction
                    else ",".join("%g" % f for f in args.fraction)),
                   ("--offload-compute", args.offload_compute), ("--state", args.state),
                   ("--model", args.model), ("--clip", args.clip), ("--lr", args.lr),
                   ("--peak-tflops", args.peak_tflops),
                   ("--in-place-grad-gib", args.in_place_grad_gib))), [])
        for flag in ("speculative_host_gib", "speculative_stream_gib", "profile",
                     "gpu_memory_gib"):
            value = memory[0] if flag == "gpu_memory_gib" and memory else getattr(args, flag)
            if value is not None:
                cmd += ["--" + flag.replace("_", "-"),
                        os.path.abspath(value) if flag == "profile" else str(value)]
        for flag in ("activation_checkpointing", "release", "speculative", "inplace", "text"):
            if getattr(args, flag) or flag in extra:
                cmd.append("--" + flag.replace("_", "-"))
        if args.trace:
            os.makedirs(args.trace, exist_ok=True)
            cmd += ["--trace-file", os.path.join(os.path.abspath(args.trace), "%s.json.gz"
                                                 % spec.replace(":", "_").replace("+", "_"))]
        print("fsdp_step: %s (%d layers) ..." % (mode, layers), file=sys.stderr, flush=True)
        try:
            rc = subprocess.run(cmd, timeout=args.mode_timeout).returncode
        except subprocess.TimeoutExpired:
            rc = "timeout"
        if rc != 0 or not os.path.exists(out):
            print("fsdp_step: %s failed (exit %s)" % (spec, rc), file=sys.stderr)
            continue
        with open(out) as f:
            results[spec] = json.load(f)
    report(args, results)
    return 0


MODE_OPTIONS = ("release", "speculative", "inplace")
TANDEM_MODES = ("tandem", "tandem_cpu_offload")
HOST_PARAM_MODES = ("cpu_offload", "tandem_cpu_offload")  # CPUOffloadPolicy


def apply_plan(args):
    """Sets the tandem options of `args` to the recommended point of the plan in
    args.plan (tandem-plan --json: optimizer_kwargs, docs/planner.md "Running the plan");
    returns them as text. ValueError for a plan that does not fit or is for another
    optimizer than AdamW."""
    with open(args.plan) as f:
        plan = json.load(f)
    kw = plan.get("optimizer_kwargs")
    if kw is None:
        raise ValueError("the plan has no optimizer_kwargs (it does not fit, or predates them)")
    if plan.get("optimizer_class") != "AdamW":
        raise ValueError("the plan is for %s; this benchmark runs AdamW"
                         % plan.get("optimizer_class"))
    args.fraction = [kw["offload_fraction"]]
    args.offload_compute = str(kw.get("offload_compute", "auto"))
    args.state = "/".join((kw["master_format"], kw["momentum_format"], kw["variance_format"]))
    args.release = bool(kw.get("release_grads"))
    args.speculative = bool(kw.get("speculative_early_start"))
    # Bytes over 2^30 and back are exact in binary floating point.
    args.speculative_host_gib = (kw["speculative_host_bytes"] / 2**30
                                 if "speculative_host_bytes" in kw else None)
    args.speculative_stream_gib = (kw["speculative_stream_bytes"] / 2**30
                                   if "speculative_stream_bytes" in kw else None)
    args.inplace = "in_place_grad_bytes" in kw
    if args.inplace:
        args.in_place_grad_gib = kw["in_place_grad_bytes"] / 2**30
    return ", ".join("%s=%s" % item for item in sorted(kw.items()))


def parse_fraction(text):
    """An offload fraction: a number in [0, 1] (ValueError otherwise)."""
    value = float(text)
    if not 0.0 <= value <= 1.0:
        raise ValueError("%r is outside [0, 1]" % text)
    return value


def fraction_list(text):
    """--fraction: one offload fraction, or one per local rank ("1,0.9,0.65,0.8")."""
    try:
        return [parse_fraction(x) for x in text.split(",")]
    except ValueError:
        raise argparse.ArgumentTypeError("%r: fractions in [0, 1], comma-separated" % text)


def rank_fraction(fractions, rank):
    """Local rank `rank`'s offload fraction (cyclically through the list)."""
    return fractions[rank % len(fractions)]


def mode_option(option, prefix, parse):
    """A mode's own value, given as PREFIX followed by it (``f0.5``, ``g48``), parsed;
    None when `option` is not one."""
    if not option.startswith(prefix):
        return None
    try:
        return parse(option[len(prefix):])
    except ValueError:
        return None


def mode_memory(option):
    """A mode's own GPU memory in GiB (``tandem+g48``: --gpu-memory-gib 48), or None."""
    return mode_option(option, "g", float)


def mode_fraction(option):
    """A tandem mode's own offload fraction (``tandem+f0.5``), or None."""
    return mode_option(option, "f", parse_fraction)


def gpu_share(result, offload_compute):
    """The share of the offloaded elements computed on the GPU: auto's choice where a model
    chose it (compute_split), else what --offload-compute named."""
    split = result["compute_split"]
    if split.get("bound") or offload_compute == "auto":
        return split["share"]
    named = {"gpu": 1.0, "host": 0.0}
    return named[offload_compute] if offload_compute in named else float(offload_compute)


def base_mode(spec):
    """The mode of a spec: "tandem" of "tandem+release+g48:10"."""
    return spec.partition(":")[0].split("+")[0]


def is_tandem(spec):
    return base_mode(spec) in TANDEM_MODES


def report(args, results):
    """The table, each figure against its target, and the JSON."""
    ran = [r for r in results.values() if not r.get("oom")]
    print("\nFSDP2, %s shapes, %d layers (%.2f Gparam), seq %d, world size %d, activation "
          "checkpointing %s%s"
          % (args.model, args.layers, next((r["params"] for r in ran
                                            if r["layers"] == args.layers), 0) / 1e9,
             args.seq, args.nproc, "on" if args.activation_checkpointing else "off",
             ", real text" if args.text else ""))
    if args.gpu_memory_gib:
        print("each GPU held to %.2f GiB of memory in all (the rest of the card allocated "
              "before the run: a smaller card emulated)" % args.gpu_memory_gib)
    for spec, r in results.items():
        if r.get("gpu_memory_gib", args.gpu_memory_gib) != args.gpu_memory_gib:
            print("%s: each GPU held to %.2f GiB" % (spec, r["gpu_memory_gib"]))
    tandems = [spec for spec in results if is_tandem(spec) and not results[spec].get("oom")]
    tan = results[tandems[0]] if tandems else None
    for spec in tandems:
        for r, x in enumerate(results[spec].get("ranks", [])):
            print("%s rank %d: %d host CPUs (%s), %.1f GiB host memory (the optimizer's), "
                  "RSS %.1f GiB" % (spec, r, len(x["host_cpus"]), _cpu_list(x["host_cpus"]),
                                    x["host_bytes"] / 2**30, x.get("rss_bytes", 0) / 2**30))
    if tan and "ranks" in tan:
        cpus = [set(x["host_cpus"]) for x in tan["ranks"]]
        disjoint = all(not (a & b) for i, a in enumerate(cpus) for b in cpus[i + 1:])
        total = sum(x["host_bytes"] for x in tan["ranks"])
        print("ranks' host CPUs disjoint: %s; host memory %.1f GiB of the node's pinned "
              "budget %.1f GiB; node MemAvailable %.1f of %.1f GiB at the end"
              % ("yes" if disjoint else "NO", total / 2**30, tan["node_pinned_budget"] / 2**30,
                 tan.get("node_mem_available_gib", 0), tan.get("node_mem_total_gib", 0)))
    for spec in tandems:
        t = results[spec]
        fractions = t.get("fractions") or [t["fraction"]]
        compute = t.get("offload_compute", args.offload_compute)  # the mode's (its JSON)
        print("%s: state %s, offload_fraction %s, offload_compute %s (share on the GPU "
              "%.3f), release_grads %s, speculative %s, in place %.1f GiB, clip %g"
              % (spec, args.state, "/".join("%g" % f for f in fractions)
                 + (" (by local rank)" if len(fractions) > 1 else ""), compute,
                 gpu_share(t, compute), t.get("release"), t.get("speculative"),
                 t.get("in_place_grad_bytes", 0) / 2**30, args.clip))
    print("%-26s %6s %11s %11s %9s %8s %9s %7s %9s %15s"
          % ("mode", "layers", "iteration", "fwd+bwd", "exposed", "share", "tok/s/GPU",
             "MFU", "GPU peak", "loss first>last"))
    for spec, r in results.items():
        if r.get("oom"):
            print("%-26s %6d  out of GPU memory: %s" % (spec, r["layers"], r["error"][:70]))
            continue
        loss = r["losses"]
        print("%-26s %6d %8.0f ms %8.0f ms %6.0f ms %7.1f%% %9.0f %6.1f%% %5.1f GiB %7.3f>%.3f"
              % (spec, r["layers"], r["iteration_ms"], r["forward_backward_ms"], r["step_ms"],
                 100 * r["exposed_share"], r["tokens_per_s_per_gpu"], 100 * r["mfu"],
                 r["gpu_peak_gib"], loss[0], loss[-1]))
    for spec, r in results.items():
        if r.get("grad_norms"):
            rolled = sum(1 for _, back in r.get("speculated_rolled_back_chunks", []) if back)
            print("%s: gradient norm %.3g..%.3g, clipping at %g triggered at %d of %d steps%s"
                  % (spec, min(r["grad_norms"]), max(r["grad_norms"]), args.clip,
                     r["clip_triggered"], len(r["grad_norms"]),
                     "; speculation rolled back at %d" % rolled
                     if r.get("speculative") else ""))
    checks = []
    off = next((r for spec, r in results.items()
                if base_mode(spec) == "cpu_offload" and not r.get("oom")), None)
    gpu_params = next((spec for spec in tandems if base_mode(spec) == "tandem"), None)
    none = results.get("none") if not results.get("none", {}).get("oom") else None
    cut = [r for spec, r in results.items() if spec.startswith("none:") and not r.get("oom")]
    for spec in tandems:
        tan = results[spec]
        if off:
            checks.append(("%s vs cpu_offload speed-up" % spec,
                           off["iteration_ms"] / tan["iteration_ms"], ">=", 10.0))
        if base_mode(spec) == "tandem_cpu_offload":
            if gpu_params:  # parameters on the host against Tandem's GPU-parameter path
                checks.append(("%s / %s iteration time" % (spec, gpu_params),
                               tan["iteration_ms"] / results[gpu_params]["iteration_ms"],
                               "<=", 1.5))
        elif none:
            checks.append(("%s / none iteration time" % spec,
                           tan["iteration_ms"] / none["iteration_ms"],
                           "<=", 1.10 if args.nproc > 1 else 1.3))
            checks.append(("%s / none GPU peak" % spec,
                           tan["gpu_peak_gib"] / none["gpu_peak_gib"], "<=", 0.30))
        if base_mode(spec) == "tandem":
            checks.append(("%s step exposed / iteration" % spec, tan["exposed_share"],
                           "<=", 0.10))
        if cut and base_mode(spec) == "tandem":
            checks.append(("%s MFU / none (cut) MFU" % spec, tan["mfu"] / cut[0]["mfu"],
                           ">=", 0.90))
        if args.text:
            loss = tan["losses"]
            k = max(1, len(loss) // 4)
            checks.append(("%s loss, last / first quarter" % spec,
                           (sum(loss[-k:]) / k) / (sum(loss[:k]) / k), "<", 1.0))
    if results.get("none", {}).get("oom"):
        print("none at %d layers: out of GPU memory (as expected where Tandem runs)"
              % results["none"]["layers"])
    rows = []
    for name, value, op, limit in checks:
        ok = {">=": value >= limit, "<=": value <= limit, "<": value < limit}[op]
        rows.append(dict(check=name, value=value, target="%s %g" % (op, limit), met=ok))
        print("%-52s %7.3f  (target %s %g: %s)" % (name, value, op, limit,
                                                   "met" if ok else "MISSED"))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(dict(benchmark="fsdp_step",
                           command=command_line("fsdp_step.py", sys.argv[1:]),
                           commit=git_commit(), date=utc_now(), world_size=args.nproc,
                           model=args.model,
                           activation_checkpointing=args.activation_checkpointing,
                           results=results, checks=rows),
                      f, indent=1)


if __name__ == "__main__":
    sys.exit(main())
