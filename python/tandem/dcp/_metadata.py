"""Reading DCP's ``.metadata`` (a pickle) without trusting it (docs/dcp_integrity.md,
"What is checked, and when").

:func:`unpickle_metadata` refuses every global but those a DCP metadata file uses, after
tandem._C.check_pickle_bounds checked every argument and memo index against the bytes
(the C unpickler sizes its memo by a PUT's index: a 1 KiB file could ask for 2 GiB), so
unpickling calls no other code and allocates no more than the file's size.
:func:`check_metadata` bounds what the unpickled object asks for by the files present.

Both raise ``ValueError`` saying what is wrong; the caller names the metadata file, except
for :class:`DataFileError`, whose message names the data file. Thread-safe.
"""

import dataclasses
import enum
import io
import math
import os
import pathlib
import pickle

import torch
import torch.distributed.checkpoint.filesystem as _fs
import torch.distributed.checkpoint.metadata as _md

from tandem._core.file_checks import check_pickle_bounds
from tandem.dcp._sidecar import _item_name

# Globals by (module, name) that a DCP metadata pickle may name, besides the metadata
# module's dataclasses and enums and torch's dtypes (checked in find_class).
_PATHS = ("Path", "PosixPath", "WindowsPath", "PurePath", "PurePosixPath", "PureWindowsPath")
_PLAIN_GLOBALS = {
    ("torch", "Size"): torch.Size,
    ("torch.serialization", "_get_layout"): torch.serialization._get_layout,
    ("torch.distributed.checkpoint.filesystem", "_StorageInfo"): _fs._StorageInfo,
    **{("pathlib", name): getattr(pathlib, name) for name in _PATHS},
}


class DataFileError(ValueError):
    """A data file the metadata names is missing or too short; the message names the file
    (not the metadata file) and the item."""


def _enum_member(cls, name):
    """``getattr`` as a metadata pickle may use it: a member of an allowed enum."""
    if not (isinstance(cls, type) and issubclass(cls, enum.Enum) and cls.__module__ == _md.__name__):
        raise pickle.UnpicklingError(f"getattr on {cls!r} is not allowed in DCP metadata")
    if not isinstance(name, str) or name not in cls.__members__:
        raise pickle.UnpicklingError(f"{cls.__name__} has no member {name!r}")
    return cls.__members__[name]


class _MetadataUnpickler(pickle.Unpickler):
    def find_class(self, module, name):
        found = _PLAIN_GLOBALS.get((module, name))
        if found is not None:
            return found
        if (module, name) == ("builtins", "getattr"):
            return _enum_member
        if module == "torch" and isinstance(getattr(torch, name, None), torch.dtype):
            return getattr(torch, name)
        if module == _md.__name__ and not name.startswith("__"):
            obj = getattr(_md, name, None)
            if isinstance(obj, type) and (dataclasses.is_dataclass(obj)
                                          or issubclass(obj, enum.Enum)):
                return obj
        raise pickle.UnpicklingError(f"global {module}.{name} is not allowed in DCP metadata")

    def persistent_load(self, pid):
        raise pickle.UnpicklingError("persistent ids are not allowed in DCP metadata")


def unpickle_metadata(data):
    """The object pickled in ``data`` (bytes), through the restricted unpickler. Raises
    ValueError (naming the refused global, or pickle's complaint) when it is not one."""
    try:
        check_pickle_bounds(bytes(data))
        return _MetadataUnpickler(io.BytesIO(data)).load()
    except RecursionError as e:  # nesting deeper than the interpreter allows
        raise ValueError("it is not a DCP metadata pickle: nested too deeply") from e
    except Exception as e:  # noqa: BLE001: pickle raises many types on bad input
        raise ValueError(f"it is not a DCP metadata pickle: {type(e).__name__}: {e}") from e


def _ints(value, what, length=None):
    """``value`` as a tuple of ints >= 0 (a torch.Size or a tuple/list of ints)."""
    if not isinstance(value, (torch.Size, tuple, list)) or not all(type(v) is int and v >= 0
                                                                   for v in value):
        raise ValueError(f"{what} is {value!r}, not a list of integers >= 0")
    if length is not None and len(value) != length:
        raise ValueError(f"{what} has {len(value)} dimensions, expected {length}")
    return tuple(value)


def _relative_file(name):
    """Whether ``name`` is a plain relative path inside the checkpoint directory."""
    if not isinstance(name, str) or not name or os.path.isabs(name):
        return False
    return all(part not in ("", ".", "..") for part in name.replace("\\", "/").split("/"))


def _check_storage(storage, directory):
    """Every _StorageInfo's file exists and holds its byte range; the ranges of one file
    do not overlap. Returns (bytes of the data files, whether any item has transforms)."""
    if not isinstance(storage, dict):
        raise ValueError(f"storage_data is a {type(storage).__name__}, not a dict")
    sizes, ranges, transformed = {}, {}, False
    for index, info in storage.items():
        if not isinstance(index, _md.MetadataIndex) or not isinstance(index.fqn, str):
            raise ValueError(f"storage_data has a key {index!r} that is not a MetadataIndex")
        if not isinstance(info, _fs._StorageInfo):
            raise ValueError(f"storage_data[{index.fqn!r}] is a {type(info).__name__}")
        name = info.relative_path
        if not _relative_file(name):
            raise ValueError(f"item {index.fqn!r} names file {name!r}, not a relative path")
        if not all(type(n) is int and n >= 0 for n in (info.offset, info.length)):
            raise ValueError(f"item {index.fqn!r} has offset {info.offset!r} and length "
                             f"{info.length!r}")
        file = os.path.join(directory, name)
        if name not in sizes:
            try:
                sizes[name] = os.stat(file).st_size
            except OSError as e:
                raise DataFileError(f"{file}: cannot open the file holding "
                                    f"{_item_name(index)}: {e}") from e
        if info.offset + info.length > sizes[name]:
            raise DataFileError(f"{file}: item {_item_name(index)}, bytes [{info.offset}, "
                                f"{info.offset + info.length}): the file ends at byte "
                                f"{sizes[name]}")
        ranges.setdefault(name, []).append((info.offset, info.length, index.fqn))
        transformed |= bool(info.transform_descriptors)
    for name, spans in ranges.items():
        spans.sort()
        for (a, n, fqn_a), (b, _, fqn_b) in zip(spans, spans[1:]):
            if a + n > b:
                raise ValueError(f"items {fqn_a!r} and {fqn_b!r} overlap in {name}")
    return sum(sizes.values()), transformed


def check_metadata(md, directory):
    """Checks an unpickled DCP Metadata against the files in ``directory``: its types,
    each tensor's size and chunks (inside the tensor, each with its stored item of at
    least the chunk's bytes), each stored item's byte range (inside its file, no two
    overlapping), and that the tensors' bytes add up to no more than the data files
    hold. Raises ValueError naming the entry at fault."""
    if not isinstance(md, _md.Metadata):
        raise ValueError(f"it holds a {type(md).__name__}, not a DCP Metadata")
    if md.storage_meta is not None and not isinstance(md.storage_meta, _md.StorageMeta):
        raise ValueError(f"storage_meta is a {type(md.storage_meta).__name__}")
    entries = md.state_dict_metadata
    if not isinstance(entries, dict):
        raise ValueError(f"state_dict_metadata is a {type(entries).__name__}, not a dict")
    storage = md.storage_data
    file_bytes, transformed = _check_storage(storage, directory)
    lengths = {(i.fqn, i.offset): info.length for i, info in storage.items()}
    tensor_bytes = 0
    for fqn, entry in entries.items():
        if not isinstance(fqn, str):
            raise ValueError(f"state_dict_metadata has a key {fqn!r} that is not a string")
        if isinstance(entry, _md.BytesStorageMetadata):
            if (fqn, None) not in lengths:
                raise ValueError(f"item {fqn!r} has no storage entry")
            continue
        if not isinstance(entry, _md.TensorStorageMetadata):
            raise ValueError(f"entry {fqn!r} is a {type(entry).__name__}")
        props = entry.properties
        if not isinstance(props, _md.TensorProperties) or not isinstance(props.dtype, torch.dtype):
            raise ValueError(f"tensor {fqn!r} has no dtype")
        size = _ints(entry.size, f"tensor {fqn!r}'s size")
        item = props.dtype.itemsize
        tensor_bytes += math.prod(size) * item
        if not isinstance(entry.chunks, list):
            raise ValueError(f"tensor {fqn!r}'s chunks are a {type(entry.chunks).__name__}")
        for chunk in entry.chunks:
            if not isinstance(chunk, _md.ChunkStorageMetadata):
                raise ValueError(f"tensor {fqn!r} has a chunk {chunk!r}")
            where = f"tensor {fqn!r}'s chunk at {list(chunk.offsets)}"
            offsets = _ints(chunk.offsets, f"{where}: offsets", len(size))
            sizes = _ints(chunk.sizes, f"{where}: sizes", len(size))
            if any(o + n > s for o, n, s in zip(offsets, sizes, size)):
                raise ValueError(f"{where}: sizes {list(sizes)} leave the tensor's {list(size)}")
            stored = lengths.get((fqn, offsets))
            if stored is None:
                raise ValueError(f"{where} has no storage entry")
            if not transformed and math.prod(sizes) * item > stored:
                raise ValueError(f"{where} holds {math.prod(sizes) * item} bytes, its stored "
                                 f"item {stored}")
    if not transformed and tensor_bytes > file_bytes:
        raise ValueError(f"its tensors hold {tensor_bytes} bytes, more than the {file_bytes} "
                         "bytes of its data files")
