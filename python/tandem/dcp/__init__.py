"""CRC32C integrity for torch.distributed.checkpoint (DCP) directories
(docs/dcp_integrity.md: the layout, what is checked and when, what each damage reports).

:class:`CrcFileSystemWriter` records a CRC32C of ``.metadata`` and of the stored bytes of
every item it writes in a JSON sidecar, ``.metadata.crc32c`` (``tandem.dcp._sidecar``),
and commits a save with collectives atomically (``tandem.dcp._commit``).
:class:`CrcFileSystemReader` verifies ``.metadata`` before unpickling it
(``tandem.dcp._metadata``) and every item a load reads before any byte reaches the
caller's tensors. Pass them to ``dcp.save`` and ``dcp.load`` as ``storage_writer=`` and
``storage_reader=``, or call :func:`save` and :func:`load` here, which raise
:class:`CheckpointCorruptError` itself instead of DCP's ``CheckpointException``.

Thread safety: a writer or reader serves one save or load at a time, as in DCP.
"""

import dataclasses
import json
import os
import warnings
from concurrent.futures import ThreadPoolExecutor

import torch.distributed.checkpoint as _dcp
from torch.distributed.checkpoint.api import CheckpointException
from torch.distributed.checkpoint.filesystem import (FileSystemReader, FileSystemWriter,
                                                     SerializationFormat, _StorageInfo)
from torch.distributed.checkpoint.metadata import StorageMeta
from torch.futures import Future

from tandem import CheckpointCorruptError
from tandem._core import dist as _dist
from tandem._core.file_checks import crc32c
from tandem.dcp import _commit
from tandem.dcp._metadata import DataFileError, check_metadata, unpickle_metadata
from tandem.dcp._sidecar import (SIDECAR_FORMAT, SIDECAR_VERSION, _item_name,  # noqa: F401
                                 _json_crc, _metadata_name, _region_crc, _sidecar_text,
                                 sidecar_name)

__all__ = ["CheckpointCorruptError", "CheckpointIncompleteError", "CrcFileSystemReader",
           "CrcFileSystemWriter", "crc32c", "find_corrupt_error", "load", "save",
           "sidecar_name"]


class CheckpointIncompleteError(CheckpointCorruptError):
    """A DCP checkpoint whose save did not finish: no metadata file, or a staging
    directory in its place. The message says which ranks' files or records are missing
    and that the previous checkpoint is the one to load."""


@dataclasses.dataclass
class _CrcStorageInfo(_StorageInfo):
    """A ``_StorageInfo`` carrying the CRC32C of its stored bytes from the rank that wrote
    (and read back) them to the coordinator, in DCP's ``WriteResult``; ``finish`` hands
    DCP plain ``_StorageInfo`` objects, so ``.metadata`` is the plain writer's."""

    crc32c: int = 0


def _storage_fields(info):
    """The ``_StorageInfo`` fields of ``info`` as keyword arguments."""
    return {f.name: getattr(info, f.name) for f in dataclasses.fields(_StorageInfo)}


class _UnreadableMetadata:
    """Stands in for a Metadata that ``read_metadata`` could not read: DCP's load swallows
    read_metadata's exceptions, so the reader's fallback returns this object, whose first
    use (``set_up_storage_reader``, or any attribute) raises the error on every rank."""

    def __init__(self, error):
        object.__setattr__(self, "_error", error)

    def raise_error(self):
        e = object.__getattribute__(self, "_error")
        raise type(e)(str(e))

    def __getattr__(self, name):
        self.raise_error()


class CrcFileSystemWriter(FileSystemWriter):
    """:class:`~torch.distributed.checkpoint.FileSystemWriter` that also records the
    CRC32Cs of the metadata file and of every stored item in the sidecar, and commits a
    save with collectives atomically.

    Takes FileSystemWriter's arguments with their meaning there (``single_file_per_rank``,
    ``thread_count``, ``sync_files``, ``overwrite``, ...). Raises ValueError for a
    ``serialization_format`` other than ``SerializationFormat.TORCH_SAVE`` (the default):
    with SAFETENSORS the storage offsets DCP records do not locate the items.

    With collectives (the default) every rank writes into ``<path>.tandem-partial`` and
    the coordinator's ``finish`` moves it to ``path`` once complete, replacing an earlier
    checkpoint there (its DCP files removed, other files kept); without, each rank writes
    its files and ``__<rank>.metadata`` in ``path`` itself, as DCP does. ``write_data``
    reads ``thread_count`` files back at a time for their CRCs.
    """

    def __init__(self, path, *args, **kwargs):
        _dist.guard_exit()  # Note [Collectives at exit] in _core/dist.py
        super().__init__(path, *args, **kwargs)
        if self.serialization_format != SerializationFormat.TORCH_SAVE:
            raise ValueError(f"CrcFileSystemWriter: serialization_format "
                             f"{self.serialization_format} is not supported (only "
                             "SerializationFormat.TORCH_SAVE)")
        self._target = self.path  # the checkpoint's directory; self.path: where to write

    @property
    def checkpoint_id(self):
        return self._target

    def reset(self, checkpoint_id=None):
        super().reset(checkpoint_id)
        if checkpoint_id:
            self._target = self.path
        self.path = self._target

    def set_up_storage_writer(self, is_coordinator, *args, **kwargs):
        super().set_up_storage_writer(is_coordinator, *args, **kwargs)
        self.path = _commit.staging_path(self._target) if self.use_collectives else self._target

    def prepare_local_plan(self, plan):
        if not self.use_collectives:
            return super().prepare_local_plan(plan)
        if not self.overwrite and self.fs.exists(self.fs.concat_path(self._target, ".metadata")):
            raise RuntimeError(f"Checkpoint already exists and {self.overwrite=}.")
        self.fs.mkdir(self.path)
        return plan

    def prepare_global_plan(self, plans):
        plans = super().prepare_global_plan(plans)
        if self.use_collectives:
            _commit.start(self.path, len(plans))
        return plans

    def write_data(self, plan, planner):
        results = list(super().write_data(plan, planner).wait())
        by_file = {}
        for i, wr in enumerate(results):
            by_file.setdefault(wr.storage_data.relative_path, []).append(i)

        def add_crcs_of_file(relative_path):  # each file's results[i] to one thread
            path = self.fs.concat_path(self.path, relative_path)
            with open(path, "rb") as f:
                for i in by_file[relative_path]:
                    info = results[i].storage_data
                    crc = _region_crc(f, info.offset, info.length)
                    if crc is None:
                        raise OSError(f"CrcFileSystemWriter: {path} ends before the "
                                      f"{info.length} bytes at offset {info.offset} DCP "
                                      f"wrote for {_item_name(results[i].index)}")
                    results[i] = dataclasses.replace(
                        results[i], storage_data=_CrcStorageInfo(**_storage_fields(info),
                                                                 crc32c=crc))

        workers = max(1, min(self.thread_count, len(by_file)))
        with ThreadPoolExecutor(max_workers=workers) as pool:
            list(pool.map(add_crcs_of_file, by_file))
        if self.use_collectives:
            _commit.rank_done(self.path, self.rank or 0, by_file)
        fut = Future()
        fut.set_result(results)
        return fut

    def finish(self, metadata, results):
        records, plain_results = [], []
        for wr_list in results:
            plain = []
            for wr in wr_list:
                info = wr.storage_data
                if not isinstance(info, _CrcStorageInfo):
                    raise RuntimeError(f"CrcFileSystemWriter.finish: the write result of "
                                       f"{_item_name(wr.index)} carries no CRC32C (was it "
                                       "written by another storage writer?)")
                offsets = wr.index.offset
                records.append({"file": info.relative_path, "offset": info.offset,
                                "length": info.length, "crc32c": info.crc32c,
                                "fqn": wr.index.fqn,
                                "chunk_offsets": None if offsets is None else list(offsets)})
                plain.append(dataclasses.replace(
                    wr, storage_data=_StorageInfo(**_storage_fields(info))))
            plain_results.append(plain)
        records.sort(key=lambda r: (r["file"], r["offset"]))
        super().finish(metadata, plain_results)
        self._write_sidecar(records)
        if self.use_collectives:
            _commit.commit(self.path, self._target, self.sync_files)
            self.path = self._target

    def _write_sidecar(self, records):
        rank = self.rank if (not self.use_collectives and self.rank is not None) else None
        meta_name = _metadata_name(rank)
        with open(self.fs.concat_path(self.path, meta_name), "rb") as f:
            data = f.read()
        doc = {"format": SIDECAR_FORMAT, "version": SIDECAR_VERSION, "save_id": self.save_id,
               "metadata": {"file": meta_name, "length": len(data), "crc32c": crc32c(data)},
               "records": records}
        doc["crc32c"] = _json_crc(doc)
        name = sidecar_name(rank)
        tmp = self.fs.concat_path(self.path, name + ".tmp")
        with self.fs.create_stream(tmp, "wb") as f:
            f.write(_sidecar_text(doc).encode())
            if self.sync_files:
                f.flush()
                os.fsync(f.fileno())
        final = self.fs.concat_path(self.path, name)
        if self.fs.exists(final):
            self.fs.rm_file(final)
        self.fs.rename(tmp, final)


class CrcFileSystemReader(FileSystemReader):
    """:class:`~torch.distributed.checkpoint.FileSystemReader` that verifies the metadata
    file before unpickling it and the CRC32C of every item a load reads before DCP reads
    any of them into the caller's tensors (docs/dcp_integrity.md, "What is checked, and
    when").

    Args:
        path: the checkpoint directory.
        require_crc: whether a checkpoint without a CRC record (no sidecar, or one of
            another save: written or overwritten by the plain FileSystemWriter) is an
            error (:class:`CheckpointCorruptError`; ``True``, the default) or loads
            unverified with a warning (``False``; its metadata still unpickled
            restrictedly and bounded). A sidecar that is unreadable, a metadata file that
            does not match its sidecar, or a missing record for an item the load reads is
            an error either way.
        _extension_registry: passed to FileSystemReader (CRCs cover the stored bytes,
            so stream transforms need nothing more here).

    Each rank checks the metadata file in ``read_metadata`` and the items of its own load
    plan in ``prepare_local_plan``, which DCP runs on every rank before any rank reads
    data, so a corrupt item on one rank stops the load on all ranks before any tensor is
    written; ``read_data`` verifies what the final plan reads that was not verified then.

    Errors: :class:`CheckpointCorruptError` (:class:`CheckpointIncompleteError` for a
    save that did not finish), which DCP wraps in its ``CheckpointException``
    (:func:`find_corrupt_error`). ``read_metadata()`` called directly raises it; called
    with ``rank=`` (DCP's fallback to rank-local metadata) it returns a stand-in that
    raises it at its first use.
    """

    def __init__(self, path, require_crc=True, _extension_registry=None):
        _dist.guard_exit()  # Note [Collectives at exit] in _core/dist.py
        super().__init__(path, _extension_registry=_extension_registry)
        self.require_crc = require_crc
        self._crcs = None  # (file, offset, length) -> CRC32C; None: not verifying
        self._verified = set()
        self._metadata_error = None  # what the last read_metadata() without rank raised

    def reset(self, checkpoint_id=None):
        super().reset(checkpoint_id)
        self._crcs = None
        self._verified = set()
        self._metadata_error = None

    def read_metadata(self, *args, **kwargs):
        rank = kwargs.get("rank")
        try:
            return self._read_metadata(rank)
        except (CheckpointCorruptError, FileNotFoundError) as e:
            if rank is None:
                self._metadata_error = e
                raise
            # DCP's fallback to rank-local metadata: report the global file's problem,
            # unless it was missing and this rank's file is there but unreadable.
            first, missing = self._metadata_error, (CheckpointIncompleteError, FileNotFoundError)
            if first is not None and (not isinstance(first, missing) or isinstance(e, missing)):
                e = first
            return _UnreadableMetadata(e)

    def _read_metadata(self, rank):
        name = _metadata_name(rank)
        path = self.fs.concat_path(self.path, name)
        if not os.path.exists(path):
            why = _commit.describe_missing(self.path, name)
            if why is None:
                raise FileNotFoundError(f"checkpoint {self.path} has no {name}: there is no "
                                        "DCP checkpoint there")
            raise CheckpointIncompleteError(f"{why}; the save did not finish: load the "
                                            "previous checkpoint")
        sidecar = self._read_sidecar(rank)
        try:
            with open(path, "rb") as f:
                data = f.read()
        except OSError as e:
            raise CheckpointCorruptError(f"{path}: cannot read it: {e}") from e
        if sidecar is not None and sidecar["metadata"] is not None:
            sidecar = self._check_metadata_crc(path, data, sidecar)
        try:
            metadata = unpickle_metadata(data)
            check_metadata(metadata, self.path)
        except DataFileError as e:
            raise CheckpointCorruptError(str(e)) from e
        except ValueError as e:
            raise CheckpointCorruptError(f"{path}: {e}") from e
        if getattr(metadata, "storage_meta", None) is None:
            metadata.storage_meta = StorageMeta()
        save_id = metadata.storage_meta.save_id
        if sidecar is not None and sidecar["save_id"] != save_id:
            sidecar = self._no_record(f"{sidecar['path']} belongs to save "
                                      f"{sidecar['save_id']!r}, but {name} to save "
                                      f"{save_id!r} (the directory was overwritten by "
                                      "another writer?)")
        self._crcs = None if sidecar is None else sidecar["crcs"]
        metadata.storage_meta.load_id = self.load_id
        return metadata

    def _check_metadata_crc(self, path, data, sidecar):
        """``sidecar``, when it covers ``data`` (the metadata file's bytes), else what
        _no_record says (another save's sidecar), or CheckpointCorruptError (damage)."""
        want, actual = sidecar["metadata"], crc32c(data)
        if len(data) == want["length"] and actual == want["crc32c"]:
            return sidecar
        sid = sidecar["save_id"]
        if isinstance(sid, str) and sid and sid.encode() not in data:
            return self._no_record(f"{sidecar['path']} belongs to save {sid!r}, which {path} "
                                   "does not name (the directory was overwritten by another "
                                   "writer?)")
        raise CheckpointCorruptError(f"{path}: {len(data)} bytes with CRC32C 0x{actual:08x}, "
                                     f"but its CRC record {sidecar['path']} says "
                                     f"{want['length']} bytes with CRC32C "
                                     f"0x{want['crc32c']:08x}: the file is damaged (it was "
                                     "not unpickled)")

    def set_up_storage_reader(self, metadata, is_coordinator, *args, **kwargs):
        if isinstance(metadata, _UnreadableMetadata):
            metadata.raise_error()
        super().set_up_storage_reader(metadata, is_coordinator, *args, **kwargs)
        self._verified = set()

    def _read_sidecar(self, rank):
        """The sidecar of the metadata file of ``rank`` (None: the global one) as a dict
        (crcs, metadata: its file entry or None for version 1, save_id, path), or None
        where there is none and require_crc is False."""
        path = self.fs.concat_path(self.path, sidecar_name(rank))
        if not os.path.exists(path):
            return self._no_record(f"{path} does not exist (written by the plain "
                                   "FileSystemWriter?)")
        try:
            with open(path, "rb") as f:
                text = f.read().decode()
            doc = json.loads(text)
            if not isinstance(doc, dict):
                raise ValueError("it is not a JSON object")
            if _sidecar_text(doc) != text:  # a change that JSON still parses
                raise ValueError("its text is not what its writer wrote (edited or damaged)")
            if doc.get("format") != SIDECAR_FORMAT:
                raise ValueError(f"format {doc.get('format')!r}, expected {SIDECAR_FORMAT!r}")
            version = doc.get("version")
            if version not in (1, SIDECAR_VERSION):
                raise ValueError(f"version {version!r}, expected 1 or {SIDECAR_VERSION}")
            records, meta = doc["records"], None
            if version == 1:
                stored, actual = doc["records_crc32c"], _json_crc(records)
            else:
                stored = doc["crc32c"]
                actual = _json_crc({k: v for k, v in doc.items() if k != "crc32c"})
            if stored != actual:
                raise ValueError(f"its CRC32C is 0x{actual:08x}, stored {stored!r}")
            if version != 1:
                meta = doc["metadata"]
                if not (type(meta["length"]) is int and type(meta["crc32c"]) is int):
                    raise ValueError(f"its metadata entry {meta!r} is not a length and a CRC")
            crcs = {(r["file"], r["offset"], r["length"]): r["crc32c"] for r in records}
        except (OSError, ValueError, KeyError, TypeError, AttributeError, RecursionError) as e:
            raise CheckpointCorruptError(f"CRC record {path} is unreadable: {e}") from e
        return {"crcs": crcs, "metadata": meta, "save_id": doc.get("save_id"), "path": path}

    def _no_record(self, why):
        if self.require_crc:
            raise CheckpointCorruptError(f"checkpoint {self.path} has no CRC record to verify "
                                         f"against: {why}; pass require_crc=False to "
                                         "CrcFileSystemReader to load it unverified")
        warnings.warn(f"checkpoint {self.path} loads unverified: {why}", stacklevel=4)
        return None

    def _verify(self, items):
        """Verifies the stored items behind ``items`` (ReadItems) not verified yet;
        raises CheckpointCorruptError at the first that does not check out."""
        if self._crcs is None:
            return
        by_file = {}
        for item in items:
            info = self.storage_data.get(item.storage_index)
            if info is None:  # check_metadata makes this impossible; never a KeyError
                raise CheckpointCorruptError(f"{self.path}: the metadata has no storage entry for "
                                             f"{_item_name(item.storage_index)}")
            key = (info.relative_path, info.offset, info.length)
            if key in self._verified:
                continue
            by_file.setdefault(info.relative_path, {}).setdefault(key, item.storage_index)
        for relative_path, keys in by_file.items():
            path = self.fs.concat_path(self.path, relative_path)
            try:
                f = open(path, "rb")
            except OSError as e:
                first = next(iter(keys.values()))
                raise CheckpointCorruptError(
                    f"{path}: cannot open the file holding {_item_name(first)}: {e}"
                ) from e
            with f:
                for key in sorted(keys, key=lambda k: k[1]):
                    _, offset, length = key
                    index = keys[key]
                    where = f"{path}: item {_item_name(index)}, bytes [{offset}, {offset + length})"
                    expected = self._crcs.get(key)
                    if expected is None:
                        raise CheckpointCorruptError(f"{where}: no CRC record for this item")
                    actual = _region_crc(f, offset, length)
                    if actual is None:
                        size = os.fstat(f.fileno()).st_size
                        raise CheckpointCorruptError(f"{where}: the file ends at byte {size}")
                    if actual != expected:
                        raise CheckpointCorruptError(f"{where}: CRC32C mismatch (stored "
                                                     f"0x{expected:08x}, computed "
                                                     f"0x{actual:08x})")
                    self._verified.add(key)

    def prepare_local_plan(self, plan):
        self._verify(plan.items)
        return super().prepare_local_plan(plan)

    def read_data(self, plan, planner):
        self._verify(plan.items)
        return super().read_data(plan, planner)


def find_corrupt_error(exc):
    """The first :class:`CheckpointCorruptError` in ``exc`` (itself, or one of the
    per-rank failures of DCP's ``CheckpointException``), or None."""
    if isinstance(exc, CheckpointCorruptError):
        return exc
    if isinstance(exc, CheckpointException):
        for rank in sorted(exc.failures):
            inner = exc.failures[rank][0]
            if isinstance(inner, CheckpointCorruptError):
                return inner
    return None


def save(state_dict, checkpoint_id, process_group=None, use_collectives=True, **writer_kwargs):
    """``dcp.save`` through a :class:`CrcFileSystemWriter` on ``checkpoint_id``
    (``writer_kwargs`` go to the writer). Returns dcp.save's Metadata."""
    writer = CrcFileSystemWriter(checkpoint_id, **writer_kwargs)
    return _dcp.save(state_dict, storage_writer=writer, process_group=process_group,
                     use_collectives=use_collectives)


def load(state_dict, checkpoint_id, process_group=None, require_crc=True, planner=None):
    """``dcp.load`` (in place into ``state_dict``) through a
    :class:`CrcFileSystemReader`. Raises :class:`CheckpointCorruptError` (or
    :class:`CheckpointIncompleteError`; chained from DCP's ``CheckpointException``)
    where any rank found one; every other failure propagates as DCP raised it."""
    reader = CrcFileSystemReader(checkpoint_id, require_crc=require_crc)
    try:
        _dcp.load(state_dict, storage_reader=reader, process_group=process_group, planner=planner)
    except CheckpointException as e:
        corrupt = find_corrupt_error(e)
        if corrupt is None:
            raise
        raise type(corrupt)(str(corrupt)) from e
