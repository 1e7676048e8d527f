#!/usr/bin/env python3
"""The planner's activation estimate for transformers models against the peak of one
training iteration, measured (docs/planner.md "Activations").

For each case (a transformers family built from a config: Llama, Mistral, Qwen2, Qwen3,
Gemma 2, Gemma 3, Mixtral, Qwen3-MoE; a size, a sequence, gradient checkpointing off or
with use_reentrant False or True) the script builds the model in bf16 on --device, runs
one training iteration (forward with labels, loss.backward(), the output held as a plain
loop holds it) under bench/activation_trace.py's op-by-op tracer, and asks tandem.plan
for the same module at the same sequence: the planner's activation bytes against the
traced peak of live tensor bytes less the parameters and their gradients.

On CUDA it also prints, per case, torch's own peak (torch.cuda.max_memory_allocated less
the parameters and the gradients; the traced peak does not see the kernels' workspaces),
the caching allocator's reserve at the peak, and the driver's figure (torch.cuda.
mem_get_info: the GPU's used bytes, the CUDA context included) against the plan's
activations + weights + gradients + runtime (MemoryBreakdown::runtime): what
kCudaContextBytes and kAllocatorFragmentation are calibrated from.

    PYTHONPATH=build/python python3 bench/activation_check.py                 # CPU, the doc table
    PYTHONPATH=build/python python3 bench/activation_check.py --device cuda \\
        --cases gpu --json bench/results/activation_check_h200.json            # on an H200
    PYTHONPATH=build/python python3 bench/activation_check.py --cases tiny     # seconds

Exit status 1 when a case's ratio planned / measured is outside [--under, --over].
"""
import argparse
import json
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import bench_args  # noqa: E402
from activation_trace import trace_iteration  # noqa: E402

# The shapes of each family, scaled down: h hidden, i MLP width, L layers, a / kv heads,
# d head_dim, V vocabulary; extra config fields per family.
FAMILIES = {
    "llama": ("LlamaConfig", "LlamaForCausalLM", {}),
    "mistral": ("MistralConfig", "MistralForCausalLM", {"sliding_window": 512}),
    "qwen2": ("Qwen2Config", "Qwen2ForCausalLM", {}),
    "qwen3": ("Qwen3Config", "Qwen3ForCausalLM", {}),
    "gemma2": ("Gemma2Config", "Gemma2ForCausalLM", {"query_pre_attn_scalar": 64}),
    "gemma3": ("Gemma3TextConfig", "Gemma3ForCausalLM",
               {"query_pre_attn_scalar": 64, "sliding_window": 256,
                "layer_types": None}),  # None: 5 sliding, 1 full, as Gemma 3 has them
    "mixtral": ("MixtralConfig", "MixtralForCausalLM",
                {"num_local_experts": 4, "num_experts_per_tok": 2}),
    "qwen3_moe": ("Qwen3MoeConfig", "Qwen3MoeForCausalLM",
                  {"num_experts": 8, "num_experts_per_tok": 2, "moe_intermediate_size": 256}),
}

CHECKPOINTING = ("none", "nonreentrant", "reentrant")


def case(family, h, i, L, a, kv, d, V, s, ckpt, batch=1):
    return {"family": family, "hidden": h, "intermediate": i, "layers": L, "heads": a,
            "kv_heads": kv, "head_dim": d, "vocab": V, "seq": s, "checkpointing": ckpt,
            "batch": batch}


def case_sets():
    """The named sets of cases: tiny (the CI test's, seconds on 2 cores), doc (the table
    of docs/planner.md, minutes on CPU), gpu (the doc's and larger, for an H200)."""
    tiny = [case(f, 128, 344, 2, 4, 2, 32, 2048, 256, c)
            for f in ("llama", "qwen2", "gemma3") for c in CHECKPOINTING]
    tiny += [case("gemma2", 128, 344, 2, 4, 2, 32, 2048, 256, c) for c in ("none", "reentrant")]
    doc = []
    for f, V in (("llama", 128256), ("qwen2", 151936), ("qwen3", 151936), ("mistral", 32768),
                 ("gemma2", 256000), ("gemma3", 262144)):
        for c in ("none", "nonreentrant"):
            doc.append(case(f, 512, 1536, 4, 8, 2, 64, V // 8, 1024, c))
    for c in CHECKPOINTING:
        doc.append(case("llama", 1024, 2816, 4, 16, 4, 64, 128256 // 4, 2048, c))
        doc.append(case("llama", 256, 688, 8, 4, 2, 64, 2048, 2048, c))
    for c in ("none", "nonreentrant"):
        doc.append(case("gemma2", 256, 1024, 2, 4, 2, 64, 2048, 2048, c))
        doc.append(case("mixtral", 256, 688, 2, 4, 2, 64, 32000, 1024, c))
        doc.append(case("qwen3_moe", 256, 688, 2, 4, 2, 64, 32000, 1024, c))
    doc.append(case("llama", 512, 1536, 4, 8, 2, 64, 16032, 1024, "nonreentrant", batch=4))
    # Small vocabularies: the peak in the layers' backward, not the loss's.
    for f in ("llama", "qwen3", "gemma3", "mixtral"):
        for c in ("none", "nonreentrant"):
            doc.append(case(f, 512, 1536, 4, 8, 2, 64, 512, 1024, c))
    gpu = doc + [case("llama", 4096, 14336, 2, 32, 8, 128, 128256, s, c)
                 for s in (2048, 4096) for c in ("none", "nonreentrant")]
    gpu += [case("qwen2", 3584, 18944, 2, 28, 4, 128, 152064, 4096, c)
            for c in ("none", "nonreentrant")]
    return {"tiny": tiny, "doc": doc, "gpu": gpu}


def build(c, device, dtype):
    """The transformers model of case `c` in `dtype` on `device`, training mode, with
    gradient checkpointing as the case says."""
    import torch
    import transformers
    config_name, model_name, extra = FAMILIES[c["family"]]
    fields = dict(hidden_size=c["hidden"], intermediate_size=c["intermediate"],
                  num_hidden_layers=c["layers"], num_attention_heads=c["heads"],
                  num_key_value_heads=c["kv_heads"], head_dim=c["head_dim"],
                  vocab_size=c["vocab"], max_position_embeddings=max(8192, c["seq"]))
    fields.update({k: v for k, v in extra.items() if v is not None})
    config = getattr(transformers, config_name)(**fields)
    with torch.device(device):
        model = getattr(transformers, model_name)(config)
    model = model.to(dtype)
    model.train()
    if c["checkpointing"] != "none":
        model.gradient_checkpointing_enable(
            gradient_checkpointing_kwargs={"use_reentrant": c["checkpointing"] == "reentrant"})
    return model


def planned(model, c):
    """The planner's activation bytes and runtime bytes for `model` at the case's
    sequence, and its weights + gradients, from tandem.plan on the live module."""
    import tandem
    options = {"seq": c["seq"], "batch": c["batch"]}
    if c["checkpointing"] != "none":
        options["recompute"] = "full"
    p = tandem.plan(model, gpu_mem="1000GiB", host_mem="1000GiB", **options)
    gpu = p.data["recommended"]["gpu_bytes"]
    return {"activations": p.data["activations"]["bytes"], "runtime": gpu["runtime"],
            "weights_and_grads": gpu["weights"] + gpu["gradients"],
            "peak_in": (p.data["activations"]["transformers"] or {}).get("peak_in")}


def run_case(c, device, seed=0):
    import torch
    torch.manual_seed(seed)
    model = build(c, device, torch.bfloat16)
    ids = torch.randint(0, c["vocab"], (c["batch"], c["seq"]), device=device)
    plan = planned(model, c)
    cuda = device.startswith("cuda")
    if cuda:
        torch.cuda.synchronize()
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats()
        base = torch.cuda.memory_allocated()
        free0, total = torch.cuda.mem_get_info()
    t0 = time.perf_counter()
    traced = trace_iteration(model, ids, ids)
    secs = time.perf_counter() - t0
    row = dict(c, measured=traced["activations"], planned=plan["activations"],
               ratio=plan["activations"] / traced["activations"], phase=traced["op"],
               planned_peak_in=plan["peak_in"], seconds=round(secs, 2))
    if cuda:
        # Run it again untraced: torch's and the driver's own peaks.
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
        out = model(input_ids=ids, labels=ids)
        out.loss.backward()
        torch.cuda.synchronize()
        used = total - torch.cuda.mem_get_info()[0]
        stats = torch.cuda.memory_stats()
        row.update(
            torch_peak=torch.cuda.max_memory_allocated() - base - traced["grads"],
            reserved_peak=stats["reserved_bytes.all.peak"],
            allocated_peak=stats["allocated_bytes.all.peak"],
            driver_used_after=used, driver_used_before=total - free0,
            planned_gpu=plan["activations"] + plan["weights_and_grads"] + plan["runtime"])
        del out
        model.zero_grad(set_to_none=True)
    return row


def table(rows):
    lines = ["| family | h | layers | V | seq | b | checkpointing | measured MiB | planned MiB "
             "| planned / measured | phase (planned) |",
             "| --- | ---: | ---: | ---: | ---: | ---: | --- | ---: | ---: | ---: | --- |"]
    for r in rows:
        lines.append("| %s | %d | %d | %d | %d | %d | %s | %.1f | %.1f | %.4f | %s |" % (
            r["family"], r["hidden"], r["layers"], r["vocab"], r["seq"], r["batch"],
            r["checkpointing"], r["measured"] / 2**20, r["planned"] / 2**20, r["ratio"],
            r["planned_peak_in"]))
    if any("torch_peak" in r for r in rows):
        lines += ["", "| family | seq | checkpointing | torch peak MiB | traced MiB | reserved "
                  "GiB | driver GiB | planned GPU GiB |", "| --- | ---: | --- | ---: | ---: "
                  "| ---: | ---: | ---: |"]
        for r in rows:
            lines.append("| %s | %d | %s | %.1f | %.1f | %.2f | %.2f | %.2f |" % (
                r["family"], r["seq"], r["checkpointing"], r["torch_peak"] / 2**20,
                r["measured"] / 2**20, r["reserved_peak"] / 2**30,
                r["driver_used_after"] / 2**30, r["planned_gpu"] / 2**30))
    return "\n".join(lines)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--device", default="cpu", help="cpu (default) or cuda")
    ap.add_argument("--cases", default="doc", choices=sorted(case_sets()))
    ap.add_argument("--families", help="only these families (comma-separated)")
    ap.add_argument("--under", type=float, default=0.99,
                    help="the lowest ratio planned / measured accepted (default 0.99)")
    ap.add_argument("--over", type=float, default=1.06,
                    help="the highest ratio planned / measured accepted (default 1.06)")
    ap.add_argument("--json", help="write the rows, the command, commit and date here")
    args = ap.parse_args(argv)
    cases = case_sets()[args.cases]
    if args.families:
        keep = set(args.families.split(","))
        cases = [c for c in cases if c["family"] in keep]
    rows = []
    for c in cases:
        row = run_case(c, args.device)
        rows.append(row)
        print("%-9s h %5d L %d V %6d s %5d b %d %-12s measured %9.1f MiB planned %9.1f MiB "
              "ratio %.4f  (%.1f s)" % (c["family"], c["hidden"], c["layers"], c["vocab"],
                                        c["seq"], c["batch"], c["checkpointing"],
                                        row["measured"] / 2**20, row["planned"] / 2**20,
                                        row["ratio"], row["seconds"]), flush=True)
    print()
    print(table(rows))
    bad = [r for r in rows if not args.under <= r["ratio"] <= args.over]
    if args.json:
        result = {"command": bench_args.command_line("activation_check.py",
                                                     sys.argv[1:] if argv is None else argv),
                  "commit": bench_args.git_commit(), "date": bench_args.utc_now(),
                  "device": args.device, "under": args.under, "over": args.over, "rows": rows}
        with open(args.json, "w") as f:
            json.dump(result, f, indent=2)
    if bad:
        print("\n%d case(s) outside [%g, %g]" % (len(bad), args.under, args.over))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
