"""CRC32C integrity for torch.distributed.checkpoint (DCP) directories.

DCP's :class:`~torch.distributed.checkpoint.FileSystemWriter` stores no content hash: a
flipped byte in a ``.distcp`` file loads silently (or fails deep inside ``torch.load``).
:class:`CrcFileSystemWriter` records a CRC32C (Castagnoli, ISA-L through
:func:`tandem._C.crc32c`) of the stored bytes of every item it writes, and
:class:`CrcFileSystemReader` verifies every item a load reads before any byte reaches
the caller's tensors. Usage::

    import torch.distributed.checkpoint as dcp
    from tandem.dcp import CrcFileSystemReader, CrcFileSystemWriter

    dcp.save(state_dict, storage_writer=CrcFileSystemWriter(path))
    dcp.load(state_dict, storage_reader=CrcFileSystemReader(path))

(or :func:`save` / :func:`load` here, which do the same and raise
:class:`CheckpointCorruptError` itself instead of DCP's ``CheckpointException``).

On-disk layout (docs/dcp_integrity.md): the checkpoint directory is exactly what the
plain writer produces (the ``.metadata`` file holds plain ``_StorageInfo`` objects, so
the plain :class:`~torch.distributed.checkpoint.FileSystemReader` loads it), plus one
JSON sidecar next to the metadata file, ``.metadata.crc32c`` (``__<rank>.metadata.crc32c``
where each rank writes its own ``__<rank>.metadata``, i.e. DCP without collectives).
The sidecar holds the ``save_id`` of the metadata it belongs to, one record per stored
item (file, byte offset, length, CRC32C, and the item's name for people) and a CRC32C of
those records. It is written before ``.metadata``, so a directory whose ``.metadata``
exists has its sidecar.

Where the CRCs come from: each rank computes the CRCs of the items it wrote, by reading
its own file regions back right after DCP's writer closed (and, with ``sync_files``,
fsynced) them; the reads normally hit the page cache. They are not computed from memory
because DCP serializes each item (``torch.save`` of the tensor, plus any stream
transform extensions) straight into the file stream inside private helpers: the stored
bytes never exist as one buffer the writer could see, and hooking the stream would tie
this module to the order of DCP's private ``tell``/``write`` calls. Reading back also
covers exactly the bytes that reached the file. The CRCs travel to the coordinator in
the ``WriteResult``\\ s that DCP gathers (as ``_CrcStorageInfo``, a ``_StorageInfo`` with
a ``crc32c`` field); the coordinator's ``finish()`` writes the sidecar and hands plain
``_StorageInfo``\\ s to DCP's ``finish()``.

Thread safety: a writer or reader serves one save or load at a time, as in DCP.
"""

import dataclasses
import json
import os
import warnings
from concurrent.futures import ThreadPoolExecutor

import torch.distributed.checkpoint as _dcp
from torch.distributed.checkpoint.api import CheckpointException
from torch.distributed.checkpoint.filesystem import (
    FileSystemReader,
    FileSystemWriter,
    SerializationFormat,
    _StorageInfo,
)
from torch.futures import Future

from tandem._C import crc32c

__all__ = [
    "CheckpointCorruptError",
    "CrcFileSystemReader",
    "CrcFileSystemWriter",
    "crc32c",
    "find_corrupt_error",
    "load",
    "save",
    "sidecar_name",
]

# The sidecar's format name and version (docs/dcp_integrity.md). Bump the version on any
# change a version-1 reader would misread.
SIDECAR_FORMAT = "tandem.dcp.crc32c"
SIDECAR_VERSION = 1

# Bytes read per call when computing the CRC of a file region.
_READ_CHUNK = 8 << 20


class CheckpointCorruptError(ValueError):
    """A DCP checkpoint's stored bytes or CRC records do not check out.

    Raised by :class:`CrcFileSystemReader` (through DCP: wrapped in DCP's
    ``CheckpointException``; :func:`find_corrupt_error` digs it out) when an item's
    bytes do not match their CRC32C, when a file is missing or too short, or when the
    CRC record the reader expects is missing, unreadable, or belongs to another save.
    The message names the file, the item (fully qualified name and chunk offsets), the
    byte range and both CRCs where they apply.
    """


@dataclasses.dataclass
class _CrcStorageInfo(_StorageInfo):
    """A ``_StorageInfo`` carrying the CRC32C of its stored bytes (writer side only)."""

    crc32c: int = 0

    def plain(self):
        return _StorageInfo(
            self.relative_path,
            self.offset,
            self.length,
            transform_descriptors=self.transform_descriptors,
        )


def sidecar_name(rank=None):
    """The sidecar's file name: ``.metadata.crc32c``, or ``__<rank>.metadata.crc32c``."""
    return ".metadata.crc32c" if rank is None else f"__{rank}.metadata.crc32c"


def _item_name(index):
    """``fqn``, or ``fqn (chunk offsets [...])``, of a MetadataIndex, for messages."""
    if index is None:
        return "?"
    if index.offset is None:
        return index.fqn
    return f"{index.fqn} (chunk offsets {list(index.offset)})"


def _records_crc(records):
    text = json.dumps(records, sort_keys=True, separators=(",", ":"))
    return crc32c(text.encode())


def _region_crc(f, offset, length):
    """CRC32C of ``length`` bytes at ``offset`` of the open binary file ``f``, or None
    when the file ends first."""
    f.seek(offset)
    buf = bytearray(min(length, _READ_CHUNK))
    view = memoryview(buf)
    crc, left = 0, length
    while left > 0:
        n = f.readinto(view[: min(left, len(buf))])
        if not n:
            return None
        crc = crc32c(view[:n], crc)
        left -= n
    return crc


class CrcFileSystemWriter(FileSystemWriter):
    """:class:`~torch.distributed.checkpoint.FileSystemWriter` that also records a
    CRC32C of every stored item in a sidecar file (see the module's docstring).

    Takes FileSystemWriter's arguments, all of them with their meaning there
    (``single_file_per_rank``, ``thread_count``, ``sync_files``, ...). Only
    ``serialization_format=SerializationFormat.TORCH_SAVE`` (the default) is
    accepted: with SAFETENSORS the storage offsets DCP records do not locate the
    items. Raises ValueError for other formats.

    ``write_data`` computes the CRCs on the writing rank (``thread_count`` files at
    a time); ``finish`` (the coordinator's) writes the sidecar, atomically (a ``.tmp``
    file renamed, fsynced when ``sync_files``), then DCP's ``.metadata``.
    """

    def __init__(self, path, *args, **kwargs):
        super().__init__(path, *args, **kwargs)
        if self.serialization_format != SerializationFormat.TORCH_SAVE:
            raise ValueError(
                f"CrcFileSystemWriter: serialization_format {self.serialization_format} "
                "is not supported (only SerializationFormat.TORCH_SAVE)"
            )

    def write_data(self, plan, planner):
        results = super().write_data(plan, planner).wait()
        by_file = {}
        for i, wr in enumerate(results):
            by_file.setdefault(wr.storage_data.relative_path, []).append(i)

        def crcs_of_file(relative_path):
            path = self.fs.concat_path(self.path, relative_path)
            out = []
            with open(path, "rb") as f:
                for i in by_file[relative_path]:
                    info = results[i].storage_data
                    crc = _region_crc(f, info.offset, info.length)
                    if crc is None:
                        raise OSError(
                            f"CrcFileSystemWriter: {path} ends before the "
                            f"{info.length} bytes at offset {info.offset} DCP wrote for "
                            f"{_item_name(results[i].index)}"
                        )
                    out.append((i, crc))
            return out

        workers = max(1, min(self.thread_count, len(by_file)))
        with ThreadPoolExecutor(max_workers=workers) as pool:
            per_file = list(pool.map(crcs_of_file, by_file))

        with_crc = list(results)
        for pairs in per_file:
            for i, crc in pairs:
                wr = results[i]
                info = wr.storage_data
                with_crc[i] = dataclasses.replace(
                    wr,
                    storage_data=_CrcStorageInfo(
                        info.relative_path,
                        info.offset,
                        info.length,
                        transform_descriptors=info.transform_descriptors,
                        crc32c=crc,
                    ),
                )
        fut = Future()
        fut.set_result(with_crc)
        return fut

    def finish(self, metadata, results):
        records, plain_results = [], []
        for wr_list in results:
            plain = []
            for wr in wr_list:
                info = wr.storage_data
                if not isinstance(info, _CrcStorageInfo):
                    raise RuntimeError(
                        f"CrcFileSystemWriter.finish: the write result of "
                        f"{_item_name(wr.index)} carries no CRC32C (was it written by "
                        "another storage writer?)"
                    )
                records.append(
                    {
                        "file": info.relative_path,
                        "offset": info.offset,
                        "length": info.length,
                        "crc32c": info.crc32c,
                        "fqn": wr.index.fqn,
                        "chunk_offsets": None if wr.index.offset is None else list(wr.index.offset),
                    }
                )
                plain.append(dataclasses.replace(wr, storage_data=info.plain()))
            plain_results.append(plain)
        records.sort(key=lambda r: (r["file"], r["offset"]))
        self._write_sidecar(records)
        super().finish(metadata, plain_results)

    def _write_sidecar(self, records):
        rank = self.rank if (not self.use_collectives and self.rank is not None) else None
        name = sidecar_name(rank)
        doc = {
            "format": SIDECAR_FORMAT,
            "version": SIDECAR_VERSION,
            "save_id": self.save_id,
            "records_crc32c": _records_crc(records),
            "records": records,
        }
        tmp = self.fs.concat_path(self.path, name + ".tmp")
        with self.fs.create_stream(tmp, "wb") as f:
            f.write(json.dumps(doc, sort_keys=True, indent=1).encode())
            if self.sync_files:
                f.flush()
                os.fsync(f.fileno())
        final = self.fs.concat_path(self.path, name)
        if self.fs.exists(final):
            self.fs.rm_file(final)
        self.fs.rename(tmp, final)


class CrcFileSystemReader(FileSystemReader):
    """:class:`~torch.distributed.checkpoint.FileSystemReader` that verifies the CRC32C
    of every item a load reads before DCP reads any of them into the caller's tensors.

    Args:
        path: the checkpoint directory.
        require_crc: what a checkpoint without a CRC record means. ``True`` (the
            default): it is an error (:class:`CheckpointCorruptError`), so a checkpoint
            from the plain FileSystemWriter, or a directory the plain writer overwrote
            (its sidecar then names another save), does not load unverified.
            ``False``: such a checkpoint loads unverified, with a warning. A sidecar
            that is present but unreadable, or lacks a record for an item the load
            reads, is an error either way.
        _extension_registry: passed to FileSystemReader (CRCs cover the stored bytes,
            so stream transforms need nothing more here).

    Each rank reads the sidecar itself (in ``set_up_storage_reader``; DCP's files must
    be visible to every rank anyway) and verifies the items of its own load plan: all
    of them in ``prepare_local_plan``, which DCP runs on every rank before any rank
    reads data, so a corrupt item on one rank stops the load on all ranks before any
    tensor is written; ``read_data`` verifies whatever the final plan reads that was
    not verified then. The CRC covers a whole stored item, so an item of which the
    load needs only some rows is verified whole; items the load does not read are not
    read at all, so damage there does not stop it. Verifying reads each item once more
    than the plain reader (the second read normally hits the page cache).

    Errors: :class:`CheckpointCorruptError`, which DCP wraps in its
    ``CheckpointException`` (:func:`find_corrupt_error`).
    """

    def __init__(self, path, require_crc=True, _extension_registry=None):
        super().__init__(path, _extension_registry=_extension_registry)
        self.require_crc = require_crc
        self._crcs = None  # (file, offset, length) -> CRC32C; None: not verifying
        self._verified = set()

    def reset(self, checkpoint_id=None):
        super().reset(checkpoint_id)
        self._crcs = None
        self._verified = set()

    def set_up_storage_reader(self, metadata, is_coordinator, *args, **kwargs):
        super().set_up_storage_reader(metadata, is_coordinator, *args, **kwargs)
        self._verified = set()
        rank = self.rank if (not self.use_collectives and self.rank is not None) else None
        meta = getattr(metadata, "storage_meta", None)
        self._crcs = self._read_sidecar(sidecar_name(rank), getattr(meta, "save_id", None))

    def _read_sidecar(self, name, save_id):
        path = self.fs.concat_path(self.path, name)
        if not self.fs.exists(path):
            return self._no_record(
                f"{path} does not exist (written by the plain FileSystemWriter?)"
            )
        try:
            with self.fs.create_stream(path, "rb") as f:
                doc = json.loads(f.read().decode())
            if doc.get("format") != SIDECAR_FORMAT:
                raise ValueError(f"format {doc.get('format')!r}, expected {SIDECAR_FORMAT!r}")
            if doc.get("version") != SIDECAR_VERSION:
                raise ValueError(f"version {doc.get('version')!r}, expected {SIDECAR_VERSION}")
            records = doc["records"]
            stored, actual = doc["records_crc32c"], _records_crc(records)
            if stored != actual:
                raise ValueError(f"its records' CRC32C is 0x{actual:08x}, stored 0x{stored:08x}")
            crcs = {(r["file"], r["offset"], r["length"]): r["crc32c"] for r in records}
        except (OSError, ValueError, KeyError, TypeError, AttributeError) as e:
            raise CheckpointCorruptError(f"CRC record {path} is unreadable: {e}") from e
        if doc.get("save_id") != save_id:
            return self._no_record(
                f"{path} belongs to save {doc.get('save_id')!r}, but .metadata to save "
                f"{save_id!r} (the directory was overwritten by another writer?)"
            )
        return crcs

    def _no_record(self, why):
        if self.require_crc:
            raise CheckpointCorruptError(
                f"checkpoint {self.path} has no CRC record to verify against: {why}; "
                "pass require_crc=False to CrcFileSystemReader to load it unverified"
            )
        warnings.warn(f"checkpoint {self.path} loads unverified: {why}", stacklevel=3)
        return None

    def _verify(self, items):
        """Verifies the stored items behind ``items`` (ReadItems) not verified yet;
        raises CheckpointCorruptError at the first that does not check out."""
        if self._crcs is None:
            return
        by_file = {}
        for item in items:
            info = self.storage_data[item.storage_index]
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
                        raise CheckpointCorruptError(
                            f"{where}: CRC32C mismatch (stored 0x{expected:08x}, "
                            f"computed 0x{actual:08x})"
                        )
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
    return _dcp.save(
        state_dict,
        storage_writer=writer,
        process_group=process_group,
        use_collectives=use_collectives,
    )


def load(state_dict, checkpoint_id, process_group=None, require_crc=True, planner=None):
    """``dcp.load`` (in place into ``state_dict``) through a
    :class:`CrcFileSystemReader`. Raises :class:`CheckpointCorruptError` (chained from
    DCP's ``CheckpointException``) where any rank found one; every other failure
    propagates as DCP raised it."""
    reader = CrcFileSystemReader(checkpoint_id, require_crc=require_crc)
    try:
        _dcp.load(state_dict, storage_reader=reader, process_group=process_group, planner=planner)
    except CheckpointException as e:
        corrupt = find_corrupt_error(e)
        if corrupt is None:
            raise
        raise CheckpointCorruptError(str(corrupt)) from e
