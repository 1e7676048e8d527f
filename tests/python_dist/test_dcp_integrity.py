"""tandem.dcp: ``.metadata`` checked before it is unpickled, the restricted unpickler and
the bounds on what the metadata asks for, unfinished saves named, the atomic commit, and
the sweep that damages every byte of ``.metadata`` and of the sidecar in turn
(docs/dcp_integrity.md).

Single-process tests run in this process (DCP without a process group); the
distributed ones fork gloo process groups on CPU (dcp_integrity_worker.py) and load
under an address-space limit.
"""

import json
import os
import pickle
import shutil
import struct
import subprocess
import sys
import tempfile
import tracemalloc

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("torch.distributed.tensor")
import torch.distributed.checkpoint as dcp  # noqa: E402
import torch.multiprocessing as mp  # noqa: E402
from torch.distributed.checkpoint import FileSystemWriter  # noqa: E402
from torch.distributed.checkpoint.api import CheckpointException  # noqa: E402

import tandem._C  # noqa: E402

if not hasattr(tandem._C, "crc32c"):
    pytest.skip("tandem._C built without the checkpoint library", allow_module_level=True)

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import dcp_crc_worker as W  # noqa: E402
import dcp_integrity_worker as IW  # noqa: E402
import tandem  # noqa: E402
import tandem.dcp  # noqa: E402
from tandem.dcp import _metadata as _dcp_metadata  # noqa: E402
from tandem.dcp import (  # noqa: E402
    CheckpointCorruptError,
    CheckpointIncompleteError,
    CrcFileSystemReader,
    CrcFileSystemWriter,
)

pytestmark = pytest.mark.filterwarnings(
    "ignore:torch.distributed is disabled:UserWarning",
    "ignore:Detected an existing checkpoint:UserWarning",
)


def _state(step=3):
    s = W.full_state()
    s["step"] = step
    return s


def _fresh():
    s = W.map_tensors(W.sentinel_like, W.full_state())
    s["step"] = -1
    return s


def _tensors(state):
    return W.leaves({k: v for k, v in state.items() if k != "step"})


def _assert_unchanged(state):
    for (name, got), (_, want) in zip(_tensors(state), _tensors(_fresh())):
        assert W.same_bits(got, want), name
    assert state["step"] == -1


def _flip(path, offset, bit=0x10):
    with open(path, "r+b") as f:
        f.seek(offset)
        b = f.read(1)
        f.seek(offset)
        f.write(bytes([b[0] ^ bit]))


def _sidecar(path, name=".metadata.crc32c"):
    with open(os.path.join(path, name)) as f:
        return json.load(f)


def _rewrite_sidecar(path, edit):
    """Edits the sidecar and writes it back as its writer would (form and CRC intact)."""
    doc = _sidecar(path)
    edit(doc)
    doc.pop("crc32c", None)
    doc["crc32c"] = tandem.dcp._json_crc(doc)
    with open(os.path.join(path, ".metadata.crc32c"), "w") as f:
        f.write(tandem.dcp._sidecar_text(doc))


def _write_metadata(path, data):
    """Replaces .metadata with ``data`` and makes the sidecar vouch for it, as a
    consistent but crafted checkpoint would."""
    with open(os.path.join(path, ".metadata"), "wb") as f:
        f.write(data)

    def vouch(doc):
        doc["metadata"] = {"file": ".metadata", "length": len(data),
                           "crc32c": tandem._C.crc32c(data)}
    _rewrite_sidecar(path, vouch)


@pytest.fixture
def saved(tmp_path):
    path = str(tmp_path / "ckpt")
    tandem.dcp.save(_state(), path)
    return path


# ---------------------------------------------------------------- the error classes


def test_error_classes():
    assert tandem.CheckpointCorruptError is CheckpointCorruptError
    assert issubclass(CheckpointCorruptError, ValueError)
    assert issubclass(CheckpointIncompleteError, CheckpointCorruptError)


# ---------------------------------------------------------------- .metadata


def test_sidecar_covers_metadata(saved):
    doc = _sidecar(saved)
    assert doc["version"] == 2
    with open(os.path.join(saved, ".metadata"), "rb") as f:
        data = f.read()
    assert doc["metadata"] == {"file": ".metadata", "length": len(data),
                               "crc32c": tandem._C.crc32c(data)}
    crc = doc.pop("crc32c")
    assert crc == tandem.dcp._json_crc(doc)


@pytest.mark.parametrize("where", ["first", "middle", "last"])
def test_damaged_metadata_is_refused_before_unpickling(saved, where, monkeypatch):
    size = os.path.getsize(os.path.join(saved, ".metadata"))
    offset = {"first": 0, "middle": size // 2, "last": size - 1}[where]
    _flip(os.path.join(saved, ".metadata"), offset)
    unpickled = []
    real = _dcp_metadata.unpickle_metadata
    monkeypatch.setattr(tandem.dcp, "unpickle_metadata",
                        lambda data: unpickled.append(1) or real(data))
    got = _fresh()
    with pytest.raises(CheckpointCorruptError, match=r"\.metadata: \d+ bytes with CRC32C") as e:
        tandem.dcp.load(got, saved)
    assert "it was not unpickled" in str(e.value) and saved in str(e.value)
    assert not unpickled
    _assert_unchanged(got)
    # Through DCP itself: its CheckpointException holds our error, not "metadata is None".
    with pytest.raises(CheckpointException) as e:
        dcp.load(got, storage_reader=CrcFileSystemReader(saved))
    assert isinstance(tandem.dcp.find_corrupt_error(e.value), CheckpointCorruptError)
    assert "metadata is None" not in str(e.value)
    # read_metadata called directly raises.
    with pytest.raises(CheckpointCorruptError, match=r"\.metadata"):
        CrcFileSystemReader(saved).read_metadata()


def test_truncated_and_missing_sidecar_fields(saved):
    meta = os.path.join(saved, ".metadata")
    with open(meta, "rb") as f:
        data = f.read()
    with open(meta, "wb") as f:
        f.write(data[:-7])
    with pytest.raises(CheckpointCorruptError, match=f"{len(data) - 7} bytes.*says {len(data)} bytes"):
        tandem.dcp.load(_fresh(), saved)
    with open(meta, "wb") as f:
        f.write(data)

    def drop(doc):
        del doc["metadata"]
    _rewrite_sidecar(saved, drop)
    with pytest.raises(CheckpointCorruptError, match="unreadable.*'metadata'"):
        tandem.dcp.load(_fresh(), saved)


def test_sidecar_edit_that_json_still_parses_is_refused(saved):
    name = os.path.join(saved, ".metadata.crc32c")
    with open(name) as f:
        text = f.read()
    with open(name, "w") as f:
        f.write(text.replace("\n", "\n ", 1))  # whitespace: the same document
    with pytest.raises(CheckpointCorruptError, match="not what its writer wrote"):
        tandem.dcp.load(_fresh(), saved)


class _Evil:
    def __reduce__(self):
        return (os.system, ("echo pwned > /dev/null",))


def test_restricted_unpickler_refuses_other_globals(saved):
    for data in (pickle.dumps(_Evil()), pickle.dumps({"x": _Evil()}),
                 pickle.dumps(getattr), pickle.dumps(bytes(4))):
        with pytest.raises(ValueError, match="not a DCP metadata pickle|not a DCP Metadata"):
            md = _dcp_metadata.unpickle_metadata(data)
            _dcp_metadata.check_metadata(md, saved)
    # A crafted .metadata that its sidecar vouches for still cannot run code.
    _write_metadata(saved, pickle.dumps(_Evil()))
    with pytest.raises(CheckpointCorruptError, match=r"global (posix|os)\.system is not allowed"):
        tandem.dcp.load(_fresh(), saved)
    # getattr only reaches members of DCP's enums.
    evil = (b"\x80\x04cbuiltins\ngetattr\ncos\nsystem\n\x8c\x04name\x86R.")
    with pytest.raises(ValueError, match="not allowed"):
        _dcp_metadata.unpickle_metadata(evil)


def test_metadata_memory_is_bounded_by_its_size(saved):
    # A PUT to memo index 2^28 in front of the real pickle: the C unpickler sized its memo
    # by it (2 GiB, traced by tracemalloc) before anything refused the file. Its opcodes
    # are now checked against its bytes first (tandem._C.check_pickle_bounds), with the
    # sidecar vouching for it or without one.
    with open(os.path.join(saved, ".metadata"), "rb") as f:
        real = f.read()
    crafted = real[:2] + b"N" + b"r" + struct.pack("<I", 1 << 28) + b"0" + real[2:]
    tracemalloc.start()
    try:
        with pytest.raises(ValueError, match="byte 3: memo index 268435456 skips past the 0 "
                                             "entries defined so far"):
            _dcp_metadata.unpickle_metadata(crafted)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 16 << 20, "the reader allocated %d bytes for a %d-byte file" % (
        peak, len(crafted))
    _write_metadata(saved, crafted)
    with pytest.raises(CheckpointCorruptError, match=r"\.metadata: it is not a DCP metadata "
                                                     r"pickle: .*byte 3: memo index 268435456"):
        tandem.dcp.load(_fresh(), saved)
    # Every protocol's own memo (BINPUT, MEMOIZE) passes.
    md = _dcp_metadata.unpickle_metadata(real)
    for protocol in (2, 3, 4, 5):
        assert tandem._C.check_pickle_bounds(pickle.dumps(md, protocol=protocol)) > 0


def _metadata(path):
    with open(os.path.join(path, ".metadata"), "rb") as f:
        return _dcp_metadata.unpickle_metadata(f.read())


@pytest.mark.parametrize("edit,needle", [
    (lambda md: setattr(md.state_dict_metadata["model.w"], "size", torch.Size([1 << 20, 1 << 20])),
     "tensors hold"),
    (lambda md: setattr(md.state_dict_metadata["model.w"].chunks[0], "sizes", torch.Size([1 << 30, 5])),
     "leave the tensor"),
    (lambda md: next(iter(md.storage_data.values())).__setattr__("length", 1 << 40),
     "the file ends at byte"),
    (lambda md: next(iter(md.storage_data.values())).__setattr__("offset", -1), "offset -1"),
    (lambda md: next(iter(md.storage_data.values())).__setattr__("relative_path", "../x"),
     "not a relative path"),
    (lambda md: md.storage_data.clear(), "no storage entry"),
    (lambda md: setattr(md, "state_dict_metadata", [1, 2]), "not a dict"),
    (lambda md: setattr(md, "storage_meta", 5), "storage_meta is a int"),
], ids=["huge_size", "chunk_outside", "length_past_file", "negative_offset", "path_escape",
        "no_storage", "not_a_dict", "storage_meta"])
def test_bounds_on_what_metadata_asks_for(saved, edit, needle):
    md = _metadata(saved)
    edit(md)
    with pytest.raises(ValueError, match=needle):
        _dcp_metadata.check_metadata(md, saved)
    # Through a load, with the sidecar vouching for the crafted file, or without one.
    _write_metadata(saved, pickle.dumps(md))
    with pytest.raises(CheckpointCorruptError, match=needle):
        tandem.dcp.load(_fresh(), saved)
    os.remove(os.path.join(saved, ".metadata.crc32c"))
    with pytest.warns(UserWarning, match="loads unverified"):
        with pytest.raises(CheckpointCorruptError, match=needle):
            tandem.dcp.load(_fresh(), saved, require_crc=False)


def test_version_1_sidecar_still_loads(saved):
    # A checkpoint written before the sidecar covered .metadata (version 1).
    doc = _sidecar(saved)
    v1 = {"format": doc["format"], "version": 1, "save_id": doc["save_id"],
          "records": doc["records"], "records_crc32c": tandem.dcp._json_crc(doc["records"])}
    with open(os.path.join(saved, ".metadata.crc32c"), "w") as f:
        f.write(tandem.dcp._sidecar_text(v1))
    got = _fresh()
    tandem.dcp.load(got, saved)
    assert got["step"] == 3
    r = next(r for r in v1["records"] if r["fqn"] == W.DAMAGED_FQN)
    _flip(os.path.join(saved, r["file"]), r["offset"] + r["length"] // 2)
    with pytest.raises(CheckpointCorruptError, match="CRC32C mismatch"):
        tandem.dcp.load(_fresh(), saved)


# ---------------------------------------------------------------- layout and commit


def test_commit_leaves_no_staging_and_keeps_other_files(tmp_path):
    path = tmp_path / "ckpt"
    path.mkdir()
    (path / "notes.txt").write_text("kept")
    tandem.dcp.save(_state(1), str(path))
    assert not os.path.exists(str(path) + ".tandem-partial")
    names = sorted(os.listdir(path))
    assert names[:3] == [".metadata", ".metadata.crc32c", "__0_0.distcp"], names
    assert "notes.txt" in names and not any("done" in n or "tandem-save" in n for n in names)
    # A second save replaces the first (an older data file of it is removed), keeps
    # notes.txt, and loads.
    (path / "__0_7.distcp").write_bytes(b"old")
    tandem.dcp.save(_state(2), str(path))
    assert (path / "notes.txt").read_text() == "kept"
    assert not (path / "__0_7.distcp").exists()
    got = _fresh()
    tandem.dcp.load(got, str(path))
    assert got["step"] == 2
    # Into an empty directory: one rename.
    empty = tmp_path / "empty"
    empty.mkdir()
    tandem.dcp.save(_state(4), str(empty))
    tandem.dcp.load(got, str(empty))
    assert got["step"] == 4


def test_overwrite_false_refuses_an_existing_checkpoint(saved):
    with pytest.raises(CheckpointException, match="already exists"):
        dcp.save(_state(), storage_writer=CrcFileSystemWriter(saved, overwrite=False))


def test_missing_checkpoint_is_not_incomplete(tmp_path):
    with pytest.raises(CheckpointException) as e:
        tandem.dcp.load(_fresh(), str(tmp_path / "nowhere"))
    assert "there is no DCP checkpoint there" in str(e.value)


def test_in_place_partial_save_names_the_ranks_there(tmp_path):
    # A save by the plain writer (in place) cut short before its .metadata.
    path = str(tmp_path / "ckpt")
    dcp.save(_state(), storage_writer=FileSystemWriter(path))
    os.remove(os.path.join(path, ".metadata"))
    got = _fresh()
    with pytest.raises(CheckpointIncompleteError,
                       match=r"has no \.metadata, so its save did not finish \(data files of "
                             r"rank\(s\) 0 are there\).*load the previous checkpoint"):
        tandem.dcp.load(got, path)
    _assert_unchanged(got)


def test_interrupted_commit_is_named(saved):
    staging = saved + ".tandem-partial"
    shutil.move(saved, staging)
    with pytest.raises(CheckpointIncompleteError,
                       match="does not exist.*finished writing but whose move.*interrupted"):
        tandem.dcp.load(_fresh(), saved)


def test_save_stopped_after_every_rank_wrote_is_named(saved):
    # Every rank's data and done record are there, the .metadata is not: the save stopped
    # between the last rank's data and the commit.
    staging = saved + ".tandem-partial"
    shutil.move(saved, staging)
    os.remove(os.path.join(staging, ".metadata"))
    with open(os.path.join(staging, ".tandem-save.json"), "w") as f:
        json.dump({"world_size": 2}, f)
    for rank in (0, 1):
        open(os.path.join(staging, f"__{rank}.done.json"), "w").close()
    with pytest.raises(CheckpointIncompleteError) as e:
        tandem.dcp.load(_fresh(), saved)
    assert ("holds its unfinished save by 2 ranks: every rank finished writing its data, "
            "but the save stopped before its .metadata was written") in str(e.value)
    assert "none" not in str(e.value)


# ---------------------------------------------------------------- gloo


def _spawn(fn, world, *args):
    with tempfile.TemporaryDirectory() as d:
        mp.start_processes(fn, args=(world, os.path.join(d, "pg")) + args, nprocs=world,
                           start_method="fork")


def test_damaged_metadata_on_every_rank_in_bounded_memory(tmp_path):
    path = str(tmp_path / "ckpt")
    _spawn(IW.save_worker, 2, path, 11)
    _spawn(IW.load_worker, 2, path, None, [], 11)
    # The byte of the report, if the file is that long, and the middle.
    size = os.path.getsize(os.path.join(path, ".metadata"))
    for offset in sorted({min(5936, size - 1), size // 2}):
        _flip(os.path.join(path, ".metadata"), offset)
        _spawn(IW.load_worker, 2, path, "CheckpointCorruptError",
               [os.path.join(path, ".metadata"), "it was not unpickled"])
        _flip(os.path.join(path, ".metadata"), offset)
    _flip(os.path.join(path, ".metadata.crc32c"), 10)
    _spawn(IW.load_worker, 2, path, "CheckpointCorruptError", [".metadata.crc32c is unreadable"])


def test_unfinished_save_is_named_on_every_rank_and_the_old_one_survives(tmp_path):
    # Saved at 3 ranks at step 5; a save of step 6 into the same name fails on rank 1
    # after it wrote its data: the checkpoint still holds step 5, and the staging
    # directory names the rank that did not finish.
    path = str(tmp_path / "ckpt")
    _spawn(IW.save_worker, 3, path, 5)
    _spawn(IW.save_worker, 3, path, 6, 1)
    assert os.path.isdir(path + ".tandem-partial")
    _spawn(IW.load_worker, 2, path, None, [], 5)
    # Where no earlier checkpoint had the name: every rank reports the unfinished save.
    fresh = str(tmp_path / "fresh")
    _spawn(IW.save_worker, 3, fresh, 6, 1)
    assert not os.path.exists(fresh)
    needles = [f"checkpoint {fresh} does not exist",
               f"{fresh}.tandem-partial holds its unfinished save by 3 ranks",
               "rank(s) 0, 2 finished writing their data, rank(s) 1 did not",
               "load the previous checkpoint"]
    _spawn(IW.load_worker, 2, fresh, "CheckpointIncompleteError", needles)
    # Loading the staging directory itself says the same.
    _spawn(IW.load_worker, 2, fresh + ".tandem-partial", "CheckpointIncompleteError",
           ["is a staging directory", "rank(s) 1 did not"])
    # The next save of that name succeeds and clears the staging directory.
    _spawn(IW.save_worker, 3, fresh, 7)
    assert not os.path.exists(fresh + ".tandem-partial")
    _spawn(IW.load_worker, 2, fresh, None, [], 7)


# ---------------------------------------------------------------- the damage sweep


def test_every_byte_of_metadata_and_sidecar_damaged_is_refused(tmp_path):
    """Every byte of .metadata and of the sidecar of a 2-rank checkpoint, one bit flipped
    in turn: every load is refused with CheckpointCorruptError naming the file, nothing
    is loaded, under an address-space limit, each load in well under a second."""
    path = str(tmp_path / "ckpt")
    _spawn(IW.save_worker, 2, path, 11)
    out = str(tmp_path / "sweep.json")
    subprocess.run([sys.executable, os.path.join(HERE, "dcp_integrity_worker.py"), "sweep",
                    path, out], check=True, timeout=900)
    with open(out) as f:
        report = json.load(f)
    print("damage sweep:", json.dumps(report))
    for name, r in report["files"].items():
        assert r["other_count"] == 0, (name, r["other"])
        assert r["refused_named"] == r["bytes"] > 0, (name, r)
        assert r["slowest_load_s"] < 2.0, (name, r)
    assert report["rss_kib_peak"] - report["rss_kib_before"] < 256 * 1024, report
    assert report["intact_loads"]
