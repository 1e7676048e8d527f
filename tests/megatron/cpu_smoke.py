"""gpt_proof.py on the CPU, for machines without a GPU: a smoke test of the integration.

Megatron-Core's DDP and DistributedOptimizer allocate with ``device="cuda"`` or
``torch.cuda.current_device()``, check ``param.type()`` for "torch.cuda.*" and touch
CUDA streams, events and RNG states. This script redirects those calls to the CPU (one
process, gloo) and then runs gpt_proof.main unchanged: the same model, Megatron's own
DistributedOptimizer around Megatron's and Tandem's inner optimizers (Tandem in host
mode), the loss comparisons and the distributed-checkpoint resumes. It proves the
adapter against Megatron's real code paths; it says nothing about GPU kernels, streams
or NCCL, which only gpt_proof.py on a GPU does.

  PYTHONPATH=build/python python tests/megatron/cpu_smoke.py --steps 4 --resume-at 2 \\
      --layers 1 --hidden 64 --heads 4 --vocab 256 --seq 32 --micro-batch 2 --out x.json
"""

import contextlib
import functools
import os
import sys

import torch


class _Stream:
    cuda_stream = 0

    def __init__(self, *args, **kwargs):
        pass

    def wait_stream(self, *args):
        pass

    def synchronize(self):
        pass

    def record_event(self, *args):
        return _Event()

    def wait_event(self, *args):
        pass

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


class _Event:
    def __init__(self, *args, **kwargs):
        pass

    def record(self, *args):
        pass

    def synchronize(self):
        pass

    def wait(self, *args):
        pass

    def query(self):
        return True


def _cpu(device):
    """'cpu' for anything that names a CUDA device (a str, torch.device or index)."""
    if isinstance(device, bool) or device is None:
        return device
    if isinstance(device, int) or str(device).startswith("cuda"):
        return "cpu"
    return device


def redirect_cuda_to_cpu():
    cuda = torch.cuda
    cuda.current_device = lambda: "cpu"
    cuda.set_device = lambda *a, **k: None
    cuda.synchronize = lambda *a, **k: None
    cuda.is_available = lambda: True
    cuda.device_count = lambda: 1
    cuda.empty_cache = lambda: None
    cuda.get_device_name = lambda *a, **k: "CPU (cpu_smoke.py)"
    cuda.current_stream = lambda *a, **k: _Stream()
    cuda.default_stream = lambda *a, **k: _Stream()
    cuda.Stream = _Stream
    cuda.Event = _Event
    cuda.stream = lambda *a, **k: contextlib.nullcontext()
    cuda.is_current_stream_capturing = lambda: False
    cuda.nvtx.range_push = lambda *a, **k: None
    cuda.nvtx.range_pop = lambda *a, **k: None
    cuda.get_rng_state = lambda *a, **k: torch.get_rng_state()
    cuda.set_rng_state = lambda *a, **k: None
    cuda.manual_seed = lambda *a, **k: None
    cuda.memory_allocated = lambda *a, **k: 0
    cuda.max_memory_allocated = lambda *a, **k: 0
    cuda.reset_peak_memory_stats = lambda *a, **k: None
    for name in ("tensor", "zeros", "empty", "ones", "full", "arange", "zeros_like",
                 "empty_like", "ones_like", "randn", "rand"):
        factory = getattr(torch, name)

        def on_cpu(*args, _factory=factory, **kwargs):
            if "device" in kwargs:
                kwargs["device"] = _cpu(kwargs["device"])
            return _factory(*args, **kwargs)

        setattr(torch, name, functools.wraps(factory)(on_cpu))
    to = torch.Tensor.to

    def tensor_to(self, *args, **kwargs):
        args = tuple(_cpu(a) if isinstance(a, (str, int, torch.device)) else a for a in args)
        if "device" in kwargs:
            kwargs["device"] = _cpu(kwargs["device"])
        return to(self, *args, **kwargs)

    torch.Tensor.to = tensor_to
    torch.Tensor.cuda = lambda self, *a, **k: self
    torch.nn.Module.cuda = lambda self, *a, **k: self
    tensor_type = torch.Tensor.type

    def cuda_type(self, *args, **kwargs):  # Megatron checks "torch.cuda.BFloat16Tensor"
        if args or kwargs:
            return tensor_type(self, *args, **kwargs)
        t = tensor_type(self)
        return t if t.startswith("torch.cuda.") else t.replace("torch.", "torch.cuda.", 1)

    torch.Tensor.type = cuda_type


def patch_megatron():
    from megatron.core import utils
    from megatron.core.tensor_parallel import random as tp_random

    def cpu_buffer(self, tensor_shape, dtype, name, mem_alloc_context=None):
        return torch.empty(tuple(tensor_shape), dtype=dtype)

    utils.GlobalMemoryBuffer.get_tensor = cpu_buffer
    tp_random.get_cuda_rng_tracker().fork = lambda *a, **k: contextlib.nullcontext()
    tp_random.model_parallel_cuda_manual_seed = lambda *a, **k: None


def main():
    redirect_cuda_to_cpu()
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import gpt_proof
    import torch.distributed as dist

    def init_distributed(dry_run):
        from megatron.core import parallel_state
        os.environ.update(RANK="0", WORLD_SIZE="1", LOCAL_RANK="0",
                          MASTER_ADDR="127.0.0.1")
        os.environ.setdefault("MASTER_PORT", "29547")
        dist.init_process_group("gloo")
        parallel_state.initialize_model_parallel(1, 1)
        patch_megatron()
        return 0, 1

    gpt_proof.init_distributed = init_distributed
    gpt_proof.cuda_device = lambda: torch.device("cpu")
    args = gpt_proof.parse_args()
    try:
        return gpt_proof.main(args)
    finally:
        if dist.is_initialized():
            dist.destroy_process_group()


if __name__ == "__main__":  # dist_checkpointing's writer spawns a process that imports us
    sys.exit(main())
