"""Megatron-FSDP on CPU processes with gloo, for the tests of tandem.megatron_fsdp on
machines without a GPU. Test code only: nothing here is in the tandem package.

Megatron-FSDP allocates and synchronises on CUDA. Beyond cpu_smoke.py's redirection of
CUDA calls to the CPU (streams and events become no-ops, ``device="cuda"`` allocations go
to the CPU), it needs:

* ``torch.cuda.current_device()`` as an index (it formats ``cuda:{index}``);
* its device meshes on the CPU: Megatron-Core's adapter builds them with
  ``DeviceMesh.from_group(..., device_type="cuda")``;
* no fused divide in the gradient reduce-scatter: the default uses NCCL's PREMUL_SUM,
  which gloo lacks (the caller sets ``gradient_reduce_div_fusion=False`` in its
  DistributedDataParallelConfig: ``GLOO_DDP_CONFIG``);
* v2 (megatron_fsdp.experimental): a device on the stub stream and a no-op
  ``torch.cuda.device``;
* the standalone megatron-fsdp package: ``megatron.core`` hidden when it is installed
  beside it (megatron-fsdp 0.6.1 then imports megatron-core's
  DistributedDataParallelConfig, and megatron-core 0.16.1's lacks fields it passes: a
  TypeError); its users install one of the two.

With streams stubbed, CPU runs prove data flow, keys, shapes and numerics, never stream
ordering or overlap (tests/megatron/gpt_proof.py's GPU runs do, and
bench/megatron_fsdp_proof.sh).
"""

import contextlib
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import cpu_smoke  # noqa: E402

GLOO_DDP_CONFIG = dict(gradient_reduce_div_fusion=False)


def redirect(standalone=False):
    """Everything above but the DDP config; standalone hides megatron.core. Call before
    importing Megatron."""
    if standalone:
        sys.modules["megatron.core"] = None
    cpu_smoke.redirect_cuda_to_cpu()
    torch.cuda.current_device = lambda: 0
    torch.cuda.device = lambda *a, **k: contextlib.nullcontext()
    cpu_smoke._Stream.device = torch.device("cpu")
    from torch.distributed.device_mesh import DeviceMesh
    from_group = DeviceMesh.from_group

    def on_cpu(*args, **kwargs):
        kwargs["device_type"] = "cpu"
        return from_group(*args, **kwargs)

    DeviceMesh.from_group = staticmethod(on_cpu)


def patch_megatron():
    """cpu_smoke.patch_megatron: Megatron-Core's CUDA buffers and RNG tracker."""
    cpu_smoke.patch_megatron()
