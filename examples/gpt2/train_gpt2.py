#!/usr/bin/env python3
"""GPT-2-small on synthetic text with tandem.torch.AdamW at several offload fractions.

A GPT-2-small-sized model (12 layers, 12 heads, 768 hidden, vocab 50257, 124M
parameters, written in plain PyTorch) trains on a deterministic Markov text generated
here, for --steps steps, once per offload fraction (in a fresh subprocess each, so peak
memory is measured cleanly) and once with torch.optim.AdamW(fused=True) in fp32. It
prints a table (loss, step time, peak GPU memory, host RSS), optionally writes JSON, and
checks that

  * the loss curves of all fractions are bit-identical (per state-format set), and
  * the final loss (mean of the last 10 steps) is within --tolerance (1%) of torch's.

Run from a CMake build tree (no pip needed):

  CUBLAS_WORKSPACE_CONFIG=:4096:8 PYTHONPATH=build/python \\
      python3 examples/gpt2/train_gpt2.py --json gpt2.json

Shorter: --steps 50 --fractions 0,1. Exit status 0 when every check passes, 1 otherwise.
"""

import argparse
import json
import math
import os
import subprocess
import sys
import time

# Deterministic cuBLAS needs this before CUDA initialises.
os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")

import numpy as np  # noqa: E402
import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402


# ---------------------------------------------------------------------------------------
# Model: GPT-2 small in plain PyTorch (pre-LayerNorm, GELU MLP, tied embeddings).

class Block(torch.nn.Module):
    def __init__(self, hidden, heads):
        super().__init__()
        self.heads = heads
        self.ln1 = torch.nn.LayerNorm(hidden)
        self.qkv = torch.nn.Linear(hidden, 3 * hidden)
        self.proj = torch.nn.Linear(hidden, hidden)
        self.ln2 = torch.nn.LayerNorm(hidden)
        self.fc = torch.nn.Linear(hidden, 4 * hidden)
        self.out = torch.nn.Linear(4 * hidden, hidden)

    def forward(self, x, mask):
        b, t, c = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(c, dim=2)
        q, k, v = (z.view(b, t, self.heads, c // self.heads).transpose(1, 2) for z in (q, k, v))
        # Explicit attention (deterministic; fused SDPA backward may not be).
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
        att = att.masked_fill(mask[:t, :t], float("-inf")).softmax(dim=-1)
        y = (att @ v).transpose(1, 2).reshape(b, t, c)
        x = x + self.proj(y)
        return x + self.out(F.gelu(self.fc(self.ln2(x)), approximate="tanh"))


class GPT2(torch.nn.Module):
    def __init__(self, vocab=50257, seq=256, layers=12, heads=12, hidden=768):
        super().__init__()
        self.wte = torch.nn.Embedding(vocab, hidden)
        self.wpe = torch.nn.Embedding(seq, hidden)
        self.blocks = torch.nn.ModuleList(Block(hidden, heads) for _ in range(layers))
        self.ln_f = torch.nn.LayerNorm(hidden)
        self.register_buffer("mask", torch.ones(seq, seq, dtype=torch.bool).triu(1),
                             persistent=False)
        for name, p in self.named_parameters():
            if p.dim() == 2:
                std = 0.02 / math.sqrt(2 * layers) if name.endswith(("proj.weight",
                                                                      "out.weight")) else 0.02
                torch.nn.init.normal_(p, 0.0, std)
            elif name.endswith("bias"):
                torch.nn.init.zeros_(p)

    def forward(self, idx, targets):
        t = idx.size(1)
        x = self.wte(idx) + self.wpe(torch.arange(t, device=idx.device))
        for block in self.blocks:
            x = block(x, self.mask)
        logits = self.ln_f(x) @ self.wte.weight.t()  # tied output embedding
        return F.cross_entropy(logits.reshape(-1, logits.size(-1)).float(), targets.reshape(-1))


def param_groups(model, weight_decay):
    decay = [p for p in model.parameters() if p.dim() >= 2]
    no_decay = [p for p in model.parameters() if p.dim() < 2]
    return [{"params": decay, "weight_decay": weight_decay},
            {"params": no_decay, "weight_decay": 0.0}]


# ---------------------------------------------------------------------------------------
# Data: a first-order Markov chain over the vocabulary, each token with 8 successors of
# Zipf-like probability (entropy about 1.9 nats), generated deterministically.

def markov_corpus(vocab, tokens, seed=1234, chains=64):
    rng = np.random.default_rng(seed)
    succ = rng.integers(0, vocab, size=(vocab, 8))
    probs = 1.0 / np.arange(1, 9)
    cdf = np.cumsum(probs / probs.sum())
    steps = tokens // chains + 1
    out = np.empty((chains, steps), dtype=np.int64)
    out[:, 0] = rng.integers(0, vocab, size=chains)
    u = rng.random((chains, steps))
    for s in range(1, steps):
        k = np.searchsorted(cdf, u[:, s])
        out[:, s] = succ[out[:, s - 1], k]
    return torch.from_numpy(out.reshape(-1)[:tokens].copy())


def batch_indices(corpus_len, steps, batch, seq, seed=99):
    g = torch.Generator().manual_seed(seed)
    return torch.randint(0, corpus_len - seq - 1, (steps, batch), generator=g)


# ---------------------------------------------------------------------------------------
# One run (in a child process).

def host_rss_peak_bytes():
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    return 0


def run_one(cfg):
    import tandem.torch  # noqa: F401  (import error here names PYTHONPATH problems)

    torch.use_deterministic_algorithms(True)
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    device = torch.device(cfg["device"])
    cuda = device.type == "cuda"
    torch.manual_seed(0)
    model = GPT2(vocab=cfg["vocab"], seq=cfg["seq"], layers=cfg["layers"],
                 heads=cfg["heads"], hidden=cfg["hidden"]).to(device)
    corpus = markov_corpus(cfg["vocab"], cfg["tokens"]).to(device)
    starts = batch_indices(corpus.numel(), cfg["steps"], cfg["batch"], cfg["seq"])
    offsets = torch.arange(cfg["seq"] + 1)

    groups = param_groups(model, cfg["weight_decay"])
    betas = (0.9, 0.95)
    if cfg["kind"] == "torch":
        try:
            opt = torch.optim.AdamW(groups, lr=cfg["lr"], betas=betas, fused=True)
            label = "torch AdamW fused"
        except (TypeError, RuntimeError):
            opt = torch.optim.AdamW(groups, lr=cfg["lr"], betas=betas)
            label = "torch AdamW (fused unavailable)"
    else:
        master, momentum, variance = cfg["formats"].split("/")
        opt = tandem.torch.AdamW(groups, lr=cfg["lr"], betas=betas,
                                 offload_fraction=cfg["fraction"], master=master,
                                 momentum=momentum, variance=variance,
                                 early_start=cfg["early_start"],
                                 max_grad_norm=cfg["clip"])
        assert opt.mode == ("gpu" if cuda else "host"), "tandem runs in %s mode" % opt.mode
        label = "tandem %s f=%g%s" % (cfg["formats"], cfg["fraction"],
                                      " early" if cfg["early_start"] else "")
    warmup = max(1, cfg["steps"] // 10)
    sched = torch.optim.lr_scheduler.LambdaLR(
        opt, lambda s: min(1.0, (s + 1) / warmup) *
        (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * min(1.0, s / cfg["steps"])))))

    losses, times = [], []
    sync = torch.cuda.synchronize if cuda else (lambda: None)
    sync()
    if cuda:
        torch.cuda.reset_peak_memory_stats()
    for step in range(cfg["steps"]):
        idx = corpus[(starts[step][:, None] + offsets).to(device)]
        t0 = time.perf_counter()
        opt.zero_grad(set_to_none=False)
        loss = model(idx[:, :-1], idx[:, 1:])
        loss.backward()
        if cfg["kind"] == "torch" and cfg["clip"] > 0:
            torch.nn.utils.clip_grad_norm_(model.parameters(), cfg["clip"])
        opt.step()
        sched.step()
        sync()
        times.append((time.perf_counter() - t0) * 1e3)
        losses.append(loss.item())
    free, total = torch.cuda.mem_get_info() if cuda else (0, 0)
    torch_peak = torch.cuda.max_memory_allocated() if cuda else 0
    engine_device = engine_host = 0
    if cfg["kind"] != "torch":
        mem = opt.memory()
        engine_device, engine_host = mem["device"]["total"], mem["host"]["total"]
    return {
        "label": label, "config": cfg, "losses": losses,
        "loss_hex": [float.hex(x) for x in losses],
        "final_loss": float(np.mean(losses[-10:])),
        "step_ms_median": float(np.median(times[min(5, len(times) - 1):])),
        "torch_peak_bytes": torch_peak,
        "engine_device_bytes": engine_device, "engine_host_bytes": engine_host,
        "gpu_peak_bytes": torch_peak + engine_device,
        "device_used_bytes": total - free,
        "host_rss_peak_bytes": host_rss_peak_bytes(),
        "params": sum(p.numel() for p in model.parameters()),
    }


# ---------------------------------------------------------------------------------------
# Driver.

def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--steps", type=int, default=300)
    ap.add_argument("--fractions", default="0,0.5,1")
    ap.add_argument("--formats", default="bf16+ecc8/q8/q8",
                    help="comma-separated master/momentum/variance sets, e.g. "
                         "'f32/f32/f32,bf16+ecc8/q8/q8'")
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--seq", type=int, default=256)
    ap.add_argument("--layers", type=int, default=12)
    ap.add_argument("--heads", type=int, default=12)
    ap.add_argument("--hidden", type=int, default=768)
    ap.add_argument("--vocab", type=int, default=50257)
    ap.add_argument("--tokens", type=int, default=2_000_000)
    ap.add_argument("--lr", type=float, default=6e-4)
    ap.add_argument("--weight-decay", type=float, default=0.1)
    ap.add_argument("--clip", type=float, default=0.0,
                    help="max grad norm (0: off; tandem clips inside the step)")
    ap.add_argument("--early-start", action="store_true",
                    help="also run every fraction > 0 with early_start=True")
    ap.add_argument("--no-torch", action="store_true", help="skip the torch reference")
    ap.add_argument("--tolerance", type=float, default=0.01)
    ap.add_argument("--json", help="write all results here")
    ap.add_argument("--device", default="cuda",
                    help="cuda (default); cpu runs tandem in host mode (a smoke test)")
    ap.add_argument("--child", help=argparse.SUPPRESS)
    args = ap.parse_args()

    if args.child:
        print("RESULT " + json.dumps(run_one(json.loads(args.child))), flush=True)
        return 0
    if args.device == "cuda" and not torch.cuda.is_available():
        print("train_gpt2: needs a CUDA device", file=sys.stderr)
        return 2

    base = dict(steps=args.steps, batch=args.batch, seq=args.seq, layers=args.layers,
                heads=args.heads, hidden=args.hidden, vocab=args.vocab, tokens=args.tokens,
                lr=args.lr, weight_decay=args.weight_decay, clip=args.clip,
                device=args.device)
    configs = []
    for formats in args.formats.split(","):
        for f in (float(x) for x in args.fractions.split(",")):
            configs.append(dict(base, kind="tandem", formats=formats, fraction=f,
                                early_start=False))
            if args.early_start and f > 0:
                configs.append(dict(base, kind="tandem", formats=formats, fraction=f,
                                    early_start=True))
    if not args.no_torch:
        configs.append(dict(base, kind="torch", formats="f32/f32/f32", fraction=0.0,
                            early_start=False))

    results = []
    for cfg in configs:
        proc = subprocess.run([sys.executable, os.path.abspath(__file__), "--child",
                               json.dumps(cfg)], stdout=subprocess.PIPE, text=True)
        lines = [l for l in proc.stdout.splitlines() if l.startswith("RESULT ")]
        if proc.returncode != 0 or not lines:
            print("run failed (exit %d): %s" % (proc.returncode, cfg), file=sys.stderr)
            return 1
        r = json.loads(lines[-1][len("RESULT "):])
        results.append(r)
        print("done: %-40s final loss %.6f  step %.1f ms" % (r["label"], r["final_loss"],
                                                          r["step_ms_median"]), flush=True)

    gib = float(1 << 30)
    print("\n%-40s %10s %10s %10s %12s %12s %10s" % (
        "run", "loss[0]", "final", "step ms", "GPU peak GiB", "engine GPU", "host RSS"))
    for r in results:
        print("%-40s %10.4f %10.4f %10.1f %12.2f %12.2f %10.2f" % (
            r["label"], r["losses"][0], r["final_loss"], r["step_ms_median"],
            r["gpu_peak_bytes"] / gib, r["engine_device_bytes"] / gib,
            r["host_rss_peak_bytes"] / gib))

    checks = []
    torch_runs = [r for r in results if r["config"]["kind"] == "torch"]
    for formats in args.formats.split(","):
        runs = [r for r in results if r["config"]["kind"] == "tandem"
                and r["config"]["formats"] == formats]
        identical = all(r["loss_hex"] == runs[0]["loss_hex"] for r in runs)
        checks.append(("loss curves bit-identical across fractions (%s)" % formats,
                       identical))
        if torch_runs:
            ref = torch_runs[0]["final_loss"]
            rel = abs(runs[0]["final_loss"] - ref) / ref
            checks.append(("final loss within %.1f%% of torch (%s): %.3f%%"
                           % (100 * args.tolerance, formats, 100 * rel),
                           rel <= args.tolerance))
    print()
    for what, ok in checks:
        print("%s  %s" % ("PASS" if ok else "FAIL", what))
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"results": results,
                       "checks": [{"check": w, "pass": ok} for w, ok in checks],
                       "device": (torch.cuda.get_device_name(0) if args.device == "cuda"
                                  else "cpu"),
                       "torch": torch.__version__}, f, indent=1)
    return 0 if all(ok for _, ok in checks) else 1


if __name__ == "__main__":
    sys.exit(main())
