"""The binding's declared-once surfaces: OptimizerConfig and StepOptions (defaults and
checks in C++), one exception class per engine error kind (each also the built-in
exception that kind raised before), the state-array table, and the Python package's
shape (one warning class per concept; test_package_boundaries.py holds its layers, import
cycles and file sizes)."""

import pytest
import torch

import tandem
import tandem.megatron
import tandem.torch
from tandem import _C
from helpers import batches, make_mlp, train


# ---- OptimizerConfig and StepOptions ---------------------------------------------------

def test_config_defaults_are_the_engines():
    cfg = _C.OptimizerConfig()
    assert cfg.offload_fraction == 0.0 and cfg.placement == "backward_order"
    assert cfg.chunk_elements == 1 << 21 and cfg.pipeline_slots == 4
    assert cfg.offload_compute == "auto" and cfg.machine_rates is None
    assert cfg.stream_chunk_bytes == 32 << 20 and cfg.stream_slots == 3
    assert cfg.device_allocator is None
    assert cfg.speculative_stream_bytes == 1 << 30 and cfg.speculative_early_start is False
    assert (cfg.master, cfg.momentum, cfg.variance) == ("f32", "f32", "f32")
    assert list(_C.OptimizerConfig.fields())[:3] == ["algorithm", "groups", "master"]
    assert "offload_fraction=0.5" in repr(_C.OptimizerConfig(offload_fraction=0.5))
    step = _C.StepOptions()
    assert step.max_grad_norm == 0.0 and step.loss_scale == 1.0


@pytest.mark.parametrize("field, value, match", [
    ("offload_fraction", 1.5, r"offload_fraction must be a number in \[0, 1\], got 1\.5"),
    ("offload_fraction", "0.5", r"offload_fraction.*'0\.5'"),
    ("offload_fraction", True, r"offload_fraction.*True"),
    ("chunk_elements", 33, r"chunk_elements must be a positive multiple of 32, got 33"),
    ("chunk_elements", 64.0, r"chunk_elements.*64\.0"),
    ("pipeline_slots", 1, r"pipeline_slots must be an integer >= 2, got 1"),
    ("host_threads", -1, r"host_threads must be an integer in \[0, \d+\]"),
    ("offload_compute", "half", r'offload_compute must be "auto", "host", "gpu" or a share'),
    ("machine_rates", {"h2d_gbps": 1}, r"machine_rates must be None or a dict"),
    ("stream_slots", 1, r"stream_slots must be an integer >= 2"),
    ("master", "bf17", r"bf17"),
    ("host_cpus", [0, 0], r"host_cpus must be a list of CPU ids"),
    ("speculative_early_start", 1, r"speculative_early_start must be a bool"),
])
def test_config_fields_are_checked_in_cpp(field, value, match):
    with pytest.raises(tandem.InvalidArgumentError, match=match):
        _C.OptimizerConfig(**{field: value})
    cfg = _C.OptimizerConfig()
    with pytest.raises(ValueError, match=match):
        setattr(cfg, field, value)


def test_unknown_fields_are_type_errors():
    with pytest.raises(TypeError, match="unexpected keyword argument 'offload_fractoin'"):
        _C.OptimizerConfig(offload_fractoin=0.5)
    with pytest.raises(TypeError, match="unexpected keyword argument 'clip'"):
        _C.StepOptions(clip=1.0)
    with pytest.raises(TypeError, match="offload_fractoin"):
        tandem.torch.AdamW(make_mlp().parameters(), offload_fractoin=0.5)
    with pytest.raises(TypeError, match="'mode' .*the optimizer sets it"):
        tandem.torch.AdamW(make_mlp().parameters(), mode="gpu")


def test_step_options_are_checked():
    with pytest.raises(ValueError, match=r"max_grad_norm must be finite and >= 0, got -1\.0"):
        _C.StepOptions(max_grad_norm=-1.0)
    with pytest.raises(ValueError, match=r"loss_scale must be finite and > 0, got 0\.0"):
        _C.StepOptions(loss_scale=0.0)
    model = make_mlp()
    opt = tandem.torch.AdamW(model.parameters())
    train(model, opt, batches(1))
    with pytest.raises(ValueError, match="loss_scale"):
        opt.step(loss_scale=float("inf"))


def test_front_ends_pass_engine_options_through():
    model = make_mlp()
    opt = tandem.torch.AdamW(model.parameters(), offload_fraction=0.5, stream_slots=4,
                             chunk_elements=64, offload_compute="host")
    assert opt._core.config.stream_slots == 4 and opt.placement()["offloaded"] > 0
    shards = [torch.randn(64).bfloat16()]
    mega = tandem.megatron.TandemAdam([{"params": shards}], offload_fraction=0.5,
                                      stream_slots=4, chunk_elements=64)
    assert mega._config.stream_slots == 4 and mega.offload_fraction == 0.5


# ---- exception classes -----------------------------------------------------------------

KINDS = [
    ("InvalidArgumentError", "invalid argument", (ValueError,)),
    ("CheckpointCorruptError", "corruption", (RuntimeError, ValueError)),
    ("CheckpointIOError", "I/O", (RuntimeError,)),
    ("CudaError", "CUDA", (RuntimeError,)),
    ("OutOfMemoryError", "out of memory", (MemoryError,)),
    ("UnsupportedError", "unsupported", (RuntimeError,)),
    ("InternalError", "internal", (RuntimeError,)),
]


@pytest.mark.parametrize("name, kind, builtins", KINDS, ids=[k[0] for k in KINDS])
def test_one_class_per_error_kind(name, kind, builtins):
    cls = getattr(tandem, name)
    assert cls is getattr(_C, name) and cls.__module__ == "tandem"
    assert issubclass(cls, tandem.Error) and all(issubclass(cls, b) for b in builtins)
    del kind


def test_engine_errors_raise_their_kind(tmp_path):
    with pytest.raises(tandem.InvalidArgumentError) as caught:
        _C.OptimizerConfig(pipeline_slots=0)
    assert caught.value.kind == "invalid argument"
    if not _C.has_checkpoint:
        return
    model = make_mlp()
    opt = tandem.torch.AdamW(model.parameters(), lr=1e-2)
    train(model, opt, batches(1))
    path = tmp_path / "a.tckpt"
    opt.save_checkpoint(path)
    with pytest.raises(tandem.CheckpointIOError) as caught:
        opt.load_checkpoint(tmp_path / "missing.tckpt")
    assert caught.value.kind == "I/O error" and isinstance(caught.value, RuntimeError)
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0x40
    path.write_bytes(bytes(data))
    with pytest.raises(tandem.CheckpointCorruptError) as caught:
        opt.load_checkpoint(path)
    assert caught.value.kind == "corruption"


def test_over_budget_is_an_out_of_memory_error():
    with pytest.raises(tandem.OutOfMemoryError):
        tandem.torch.AdamW(make_mlp().parameters(), offload_fraction=1.0, pinned_budget=64)


# ---- the state-array table -------------------------------------------------------------

def test_state_arrays_come_from_one_table():
    table = _C.state_arrays()
    names = [a["name"] for a in table]
    assert len(names) == 10 and len(set(names)) == 10
    assert [a["section_id"] for a in table] == list(range(1, 11))
    model = make_mlp()
    opt = tandem.torch.AdamW(model.parameters(), master_format="bf16+ecc8",
                             momentum_format="q8", variance_format="q8")
    train(model, opt, batches(1))
    snapshot = opt._core.engine.snapshot()["tensors"][0]
    by_name = {a["name"]: a for a in table}
    arrays = [k for k in snapshot if k in by_name]
    assert sorted(arrays) == sorted(["master_bf16", "ecc8", "m_codes", "m_scales",
                                     "v_codes", "v_scales"])
    for name in arrays:
        assert str(snapshot[name].dtype) == by_name[name]["dtype"]
        assert snapshot[name].itemsize == by_name[name]["element_size"]
    state = opt.state_dict()["state"][0]
    assert state["master_bf16"].dtype == torch.bfloat16 and by_name["master_bf16"]["bf16"]
    assert _C.QUANT_GROUP == 32


# ---- the package's shape ---------------------------------------------------------------

def test_one_warning_class_per_concept():
    assert tandem.megatron.SkippedStepWarning is tandem.torch.SkippedStepWarning
    assert issubclass(tandem.torch.RebindWarning, tandem.torch.TandemWarning)
