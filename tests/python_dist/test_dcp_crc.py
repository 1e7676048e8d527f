"""tandem.dcp: CRC32C per item for torch.distributed.checkpoint, and tandem._C.crc32c.

Single-process tests run in this process (DCP without a process group); the DTensor
tests fork gloo process groups on CPU (dcp_crc_worker.py): save at world size 3, load at
2 (also a damaged copy) and at 1 (here, into full tensors).
"""

import json
import os
import shutil
import sys
import tempfile
import warnings

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("torch.distributed.tensor")  # DTensor, DCP: PyTorch >= 2.4
import torch.distributed.checkpoint as dcp  # noqa: E402
import torch.multiprocessing as mp  # noqa: E402
from torch.distributed.checkpoint import FileSystemReader, FileSystemWriter  # noqa: E402
from torch.distributed.checkpoint.api import CheckpointException  # noqa: E402

import tandem._C  # noqa: E402

if not hasattr(tandem._C, "crc32c"):
    pytest.skip("tandem._C built without the checkpoint library", allow_module_level=True)

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # with or without __init__.py
import dcp_crc_worker as W  # noqa: E402
import tandem.dcp  # noqa: E402
from tandem.dcp import (  # noqa: E402
    CheckpointCorruptError,
    CrcFileSystemReader,
    CrcFileSystemWriter,
    find_corrupt_error,
)

pytestmark = pytest.mark.filterwarnings(
    "ignore:torch.distributed is disabled:UserWarning",
    "ignore:Detected an existing checkpoint:UserWarning",
)


# ---------------------------------------------------------------- tandem._C.crc32c


def test_crc32c_known_vectors():
    # RFC 3720 (iSCSI), B.4, and the common check value.
    assert tandem._C.crc32c(b"123456789") == 0xE3069283
    assert tandem._C.crc32c(b"") == 0
    assert tandem._C.crc32c(bytes(32)) == 0x8A9136AA
    assert tandem._C.crc32c(b"\xff" * 32) == 0x62A8AB43
    assert tandem._C.crc32c(bytes(range(32))) == 0x46DD794E
    assert tandem._C.crc32c(bytes(range(31, -1, -1))) == 0x113FDB5C


def test_crc32c_seed_chains_and_buffer_kinds():
    data = np.random.default_rng(0).integers(0, 256, 300_001, dtype=np.uint8)
    whole = tandem._C.crc32c(data)  # >= 64 KiB: the GIL-releasing path
    cut = 123_457
    assert tandem._C.crc32c(data[cut:], tandem._C.crc32c(data[:cut])) == whole
    assert tandem._C.crc32c(data.tobytes()) == whole
    assert tandem._C.crc32c(bytearray(data.tobytes())) == whole
    assert tandem._C.crc32c(memoryview(data.tobytes())) == whole
    floats = data[:300_000].view(np.float32)  # a multi-byte dtype: its bytes count
    assert tandem._C.crc32c(floats) == tandem._C.crc32c(data[:300_000].tobytes())
    assert tandem._C.crc32c(b"6789", seed=tandem._C.crc32c(b"12345")) == 0xE3069283


def test_crc32c_rejects_bad_arguments():
    with pytest.raises((ValueError, BufferError)):
        tandem._C.crc32c(np.arange(10, dtype=np.uint8)[::2])  # not contiguous
    with pytest.raises(ValueError, match="seed"):
        tandem._C.crc32c(b"a", 1 << 32)
    with pytest.raises(TypeError):
        tandem._C.crc32c("text")


# ---------------------------------------------------------------- single process


def _state():
    """Plain tensors and a nested dict of several dtypes, any bit pattern."""
    s = W.full_state()
    s["top"] = W._random((5, 2), torch.float32, 9)
    return s


def _fresh(tree):
    return W.map_tensors(W.sentinel_like, tree)


def _assert_same(got, want):
    g, w = W.leaves(got), W.leaves(want)
    assert [n for n, _ in g] == [n for n, _ in w]
    for (name, a), (_, b) in zip(g, w):
        assert W.same_bits(a, b), name


def _records(path, name=".metadata.crc32c"):
    with open(os.path.join(path, name)) as f:
        return json.load(f)["records"]


def _record(path, fqn):
    (r,) = [r for r in _records(path) if r["fqn"] == fqn]
    return r


def _flip(path, offset):
    with open(path, "r+b") as f:
        f.seek(offset)
        b = f.read(1)
        f.seek(offset)
        f.write(bytes([b[0] ^ 0x10]))


@pytest.fixture
def tmp(tmp_path):
    return str(tmp_path)


@pytest.mark.parametrize(
    "kwargs",
    [{}, {"thread_count": 3}, {"single_file_per_rank": False, "thread_count": 2}],
    ids=["default", "threads3", "file_per_item"],
)
def test_roundtrip_bit_identical(tmp, kwargs):
    state = _state()
    state["step"] = 5
    dcp.save(state, storage_writer=CrcFileSystemWriter(tmp, **kwargs))
    files = sorted(f for f in os.listdir(tmp) if f.endswith(".distcp"))
    records = _records(tmp)
    assert len(records) == len(W.leaves(_state())) + 1  # + "step"
    assert sorted({r["file"] for r in records}) == files
    # Each record's CRC is that of its byte range on disk.
    for r in records:
        with open(os.path.join(tmp, r["file"]), "rb") as f:
            f.seek(r["offset"])
            assert tandem._C.crc32c(f.read(r["length"])) == r["crc32c"], r

    got = _fresh(_state())
    got["step"] = 0
    dcp.load(got, storage_reader=CrcFileSystemReader(tmp))
    assert got.pop("step") == 5
    _assert_same(got, _state())


def test_save_and_load_helpers(tmp):
    tandem.dcp.save(_state(), tmp)
    got = _fresh(_state())
    tandem.dcp.load(got, tmp)
    _assert_same(got, _state())


def _assert_metadata_is_plain(path):
    # .metadata names no tandem class: a process without tandem can unpickle it.
    with open(os.path.join(path, ".metadata"), "rb") as f:
        assert b"tandem" not in f.read()


def test_crc_checkpoint_loads_with_the_plain_reader(tmp):
    dcp.save(_state(), storage_writer=CrcFileSystemWriter(tmp))
    _assert_metadata_is_plain(tmp)
    got = _fresh(_state())
    dcp.load(got, storage_reader=FileSystemReader(tmp))
    _assert_same(got, _state())
    got = _fresh(_state())
    dcp.load(got, checkpoint_id=tmp)  # the default reader
    _assert_same(got, _state())


def test_plain_dcp_path_unchanged(tmp):
    # Importing tandem.dcp changes nothing for dcp.save / dcp.load without our classes.
    dcp.save(_state(), checkpoint_id=tmp)
    assert not os.path.exists(os.path.join(tmp, ".metadata.crc32c"))
    got = _fresh(_state())
    dcp.load(got, checkpoint_id=tmp)
    _assert_same(got, _state())


def test_plain_checkpoint_with_crc_reader_is_refused_by_default(tmp):
    dcp.save(_state(), storage_writer=FileSystemWriter(tmp))
    got = _fresh(_state())
    with pytest.raises(CheckpointCorruptError, match=r"no CRC record.*require_crc=False"):
        tandem.dcp.load(got, tmp)
    _assert_same(got, _fresh(_state()))
    with pytest.warns(UserWarning, match="loads unverified"):
        dcp.load(got, storage_reader=CrcFileSystemReader(tmp, require_crc=False))
    _assert_same(got, _state())


def test_sidecar_of_another_save_is_no_record(tmp):
    # The plain writer overwrites a CRC checkpoint: the old sidecar must not be used.
    dcp.save(_state(), storage_writer=CrcFileSystemWriter(tmp))
    dcp.save(_state(), storage_writer=FileSystemWriter(tmp))
    got = _fresh(_state())
    with pytest.raises(CheckpointCorruptError, match="belongs to save"):
        tandem.dcp.load(got, tmp)
    with pytest.warns(UserWarning, match="belongs to save"):
        tandem.dcp.load(got, tmp, require_crc=False)
    _assert_same(got, _state())


def test_flipped_byte_names_file_item_and_crcs_and_leaves_tensors(tmp):
    dcp.save(_state(), storage_writer=CrcFileSystemWriter(tmp, thread_count=2))
    r = _record(tmp, W.DAMAGED_FQN)
    _flip(os.path.join(tmp, r["file"]), r["offset"] + r["length"] // 2)

    got = _fresh(_state())
    with pytest.raises(CheckpointException) as info:  # DCP's own wrapper
        dcp.load(got, storage_reader=CrcFileSystemReader(tmp))
    err = find_corrupt_error(info.value)
    assert isinstance(err, CheckpointCorruptError) and isinstance(err, ValueError)
    msg = str(err)
    assert r["file"] in msg and W.DAMAGED_FQN in msg, msg
    assert "chunk offsets [0, 0]" in msg, msg
    assert f"bytes [{r['offset']}, {r['offset'] + r['length']})" in msg, msg
    assert f"stored 0x{r['crc32c']:08x}" in msg and "computed 0x" in msg, msg
    _assert_same(got, _fresh(_state()))  # nothing was read into any tensor

    with pytest.raises(CheckpointCorruptError, match="CRC32C mismatch"):
        tandem.dcp.load(got, tmp)
    _assert_same(got, _fresh(_state()))


def test_damage_in_an_item_the_load_does_not_read(tmp):
    dcp.save(_state(), storage_writer=CrcFileSystemWriter(tmp))
    r = _record(tmp, W.DAMAGED_FQN)
    _flip(os.path.join(tmp, r["file"]), r["offset"] + 3)
    # A state dict without the damaged item reads only intact items.
    got = _fresh(_state())
    del got["optim"]["state"]["layers.0.weight"]["exp_avg"]
    tandem.dcp.load(got, tmp)
    want = _state()
    del want["optim"]["state"]["layers.0.weight"]["exp_avg"]
    _assert_same(got, want)


def test_truncated_file(tmp):
    dcp.save(_state(), storage_writer=CrcFileSystemWriter(tmp))
    r = max(_records(tmp), key=lambda r: r["offset"])
    path = os.path.join(tmp, r["file"])
    with open(path, "r+b") as f:
        f.truncate(r["offset"] + 10)
    with pytest.raises(CheckpointCorruptError, match=f"{r['file']}.*the file ends at byte"):
        tandem.dcp.load(_fresh(_state()), tmp)


def test_missing_file(tmp):
    dcp.save(_state(), storage_writer=CrcFileSystemWriter(tmp, single_file_per_rank=False))
    r = _record(tmp, W.DAMAGED_FQN)
    os.remove(os.path.join(tmp, r["file"]))
    with pytest.raises(CheckpointCorruptError, match=f"{r['file']}: cannot open"):
        tandem.dcp.load(_fresh(_state()), tmp)


def _rewrite_sidecar(path, edit):
    """Edits the sidecar and writes it back in its writer's form (its CRC as the edit left
    it)."""
    name = os.path.join(path, ".metadata.crc32c")
    with open(name) as f:
        doc = json.load(f)
    edit(doc)
    with open(name, "w") as f:
        f.write(tandem.dcp._sidecar_text(doc))


def test_damaged_sidecar_is_unreadable(tmp):
    dcp.save(_state(), storage_writer=CrcFileSystemWriter(tmp))

    def bump_a_crc(doc):
        doc["records"][0]["crc32c"] ^= 1

    _rewrite_sidecar(tmp, bump_a_crc)
    for require in (True, False):
        with pytest.raises(CheckpointCorruptError, match=r"\.metadata\.crc32c is unreadable.*CRC"):
            tandem.dcp.load(_fresh(_state()), tmp, require_crc=require)

    with open(os.path.join(tmp, ".metadata.crc32c"), "w") as f:
        f.write("{not json")
    with pytest.raises(CheckpointCorruptError, match="unreadable"):
        tandem.dcp.load(_fresh(_state()), tmp)


def test_sidecar_without_a_record_for_an_item(tmp):
    dcp.save(_state(), storage_writer=CrcFileSystemWriter(tmp))

    def drop_one(doc):
        doc["records"] = [r for r in doc["records"] if r["fqn"] != W.DAMAGED_FQN]
        del doc["crc32c"]
        doc["crc32c"] = tandem.dcp._json_crc(doc)

    _rewrite_sidecar(tmp, drop_one)
    with pytest.raises(CheckpointCorruptError, match=f"{W.DAMAGED_FQN}.*no CRC record"):
        tandem.dcp.load(_fresh(_state()), tmp, require_crc=False)


def test_writer_rejects_safetensors(tmp):
    from torch.distributed.checkpoint.filesystem import SerializationFormat

    with pytest.raises(ValueError, match="serialization_format"):
        CrcFileSystemWriter(tmp, serialization_format=SerializationFormat.SAFETENSORS)


# ---------------------------------------------------------------- gloo, DTensor


def _spawn(fn, world, *args):
    with tempfile.TemporaryDirectory() as d:
        # fork: the children start with torch imported (no ~3 s import per process).
        mp.start_processes(
            fn, args=(world, os.path.join(d, "pg")) + args, nprocs=world, start_method="fork"
        )


@pytest.fixture(scope="module")
def saved_at_3(tmp_path_factory):
    """Checkpoints of the sharded state dict saved by 3 ranks (7 rows: 3 + 3 + 1)."""
    root = tmp_path_factory.mktemp("dcp3")
    dirs = {
        "per_rank": str(root / "per_rank"),
        "per_item": str(root / "per_item"),
    }
    _spawn(
        W.save_worker,
        3,
        [
            (dirs["per_rank"], {"thread_count": 2}),
            (dirs["per_item"], {"single_file_per_rank": False, "thread_count": 2}),
        ],
    )
    return dirs


def test_dtensor_sidecar_has_every_rank(saved_at_3):
    for path in saved_at_3.values():
        records = _records(path)
        ranks = {r["file"].split("_")[2] for r in records}
        assert ranks == {"0", "1", "2"}, ranks
        files = {f for f in os.listdir(path) if f.endswith(".distcp")}
        assert {r["file"] for r in records} == files
        _assert_metadata_is_plain(path)


def test_dtensor_load_at_world_size_1(saved_at_3):
    full = W.full_state()
    for path in saved_at_3.values():
        for reader in (CrcFileSystemReader(path), FileSystemReader(path)):
            got = _fresh(full)
            got["step"] = 0
            dcp.load(got, storage_reader=reader)
            assert got.pop("step") == 11
            _assert_same(got, full)


def test_dtensor_load_at_world_size_2_and_damage(saved_at_3, tmp):
    # Damage, in a copy, the chunk saving rank 2 wrote (row 6): at world size 2 only
    # rank 1 reads it, yet rank 0 must stop too before writing any tensor (the reader
    # verifies in prepare_local_plan, which DCP runs on all ranks before any reads).
    damaged = os.path.join(tmp, "damaged")
    shutil.copytree(saved_at_3["per_rank"], damaged)
    (r,) = [
        x for x in _records(damaged) if x["fqn"] == W.DAMAGED_FQN and x["file"].startswith("__2_")
    ]
    assert r["chunk_offsets"] == [6, 0]
    _flip(os.path.join(damaged, r["file"]), r["offset"] + r["length"] // 2)
    _spawn(W.load_worker, 2, list(saved_at_3.values()), damaged, r["file"])


def test_docs_example_runs(tmp, capsys):
    doc = os.path.join(os.path.dirname(__file__), "..", "..", "docs", "dcp_integrity.md")
    with open(doc) as f:
        text = f.read()
    code = text.split("```python\n", 1)[1].split("```", 1)[0]
    exec(compile(code, "docs/dcp_integrity.md", "exec"), {"__name__": "dcp_integrity_example"})
    out = capsys.readouterr().out
    assert "CRC32C mismatch" in out and "model.w" in out, out


def test_without_collectives_each_rank_has_its_sidecar(tmp):
    _spawn(W.save_local_worker, 2, tmp)
    names = sorted(os.listdir(tmp))
    assert names == [
        "__0.metadata", "__0.metadata.crc32c", "__0_0.distcp",
        "__1.metadata", "__1.metadata.crc32c", "__1_0.distcp",
    ], names
    assert {r["file"] for r in _records(tmp, "__1.metadata.crc32c")} == {"__1_0.distcp"}
    # Without a process group DCP loads rank 0's own metadata (and so its sidecar).
    got = {"x": torch.full((3,), -1.0), "step": -1}
    tandem.dcp.load(got, tmp)
    assert got["step"] == 0 and torch.equal(got["x"], torch.zeros(3))
    (r,) = [x for x in _records(tmp, "__0.metadata.crc32c") if x["fqn"] == "x"]
    _flip(os.path.join(tmp, r["file"]), r["offset"] + r["length"] // 2)
    with pytest.raises(CheckpointCorruptError, match=r"__0_0\.distcp: item x "):
        tandem.dcp.load({"x": torch.zeros(3), "step": -1}, tmp)
