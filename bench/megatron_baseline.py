#!/usr/bin/env python3
"""A baseline that does what Megatron-Core's HybridDeviceOptimizer does, in PyTorch.

The hot tensors keep fp32 master weights and fp32 moments on the GPU and are stepped by
torch.optim.AdamW(fused=True); the offloaded tensors keep fp32 master weights and moments
on the host and are stepped by torch's fused CPU AdamW, with per-tensor copies: each bf16
gradient goes down into a pinned buffer on a side stream, is widened into the fp32
master's .grad, and after the CPU step each updated master goes back up as bf16 into the
GPU parameter. The GPU step is queued first so that it overlaps the host work, as in
Megatron. Placement matches Tandem's backward_order: the last tensors are offloaded until
the fraction (in elements) is met, the cut tensor split at a 32-element boundary.

Prints a table and writes JSON (--json). Same Llama-3 shapes as tandem-bench-hybrid.
"""
import argparse
import json
import statistics
import time

import torch


def llama_shapes(name):
    cfg = {
        "llama3-1b": (2048, 8192, 16, 32, 8, True),
        "llama3-3b": (3072, 8192, 28, 24, 8, True),
        "llama3-8b": (4096, 14336, 32, 32, 8, False),
    }[name]
    h, inter, layers, heads, kv, tied = cfg
    vocab, hd = 128256, h // heads
    shapes = [("model.embed_tokens.weight", vocab * h)]
    for i in range(layers):
        p = f"model.layers.{i}."
        shapes += [(p + "self_attn.q_proj.weight", h * h),
                   (p + "self_attn.k_proj.weight", kv * hd * h),
                   (p + "self_attn.v_proj.weight", kv * hd * h),
                   (p + "self_attn.o_proj.weight", h * h),
                   (p + "mlp.gate_proj.weight", inter * h),
                   (p + "mlp.up_proj.weight", inter * h),
                   (p + "mlp.down_proj.weight", inter * h),
                   (p + "input_layernorm.weight", h),
                   (p + "post_attention_layernorm.weight", h)]
    shapes.append(("model.norm.weight", h))
    if not tied:
        shapes.append(("lm_head.weight", vocab * h))
    return shapes


def split(shapes, fraction):
    """Per tensor: number of elements kept on the GPU (prefix), backward order offload."""
    total = sum(n for _, n in shapes)
    need = round(fraction * total) if fraction < 1 else total
    keep = [n for _, n in shapes]
    for i in reversed(range(len(shapes))):
        if need == 0:
            break
        n = shapes[i][1]
        if n <= need:
            keep[i] = 0
            need -= n
        else:
            keep[i] = min(n, (n - need + 16) // 32 * 32)
            need = 0
    return keep


class Baseline:
    def __init__(self, shapes, fraction, threads):
        dev = torch.device("cuda")
        self.params, self.grads = [], []
        gpu_master, cpu_master = [], []
        self.gpu_parts, self.cpu_parts = [], []
        keep = split(shapes, fraction)
        for (name, n), k in zip(shapes, keep):
            p = (torch.randn(n, device=dev) * 0.02).to(torch.bfloat16)
            g = (torch.randn(n, device=dev) * 1e-3).to(torch.bfloat16)
            self.params.append(p)
            self.grads.append(g)
            if k > 0:
                m = p[:k].float().requires_grad_(False)
                m.grad = torch.empty_like(m)
                gpu_master.append(m)
                self.gpu_parts.append((p[:k], g[:k], m))
            if k < n:
                m = p[k:].float().cpu().pin_memory()
                m.grad = torch.empty_like(m)
                down = torch.empty(n - k, dtype=torch.bfloat16).pin_memory()
                up = torch.empty(n - k, dtype=torch.bfloat16).pin_memory()
                cpu_master.append(m)
                self.cpu_parts.append((p[k:], g[k:], m, down, up))
        self.gpu_opt = torch.optim.AdamW(gpu_master, lr=1e-5, weight_decay=0.01, fused=True) \
            if gpu_master else None
        self.cpu_opt = torch.optim.AdamW(cpu_master, lr=1e-5, weight_decay=0.01, fused=True) \
            if cpu_master else None
        self.side = torch.cuda.Stream()
        torch.set_num_threads(threads)

    def step(self):
        # GPU part, queued first so it overlaps the host work.
        for p, g, m in self.gpu_parts:
            m.grad.copy_(g)
        if self.gpu_opt:
            self.gpu_opt.step()
        for p, g, m in self.gpu_parts:
            p.copy_(m)
        # Host part: per-tensor D2H, fused CPU AdamW on fp32 state, per-tensor H2D.
        if self.cpu_opt:
            self.side.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(self.side):
                for p, g, m, down, up in self.cpu_parts:
                    down.copy_(g, non_blocking=True)
            self.side.synchronize()
            for p, g, m, down, up in self.cpu_parts:
                m.grad.copy_(down)
            self.cpu_opt.step()
            with torch.cuda.stream(self.side):
                for p, g, m, down, up in self.cpu_parts:
                    up.copy_(m)
                    p.copy_(up, non_blocking=True)
            torch.cuda.current_stream().wait_stream(self.side)
        torch.cuda.synchronize()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--models", nargs="+", default=["llama3-1b"])
    ap.add_argument("--fractions", nargs="+", type=float, default=[0.5])
    ap.add_argument("--steps", type=int, default=5)
    ap.add_argument("--threads", type=int, default=torch.get_num_threads())
    ap.add_argument("--json")
    a = ap.parse_args()
    out = []
    print(f"{'model':10s} {'frac':>5s} {'step ms':>9s}  (torch {torch.__version__}, "
          f"{a.threads} CPU threads)")
    for name in a.models:
        shapes = llama_shapes(name)
        for f in a.fractions:
            b = Baseline(shapes, f, a.threads)
            times = []
            for i in range(a.steps + 2):
                t0 = time.perf_counter()
                b.step()
                if i >= 2:
                    times.append((time.perf_counter() - t0) * 1e3)
            ms = statistics.median(times)
            print(f"{name:10s} {f:5.3f} {ms:9.2f}", flush=True)
            out.append({"model": name, "fraction": f, "step_ms": ms, "threads": a.threads,
                        "torch": torch.__version__, "baseline": "megatron-like hybrid"})
            del b
            torch.cuda.empty_cache()
    if a.json:
        with open(a.json, "w") as fh:
            json.dump(out, fh, indent=2)


if __name__ == "__main__":
    main()
