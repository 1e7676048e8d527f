#!/usr/bin/env python3
"""Does the plan run? One GPU held to smaller cards' memory, a transformers model, each
case run with the plan's keyword arguments or offload_fraction="auto", beside the peers
that fit there (docs/benchmarks.md, "Fit: the plan against the run").

    python3 bench/fit_matrix.py --model llama3-8b --caps 24,48,80 --seqs 2048,4096 \
        --modes plan,auto --json bench/results/fit_matrix_h200.json

For each GPU cap (GiB), the rest of the device is allocated through the driver before
the case runs (as bench/fsdp_step.py --gpu-memory-gib), so the CUDA context, torch and
the engine share what a card of that size has. The model (transformers' LlamaForCausalLM
or Qwen2ForCausalLM built from the published shapes, bf16, gradient checkpointing, sdpa
attention) is built once, before the first cap, and kept; each case builds its optimizer,
runs --warmup + --iters iterations (batch 1, lr 1e-5, weight decay 0.1, max_grad_norm
1.0, a fresh batch of real text each: this repository's own sources as bytes), and
frees it. Modes:

  plan     tandem.plan(model, gpu_mem=cap, seq=..., recompute="full") and its
           optimizer_kwargs (begin_step() before backward where the plan speculates)
  auto     tandem.torch.AdamW(..., offload_fraction="auto", release_grads=True), q8 state
  f1       fraction 1 with release_grads, by hand; f1cN the same with N MiB stream chunks
  torchao  torchao's CPUOffloadOptimizer(torch.optim.AdamW, offload_gradients=True,
           fused=True) over the same bf16 parameters; it hooks the parameters for good,
           so it runs after every Tandem case

Measured: the iteration (median of --iters) and its forward and backward, tokens/s, the
engine's stage times, the GPU peak at the driver (NVML used memory, sampled every
millisecond, less the cap's ballast and what was in use before the process touched the
device), torch's reserved peak,
the engine's device and pinned bytes, and for "plan" the plan's GPU figure and iteration:
a case whose plan fits must run, under the plan's GPU figure, within 15% of its iteration.
A case that runs out of memory is recorded as such, with where.
"""

import argparse
import ctypes
import gc
import json
import os
import statistics
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from bench_args import command_line, git_commit, utc_now  # noqa: E402

GIB = float(1 << 30)
MODELS = {  # transformers config class and fields of the published shapes
    "llama3-8b": ("LlamaConfig", dict(
        hidden_size=4096, intermediate_size=14336, num_hidden_layers=32,
        num_attention_heads=32, num_key_value_heads=8, vocab_size=128256,
        max_position_embeddings=8192, rope_theta=500000.0, tie_word_embeddings=False)),
    "qwen2.5-7b": ("Qwen2Config", dict(
        hidden_size=3584, intermediate_size=18944, num_hidden_layers=28,
        num_attention_heads=28, num_key_value_heads=4, vocab_size=152064,
        max_position_embeddings=32768, rope_theta=1000000.0, tie_word_embeddings=False)),
}


class Ballast:
    """The device memory beyond a cap, held through the driver (outside torch)."""

    def __init__(self):
        self.cuda = ctypes.CDLL("libcuda.so.1")
        self.ptr, self.bytes = None, 0

    def hold(self, cap_bytes):
        import torch
        self.release()
        gc.collect()
        torch.cuda.empty_cache()
        free, total = torch.cuda.mem_get_info()
        extra = total - cap_bytes
        if extra <= 0:
            return
        ptr = ctypes.c_uint64()
        rc = self.cuda.cuMemAlloc_v2(ctypes.byref(ptr), ctypes.c_size_t(extra))
        if rc != 0:
            raise SystemExit("cap %.1f GiB: cuMemAlloc of %.2f GiB failed (%d); %.2f GiB free"
                             % (cap_bytes / GIB, extra / GIB, rc, free / GIB))
        self.ptr, self.bytes = ptr, extra

    def release(self):
        if self.ptr is not None:
            self.cuda.cuMemFree_v2(self.ptr)
            self.ptr, self.bytes = None, 0


def nvml_used():
    """The device's used memory as the driver reports it (NVML), in bytes."""
    import pynvml
    pynvml.nvmlInit()
    return pynvml.nvmlDeviceGetMemoryInfo(pynvml.nvmlDeviceGetHandleByIndex(0)).used


class DriverPeak:
    """This process's GPU memory at its highest: the device's used memory (NVML, every
    millisecond) less `ballast` and less what was in use before this process touched the
    device (`baseline`: the driver's own, other processes')."""

    def __init__(self, ballast, baseline):
        import pynvml
        pynvml.nvmlInit()
        self.nvml = pynvml
        self.handle = pynvml.nvmlDeviceGetHandleByIndex(0)
        self.ballast, self.baseline = ballast, baseline
        self.peak, self.stop = 0, threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def used(self):
        info = self.nvml.nvmlDeviceGetMemoryInfo(self.handle)
        return info.used - self.ballast.bytes - self.baseline

    def _run(self):
        while not self.stop.is_set():
            self.peak = max(self.peak, self.used())
            time.sleep(0.001)

    def __enter__(self):
        self.peak = self.used()
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.stop.set()
        self.thread.join()
        return False


def text_tokens(vocab, count):
    """`count` token ids from real text: the bytes of this repository's sources."""
    import torch
    data = bytearray()
    for root in ("python", "docs", "offload", "engine"):
        for dirpath, _, files in sorted(os.walk(os.path.join(HERE, "..", root))):
            for f in sorted(files):
                with open(os.path.join(dirpath, f), "rb") as fh:
                    data += fh.read()
                if len(data) >= count:
                    break
    while len(data) < count:
        data += data
    ids = torch.frombuffer(bytes(data[:count]), dtype=torch.uint8).long()
    return (ids * 7 + 11) % vocab  # spread over the vocabulary


def build_model(name):
    import torch
    import transformers
    cls_name, fields = MODELS[name]
    config = getattr(transformers, cls_name)(**fields, attn_implementation="sdpa",
                                             dtype=torch.bfloat16)
    arch = {"LlamaConfig": "LlamaForCausalLM", "Qwen2Config": "Qwen2ForCausalLM"}[cls_name]
    previous = torch.get_default_dtype()
    torch.set_default_dtype(torch.bfloat16)  # built in bf16 on the GPU: no fp32 copy
    try:
        with torch.device("cuda"):
            torch.manual_seed(0)
            model = getattr(transformers, arch)(config)
    finally:
        torch.set_default_dtype(previous)
    model.gradient_checkpointing_enable()
    model.config.use_cache = False
    model.train()
    return model


def optimizer_for(mode, model, cap_gib, seq, host_mem):
    """(optimizer, plan or None, speculates)."""
    import tandem
    import tandem.torch
    common = dict(lr=1e-5, weight_decay=0.1, max_grad_norm=1.0)
    if mode == "plan":
        plan = tandem.plan(model, gpu_mem="%gGiB" % cap_gib, host_mem=host_mem, seq=seq,
                           batch=1, recompute="full")
        if not plan.feasible:
            return None, plan, False
        kwargs = plan.optimizer_kwargs
        opt = tandem.torch.AdamW(model.named_parameters(), **common, **kwargs)
        return opt, plan, bool(kwargs.get("speculative_early_start"))
    q8 = dict(master_format="bf16+ecc8", momentum_format="q8", variance_format="q8")
    if mode == "auto":
        opt = tandem.torch.AdamW(model.named_parameters(), **common, **q8,
                                 offload_fraction="auto", release_grads=True)
        return opt, None, False
    if mode.startswith("f1"):
        chunk = dict(stream_chunk_bytes=int(mode[3:]) << 20) if mode.startswith("f1c") else {}
        opt = tandem.torch.AdamW(model.named_parameters(), **common, **q8,
                                 offload_fraction=1.0, release_grads=True, **chunk)
        return opt, None, False
    if mode == "torchao":
        import torch
        from torchao.optim import CPUOffloadOptimizer
        opt = CPUOffloadOptimizer(model.parameters(), torch.optim.AdamW, offload_gradients=True,
                                  fused=True, lr=1e-5, weight_decay=0.1)
        return opt, None, False
    raise SystemExit("unknown mode %r" % mode)


def run_case(model, name, mode, cap_gib, seq, args, ballast, tokens):
    import torch
    vocab = model.config.vocab_size
    case = dict(model=name, mode=mode, cap_gib=cap_gib, seq=seq)
    ballast.hold(int(cap_gib * GIB))
    torch.cuda.reset_peak_memory_stats()
    t0 = time.perf_counter()
    opt = plan = None
    try:
        opt, plan, speculates = optimizer_for(mode, model, cap_gib, seq, args.host_mem)
    except torch.OutOfMemoryError as e:
        case.update(result="out of memory at construction", error=str(e).splitlines()[0])
        return case
    if plan is not None:
        rec = plan.data.get("recommended", {})
        case.update(plan_feasible=plan.feasible, plan_kwargs=plan.optimizer_kwargs,
                    plan_gpu_gib=rec.get("gpu_bytes", {}).get("total", 0) / GIB,
                    plan_iteration_ms=(rec.get("iteration") or {}).get("iteration_ms"),
                    plan_text=plan.text.splitlines()[-12:])
        if opt is None:
            case.update(result="does not fit (plan)")
            return case
    case["build_s"] = time.perf_counter() - t0
    times, fb_times, steps, losses = [], [], [], []
    where = "forward"
    try:
        with DriverPeak(ballast, args.baseline) as peak:
            for i in range(args.warmup + args.iters):
                start = (i * seq) % (len(tokens) - seq - 1)
                ids = tokens[start:start + seq].view(1, seq).cuda()
                torch.cuda.synchronize()
                a = time.perf_counter()
                where = "forward"
                if speculates:
                    opt.begin_step(max_grad_norm=1.0)
                loss = model(input_ids=ids, labels=ids).loss
                where = "backward"
                loss.backward()
                torch.cuda.synchronize()
                fb = time.perf_counter()
                where = "step"
                if mode == "torchao":
                    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
                opt.step()
                opt.zero_grad(set_to_none=True)
                torch.cuda.synchronize()
                b = time.perf_counter()
                losses.append(loss.item())
                if i >= args.warmup:
                    times.append((b - a) * 1e3)
                    fb_times.append((fb - a) * 1e3)
                    if hasattr(opt, "last_step_times"):
                        st = opt.last_step_times()
                        steps.append(dict(
                            step_ms=st["step_ms"], stream_ms=st["stream_ms"],
                            stream_chunks=st["stream_chunks"], chunks=st["chunks"],
                            host_update_ms=st["host_update_ms"],
                            stepped_tensors=opt.last_result.stepped_tensors))
                print("  %s %s cap %g seq %d iteration %d: %.0f ms loss %.4f"
                      % (name, mode, cap_gib, seq, i + 1, (b - a) * 1e3, losses[-1]),
                      file=sys.stderr, flush=True)
        case.update(result="ran", iteration_ms=statistics.median(times), iterations_ms=times,
                    forward_backward_ms=statistics.median(fb_times), engine_steps=steps,
                    tokens_per_s=seq / (statistics.median(times) / 1e3), losses=losses,
                    driver_peak_gib=peak.peak / GIB,
                    torch_reserved_peak_gib=torch.cuda.max_memory_reserved() / GIB,
                    torch_allocated_peak_gib=torch.cuda.max_memory_allocated() / GIB)
        if hasattr(opt, "memory"):
            mem = opt.memory()
            case.update(engine_device_gib=mem["device"]["total"] / GIB,
                        engine_host_gib=mem["host"]["total"] / GIB,
                        fraction=opt.placement()["offloaded"] / opt.placement()["total"])
        if getattr(opt, "auto_fraction", None):
            case["auto_fraction"] = opt.auto_fraction[0]
        if plan is not None and case.get("plan_iteration_ms"):
            case["iteration_vs_plan"] = case["iteration_ms"] / case["plan_iteration_ms"]
            case["peak_under_plan"] = case["driver_peak_gib"] <= case["plan_gpu_gib"]
    except torch.OutOfMemoryError as e:
        case.update(result="out of memory in " + where, error=str(e).splitlines()[0])
    finally:
        del opt
        model.zero_grad(set_to_none=True)
        gc.collect()
        torch.cuda.synchronize()
        torch.cuda.empty_cache()
    return case


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", default="llama3-8b", choices=sorted(MODELS))
    ap.add_argument("--caps", default="24,48,80", help="GPU memory caps, GiB")
    ap.add_argument("--seqs", default="2048,4096")
    ap.add_argument("--modes", default="plan,auto")
    ap.add_argument("--cases", default="",
                    help="cap:seq:mode,... instead of every cap x seq x mode")
    ap.add_argument("--host-mem", default="120GiB", help="the plan's host memory")
    ap.add_argument("--warmup", type=int, default=1)
    ap.add_argument("--iters", type=int, default=3)
    ap.add_argument("--json", help="write the results here")
    args = ap.parse_args(argv)
    args.baseline = nvml_used()  # before this process touches the device
    import torch
    torch.empty(1, device="cuda")
    ballast = Ballast()
    model = build_model(args.model)
    n_params = sum(p.numel() for p in model.parameters())
    tokens = text_tokens(model.config.vocab_size, 1 << 20)
    if args.cases:
        cases = [(float(c), int(s), m) for c, s, m in (x.split(":") for x in args.cases.split(","))]
    else:
        cases = [(float(c), int(s), m) for c in args.caps.split(",")
                 for s in args.seqs.split(",") for m in args.modes.split(",")]
    # torchao's CPUOffloadOptimizer hooks every parameter (post-accumulate-grad: it takes
    # p.grad to the host) and never unhooks: after it, a Tandem case on the same model
    # would see no gradient. Peers run after every Tandem case.
    cases.sort(key=lambda c: c[2] == "torchao")
    results = []
    out = dict(benchmark="fit_matrix", command=command_line("fit_matrix.py", argv),
               commit=git_commit(), date=utc_now(), device=torch.cuda.get_device_name(),
               model=args.model, params=n_params, cases=results)
    for cap, seq, mode in cases:
        results.append(run_case(model, args.model, mode, cap, seq, args, ballast, tokens))
        print(json.dumps({k: v for k, v in results[-1].items() if k != "plan_text"}),
              file=sys.stderr, flush=True)
        if args.json:  # after every case: a run cut short keeps what it measured
            with open(args.json, "w") as f:
                json.dump(out, f, indent=1)
    print("%-10s %-8s %5s %5s %-28s %9s %8s %9s %9s %7s"
          % ("model", "mode", "cap", "seq", "result", "iter ms", "tok/s", "peak GiB",
             "plan GiB", "vs plan"))
    for r in results:
        print("%-10s %-8s %5g %5d %-28s %9s %8s %9s %9s %7s" % (
            r["model"], r["mode"], r["cap_gib"], r["seq"], r["result"][:28],
            "%.0f" % r["iteration_ms"] if "iteration_ms" in r else "",
            "%.0f" % r["tokens_per_s"] if "tokens_per_s" in r else "",
            "%.2f" % r["driver_peak_gib"] if "driver_peak_gib" in r else "",
            "%.2f" % r["plan_gpu_gib"] if "plan_gpu_gib" in r else "",
            "%.2f" % r["iteration_vs_plan"] if "iteration_vs_plan" in r else ""))


if __name__ == "__main__":
    main(sys.argv[1:])
