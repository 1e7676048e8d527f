"""One node, many ranks: host_cpus= and pinned_budget= of tandem.torch, with torchrun's
LOCAL_RANK / LOCAL_WORLD_SIZE set by monkeypatch (docs/node_sharing.md)."""

import os

import pytest
import torch

import tandem.torch
from tandem import _C
from helpers import batches, make_mlp, params_bits, same_bits, train

_FIRST_CPU = min(os.sched_getaffinity(0))


def build(monkeypatch, rank, world, **options):
    if world is None:
        monkeypatch.delenv("LOCAL_RANK", raising=False)
        monkeypatch.delenv("LOCAL_WORLD_SIZE", raising=False)
    else:
        monkeypatch.setenv("LOCAL_RANK", str(rank))
        monkeypatch.setenv("LOCAL_WORLD_SIZE", str(world))
    model = make_mlp()
    return model, tandem.torch.AdamW(model.parameters(), lr=1e-3, offload_fraction=0.5,
                                     chunk_elements=64, **options)


def test_two_ranks_get_disjoint_cpus_and_budgets_within_the_node(monkeypatch):
    monkeypatch.setenv("TANDEM_NODE_PINNED_BUDGET", "1GiB")
    _, r0 = build(monkeypatch, 0, 2)
    _, r1 = build(monkeypatch, 1, 2)
    cpus = sorted(os.sched_getaffinity(0))
    for opt in (r0, r1):
        assert opt.host_cpus, "auto restricts each rank under torchrun"
        assert set(opt.host_cpus) <= set(cpus)
    if len(cpus) >= 2:
        assert not set(r0.host_cpus) & set(r1.host_cpus)
        assert set(r0.host_cpus) | set(r1.host_cpus) == set(cpus)
    budgets = [opt.memory()["host_budget"] for opt in (r0, r1)]
    assert budgets == [(1 << 30) // 2] * 2
    assert sum(budgets) <= _C.node_pinned_budget()


def test_auto_budget_defaults_to_half_of_memtotal_shared(monkeypatch):
    monkeypatch.delenv("TANDEM_NODE_PINNED_BUDGET", raising=False)
    _, r0 = build(monkeypatch, 0, 4)
    node = _C.node_pinned_budget()
    assert node > 0
    assert r0.memory()["host_budget"] == node // 4


def test_a_single_rank_is_unrestricted_by_default(monkeypatch):
    _, opt = build(monkeypatch, 0, None)
    assert opt.host_cpus == ()
    assert opt.memory()["host_budget"] == 0
    _, one = build(monkeypatch, 0, 1)
    assert one.host_cpus == ()
    assert one.memory()["host_budget"] == 0


def test_explicit_values_override_auto(monkeypatch):
    cpu = max(os.sched_getaffinity(0))
    _, opt = build(monkeypatch, 1, 2, host_cpus=[cpu], pinned_budget="64MiB")
    assert opt.host_cpus == (cpu,)
    assert opt.memory()["host_budget"] == 64 << 20
    _, free = build(monkeypatch, 1, 2, host_cpus=None, pinned_budget=None)
    assert free.host_cpus == ()
    assert free.memory()["host_budget"] == 0
    _, exact = build(monkeypatch, 0, None, pinned_budget=123456789)
    assert exact.memory()["host_budget"] == 123456789


def test_pinned_cpus_give_the_same_bits(monkeypatch):
    data = batches(3)
    model_a, free = build(monkeypatch, 0, None, host_cpus=None)
    model_b, pinned = build(monkeypatch, 0, None, host_cpus=[min(os.sched_getaffinity(0))])
    train(model_a, free, data)
    train(model_b, pinned, data)
    assert same_bits(params_bits(model_a), params_bits(model_b))


@pytest.mark.parametrize("option, value, words", [
    ("host_cpus", [-1], "host_cpus"),
    ("host_cpus", [100000], "not in this process's CPU affinity"),
    ("host_cpus", [_FIRST_CPU, _FIRST_CPU], "given twice"),
    ("host_cpus", [], "empty list"),
    ("host_cpus", "all", "host_cpus must be"),
    ("host_cpus", [1.5], "host_cpus"),
    ("pinned_budget", -1, "pinned_budget must be >= 0"),
    ("pinned_budget", "lots", "pinned_budget: "),
    ("pinned_budget", "12 parsecs", "unknown unit"),
    ("pinned_budget", 1.5, "pinned_budget must be"),
])
def test_bad_values_raise_value_error_naming_the_option(monkeypatch, option, value, words):
    with pytest.raises(ValueError, match=words.replace("(", r"\(")) as e:
        build(monkeypatch, 0, None, **{option: value})
    assert option in str(e.value)


def test_bad_torchrun_variables_are_named(monkeypatch):
    monkeypatch.setenv("LOCAL_RANK", "3")
    monkeypatch.setenv("LOCAL_WORLD_SIZE", "2")
    model = make_mlp()
    with pytest.raises(ValueError, match="LOCAL_RANK=3"):
        tandem.torch.AdamW(model.parameters(), lr=1e-3)


def test_over_budget_construction_names_both_figures(monkeypatch):
    with pytest.raises(MemoryError, match=r"needs \d+ bytes .* pinned_budget_bytes is 1024 bytes"):
        build(monkeypatch, 0, None, pinned_budget=1024)


def test_rank_cpus_binding_matches_the_engine_split():
    assert _C.rank_cpus_on_topology("node:2 core:4 pu:2", [], [1, 0], 0, 2) == list(range(8, 16))
    assert _C.rank_cpus(0, 1) == sorted(os.sched_getaffinity(0))


class _Props:
    def __init__(self, bus):
        self.pci_domain_id, self.pci_bus_id, self.pci_device_id = 0, bus, 0


def test_gpu_bus_ids_follow_the_torchrun_layout(monkeypatch):
    from tandem._core import node as _node
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)
    monkeypatch.setattr(torch.cuda, "get_device_properties", lambda i: _Props(0x17 + i))
    assert _node.gpu_bus_ids(torch.device("cuda", 1), 1, 2) == ["0000:17:00.0", "0000:18:00.0"]
    # Not the usual layout (rank 1 on cuda:0, or fewer GPUs than ranks): unknown.
    assert _node.gpu_bus_ids(torch.device("cuda", 0), 1, 2) == []
    assert _node.gpu_bus_ids(torch.device("cuda", 1), 1, 4) == []
    assert _node.gpu_bus_ids(torch.device("cpu"), 0, 2) == []
    # Bus ids hwloc does not know (no such devices here) leave the plain split.
    monkeypatch.setenv("LOCAL_RANK", "1")
    monkeypatch.setenv("LOCAL_WORLD_SIZE", "2")
    assert _node.host_cpus("auto", torch.device("cuda", 1)) == _C.rank_cpus(1, 2)
