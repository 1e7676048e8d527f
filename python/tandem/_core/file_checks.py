"""The extension's checks of a file's bytes, for tandem.dcp: crc32c (CRC32C, Castagnoli)
and check_pickle_bounds (the opcodes of a pickle walked against its bytes)."""

from tandem._C import check_pickle_bounds, crc32c  # noqa: F401
