"""The sidecar of tandem.dcp (docs/dcp_integrity.md): its format, file names, the
CRC32C of its JSON and of a file region, its exact text, and items' names in messages."""

import json

from tandem._core.file_checks import crc32c

# The sidecar's format name and version (docs/dcp_integrity.md). Bump the version on any
# change a reader of the previous version would misread. Version 1 (no CRC of the
# metadata file) is still read.
SIDECAR_FORMAT = "tandem.dcp.crc32c"
SIDECAR_VERSION = 2

# Bytes read per call when computing the CRC of a file region.
_READ_CHUNK = 8 << 20


def sidecar_name(rank=None):
    """The sidecar's file name: ``.metadata.crc32c``, or ``__<rank>.metadata.crc32c``."""
    return _metadata_name(rank) + ".crc32c"


def _metadata_name(rank=None):
    return ".metadata" if rank is None else f"__{rank}.metadata"


def _item_name(index):
    """``fqn``, or ``fqn (chunk offsets [...])``, of a MetadataIndex, for messages."""
    if index is None:
        return "?"
    if index.offset is None:
        return index.fqn
    return f"{index.fqn} (chunk offsets {list(index.offset)})"


def _json_crc(value):
    text = json.dumps(value, sort_keys=True, separators=(",", ":"))
    return crc32c(text.encode())


def _sidecar_text(doc):
    """The sidecar's exact text (the reader compares the file with it)."""
    return json.dumps(doc, sort_keys=True, indent=1)


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
