#!/usr/bin/env python3
"""Baseline: torch.optim.AdamW(fused=True) step time on the tensors of a Llama-3 model.

torch's fused AdamW keeps fp32 parameters, fp32 gradients and fp32 exp_avg/exp_avg_sq
(16 bytes held and 28 moved per parameter: grad read, param/m/v read and written), the
usual mixed-precision setup's master step. Tandem's kernels are compared on parameters
per second. Parameters are random (never zeros); the tensor list follows
bench/model_shapes.cc. When the whole model does not fit, the first layers that do are
stepped (the JSON says how many); params/s is what compares.

  python3 bench/torch_adamw.py --model llama3-8b --json out.json
"""
import argparse
import json
import statistics
import sys
import time

import torch

CONFIGS = {  # hidden, intermediate, layers, heads, kv_heads, head_dim, vocab, tied
    "llama3-1b": (2048, 8192, 16, 32, 8, 64, 128256, True),
    "llama3-3b": (3072, 8192, 28, 24, 8, 128, 128256, True),
    "llama3-8b": (4096, 14336, 32, 32, 8, 128, 128256, False),
    "llama3-70b": (8192, 28672, 80, 64, 8, 128, 128256, False),
}


def shapes(name, layers=None):
    h, inter, n_layers, heads, kv, hd, vocab, tied = CONFIGS[name]
    n_layers = n_layers if layers is None else min(layers, n_layers)
    out = [("model.embed_tokens.weight", vocab * h)]
    for layer in range(n_layers):
        p = f"model.layers.{layer}."
        out += [(p + "self_attn.q_proj.weight", heads * hd * h),
                (p + "self_attn.k_proj.weight", kv * hd * h),
                (p + "self_attn.v_proj.weight", kv * hd * h),
                (p + "self_attn.o_proj.weight", h * heads * hd),
                (p + "mlp.gate_proj.weight", inter * h),
                (p + "mlp.up_proj.weight", inter * h),
                (p + "mlp.down_proj.weight", h * inter),
                (p + "input_layernorm.weight", h),
                (p + "post_attention_layernorm.weight", h)]
    out.append(("model.norm.weight", h))
    if not tied:
        out.append(("lm_head.weight", vocab * h))
    return out


def run(model, layers, warmup, reps):
    sizes = [n for _, n in shapes(model, layers)]
    params = [torch.nn.Parameter(torch.randn(n, device="cuda") * 0.02) for n in sizes]
    for p in params:
        p.grad = torch.randn_like(p) * 1e-3
    opt = torch.optim.AdamW(params, lr=1e-4, weight_decay=0.01, fused=True)
    for _ in range(warmup):
        opt.step()
    torch.cuda.synchronize()
    times = []
    for _ in range(reps):
        a = torch.cuda.Event(enable_timing=True)
        b = torch.cuda.Event(enable_timing=True)
        a.record()
        opt.step()
        b.record()
        b.synchronize()
        times.append(a.elapsed_time(b))
    total = sum(sizes)
    ms = statistics.median(times)
    return {"model": model, "layers": layers if layers is not None else CONFIGS[model][2],
            "tensors": len(sizes), "params": total, "median_ms": ms,
            "Gparams_per_s": total / (ms * 1e-3) / 1e9,
            "bytes_per_param_moved": 28, "GBps": 28 * total / (ms * 1e-3) / 1e9}


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="llama3-8b", choices=sorted(CONFIGS))
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--reps", type=int, default=10)
    ap.add_argument("--json", help="write the result as JSON to this file")
    args = ap.parse_args()
    if not torch.cuda.is_available():
        print("torch_adamw: no CUDA device", file=sys.stderr)
        return 1
    layers = None
    while True:
        try:
            res = run(args.model, layers, args.warmup, args.reps)
            break
        except torch.cuda.OutOfMemoryError:
            import gc
            gc.collect()
            torch.cuda.empty_cache()
            full = CONFIGS[args.model][2]
            layers = (full if layers is None else layers) // 2
            print(f"torch_adamw: out of memory, retrying with {layers} layers", file=sys.stderr)
            if layers == 0:
                return 1
    res.update({"device": torch.cuda.get_device_name(), "torch": torch.__version__,
                "optimizer": "torch.optim.AdamW(fused=True), fp32 params/grads/exp_avg/exp_avg_sq",
                "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())})
    print(f"torch fused AdamW {res['model']} ({res['layers']} layers, {res['params']} params, "
          f"{res['tensors']} tensors): {res['median_ms']:.3f} ms, "
          f"{res['Gparams_per_s']:.1f} Gparam/s, {res['GBps']:.0f} GB/s at 28 B/param")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(res, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
