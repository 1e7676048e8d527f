"""What a calibration profile needs that only Python can measure, each written into the
profile: the binding's part of the fixed step cost (``step_overhead.binding``: what
tandem.torch's ``step()`` adds around the engine's Step; Note [Fixed step cost] in
tandem/planner/profile.h) and the GPU's training throughput (``gpu.train_tflops``,
docs/planner.md "Iteration")::

    import tandem
    tandem.calibrate_binding("profile.json")   # on the machine that trains
    tandem.calibrate_training("profile.json", model="llama3-70b", layers=2, seq=4096)
"""

import json
import os
import statistics
import time

__all__ = ["measure_binding_overhead", "calibrate_binding", "measure_training_throughput",
           "calibrate_training"]

# As tandem-bench calibrate (tools/bench/calibrate.cc): tiny tensors of 256 bf16
# elements, AdamW bf16+ecc8/q8/q8, every element offloaded and streamed.
_NUMEL = 256
TENSORS = (16, 512)


def _device(device):
    """torch.device(device); None: CUDA when available, else the CPU."""
    import torch
    if device is None:
        device = "cuda" if torch.cuda.is_available() else "cpu"
    return torch.device(device)


def _step_ms(n, device, steps):
    """Median over `steps` of step()'s host time less the engine's Step (ms), over `n`
    tiny tensors; GPU work is waited for between steps, outside the timing."""
    import torch
    import tandem.torch
    named = []
    for i in range(n):
        p = torch.nn.Parameter(torch.full((_NUMEL,), 0.01, dtype=torch.bfloat16,
                                          device=device))
        p.grad = torch.full_like(p, 1e-3)
        named.append(("t%d" % i, p))
    opt = tandem.torch.AdamW(named, lr=1e-5, weight_decay=0.01, offload_fraction=1.0,
                             master="bf16+ecc8", momentum="q8", variance="q8",
                             offload_compute=1.0)
    params = [p for _, p in named]
    cuda = device.type == "cuda"
    times = []
    for i in range(steps + 2):
        with torch.no_grad():
            for p in params:
                p.grad.mul_(1.0)  # a new gradient, in the engine's buffer
        if cuda:
            torch.cuda.synchronize(device)
        t0 = time.perf_counter()
        opt.step()
        wall = (time.perf_counter() - t0) * 1e3
        engine = opt.last_step_times()["step_ms"]
        if cuda:
            torch.cuda.synchronize(device)
        if i >= 2:
            times.append(wall - engine)
    del opt, params, named
    return statistics.median(times)


def measure_binding_overhead(device=None, tensors=TENSORS, steps=50):
    """The binding's fixed step cost on `device` (None: CUDA when available, else the
    CPU): ``{"per_step_ms", "per_tensor_us"}``, the line through the median costs at the
    two tensor counts (negative parts clamp to 0, as tandem-bench calibrate's)."""
    device = _device(device)
    few, many = tensors
    if not 0 < few < many:
        raise ValueError("tensors must be two counts, fewer first, got %r" % (tensors,))
    few_ms = _step_ms(few, device, steps)
    many_ms = _step_ms(many, device, steps)
    per_tensor_us = max(0.0, 1e3 * (many_ms - few_ms) / (many - few))
    per_step_ms = max(0.0, few_ms - per_tensor_us * 1e-3 * few)
    return {"per_step_ms": per_step_ms, "per_tensor_us": per_tensor_us}


def calibrate_binding(profile, device=None, tensors=TENSORS, steps=50):
    """Writes measure_binding_overhead's figures into the calibration profile file
    `profile` as ``step_overhead.binding`` (every other field kept; the file replaced
    atomically) and returns them. Raises ValueError naming the file when it is not a
    profile's JSON object, OSError when it cannot be read or written."""
    path = os.fspath(profile)
    data = _read_profile(path)
    figures = measure_binding_overhead(device, tensors, steps)
    if not isinstance(data.get("step_overhead"), dict):
        data["step_overhead"] = {}
    data["step_overhead"]["binding"] = figures
    _write_profile(path, data)
    return figures


def _read_profile(path):
    """The JSON object of the profile file `path`; ValueError naming it otherwise."""
    with open(path) as fh:
        try:
            data = json.load(fh)
        except ValueError as e:
            raise ValueError("%s: not valid JSON (%s)" % (path, e)) from e
    if not isinstance(data, dict) or "schema" not in data:
        raise ValueError("%s: not a calibration profile (no 'schema' field)" % path)
    return data


def _write_profile(path, data):
    """Replaces the profile file `path` with `data`, atomically."""
    tmp = path + ".tmp"
    with open(tmp, "w") as fh:
        json.dump(data, fh, indent=2)
        fh.write("\n")
    os.replace(tmp, path)


# ---------------------------------------------------------------------------------------
# Training throughput (gpu.train_tflops): docs/planner.md "Iteration".

# The Llama-3 shapes of tandem-plan's presets, as Hugging Face config fields.
LLAMA3 = {
    name: dict(hidden_size=h, intermediate_size=inter, num_hidden_layers=layers,
               num_attention_heads=heads, tie_word_embeddings=tied,
               architectures=["LlamaForCausalLM"], model_type="llama", vocab_size=128256,
               num_key_value_heads=8)
    for name, h, inter, layers, heads, tied in (
        ("llama3-1b", 2048, 8192, 16, 32, True), ("llama3-3b", 3072, 8192, 28, 24, True),
        ("llama3-8b", 4096, 14336, 32, 32, False), ("llama3-70b", 8192, 28672, 80, 64, False),
        ("llama3-405b", 16384, 53248, 126, 128, False))
}


def llama_config(model):
    """A Llama config dict: a preset name of LLAMA3, a config.json path (or directory), or
    a dict of its fields (hidden_size, intermediate_size, num_hidden_layers,
    num_attention_heads, num_key_value_heads, vocab_size, tie_word_embeddings)."""
    if isinstance(model, dict):
        return dict(model)
    if isinstance(model, str) and model in LLAMA3:
        return dict(LLAMA3[model])
    path = os.fspath(model)
    if os.path.isdir(path):
        path = os.path.join(path, "config.json")
    with open(path) as fh:
        return json.load(fh)


def _decoder(config, layers):
    """A Llama decoder of `config`'s shape with `layers` layers, each checkpointed when
    forward is asked to recompute: what a training step computes, for timing only (no
    rotary embedding: it costs no matmul)."""
    import torch
    import torch.nn.functional as F
    from torch.utils.checkpoint import checkpoint

    h = config["hidden_size"]
    heads = config["num_attention_heads"]
    kv = config.get("num_key_value_heads", heads)
    head_dim = config.get("head_dim", h // heads)
    inter = config["intermediate_size"]

    class Layer(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.n1, self.n2 = torch.nn.RMSNorm(h), torch.nn.RMSNorm(h)
            self.q = torch.nn.Linear(h, heads * head_dim, bias=False)
            self.kv = torch.nn.Linear(h, 2 * kv * head_dim, bias=False)
            self.o = torch.nn.Linear(heads * head_dim, h, bias=False)
            self.gate_up = torch.nn.Linear(h, 2 * inter, bias=False)
            self.down = torch.nn.Linear(inter, h, bias=False)

        def block(self, x):
            b, t, _ = x.shape
            y = self.n1(x)
            q = self.q(y).view(b, t, heads, head_dim).transpose(1, 2)
            k, v = self.kv(y).view(b, t, 2 * kv, head_dim).transpose(1, 2).chunk(2, dim=1)
            a = F.scaled_dot_product_attention(q, k, v, is_causal=True,
                                               enable_gqa=kv != heads)
            x = x + self.o(a.transpose(1, 2).reshape(b, t, heads * head_dim))
            gate, up = self.gate_up(self.n2(x)).chunk(2, dim=-1)
            return x + self.down(F.silu(gate) * up)

        def forward(self, x, recompute):
            if recompute:
                return checkpoint(self.block, x, use_reentrant=False)
            return self.block(x)

    class Decoder(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.embed = torch.nn.Embedding(config["vocab_size"], h)
            self.layers = torch.nn.ModuleList(Layer() for _ in range(layers))
            self.norm = torch.nn.RMSNorm(h)
            self.head = torch.nn.Linear(h, config["vocab_size"], bias=False)

        def forward(self, ids, recompute):
            x = self.embed(ids)
            for layer in self.layers:
                x = layer(x, recompute)
            return self.head(self.norm(x))

    return Decoder()


def measure_training_throughput(model="llama3-8b", layers=2, seq=2048, batch=1,
                                recompute="full", steps=5, device=None, dtype=None):
    """The training throughput of this GPU on `model`'s shapes cut to `layers` layers: the
    median forward + backward (a cross-entropy loss over random tokens; no optimizer) of
    `steps` after one warm-up, and the hardware FLOPs the planner counts for it
    (tandem.plan's ``training.hardware_flops``, recomputation counted as work). Returns
    ``{"train_tflops", "ms", "hardware_flops", "layers", "seq", "batch", "recompute"}``.
    `recompute`: "full" (each layer checkpointed) or "none". `device`: None: CUDA when
    available, else the CPU; `dtype`: None: bf16 on CUDA, f32 on the CPU."""
    import torch
    import torch.nn.functional as F
    from tandem.planner._plan import plan

    if not (hasattr(torch.nn, "RMSNorm") and hasattr(F, "scaled_dot_product_attention")):
        raise RuntimeError("calibrate_training needs torch >= 2.5 (torch.nn.RMSNorm, "
                           "scaled_dot_product_attention with enable_gqa); this is torch %s"
                           % torch.__version__)
    if recompute not in ("full", "none"):
        raise ValueError('recompute must be "full" or "none", got %r' % (recompute,))
    if not all(isinstance(n, int) and n >= 1 for n in (layers, seq, batch, steps)):
        raise ValueError("layers, seq, batch and steps must be integers >= 1, got %r"
                         % ((layers, seq, batch, steps),))
    config = llama_config(model)
    config["num_hidden_layers"] = layers
    device = _device(device)
    cuda = device.type == "cuda"
    if dtype is None:
        dtype = torch.bfloat16 if cuda else torch.float32
    flops = plan(config, gpu_mem="1000TB", host_mem="1000TB", seq=seq, batch=batch,
                 recompute=recompute).data["training"]["hardware_flops"]
    torch.manual_seed(0)
    net = _decoder(config, layers).to(device=device, dtype=dtype)
    ids = torch.randint(0, config["vocab_size"], (batch, seq + 1), device=device)
    times = []
    for i in range(steps + 1):
        if cuda:
            torch.cuda.synchronize(device)
        t0 = time.perf_counter()
        logits = net(ids[:, :-1], recompute == "full")
        F.cross_entropy(logits.float().flatten(0, 1), ids[:, 1:].flatten()).backward()
        if cuda:
            torch.cuda.synchronize(device)
        if i > 0:
            times.append((time.perf_counter() - t0) * 1e3)
        net.zero_grad(set_to_none=True)
    ms = statistics.median(times)
    return {"train_tflops": flops / (ms * 1e-3) / 1e12, "ms": ms, "hardware_flops": flops,
            "layers": layers, "seq": seq, "batch": batch, "recompute": recompute}


def calibrate_training(profile, model="llama3-8b", layers=2, seq=2048, batch=1,
                       recompute="full", steps=5, device=None, peak_tflops=None):
    """Writes measure_training_throughput's ``train_tflops`` (and, given, `peak_tflops`:
    the GPU's dense bf16 peak for the plan's MFU) into the calibration profile file
    `profile` under ``gpu`` (every other field kept; the file replaced atomically) and
    returns the measurement. Raises ValueError and OSError as calibrate_binding, and
    RuntimeError with a torch older than 2.5; the file is unchanged on any error."""
    path = os.fspath(profile)
    data = _read_profile(path)
    if peak_tflops is not None and (isinstance(peak_tflops, bool) or not (
            isinstance(peak_tflops, (int, float)) and peak_tflops > 0)):
        raise ValueError("peak_tflops must be a number > 0, got %r" % (peak_tflops,))
    result = measure_training_throughput(model, layers, seq, batch, recompute, steps, device)
    gpu = data.setdefault("gpu", {})
    gpu["train_tflops"] = result["train_tflops"]
    if peak_tflops is not None:
        gpu["peak_tflops"] = float(peak_tflops)
    _write_profile(path, data)
    return result
