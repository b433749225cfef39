"""An event file's records, each checked as it is read: TensorBoard's format (TFRecord) is a run of records,
each its data's length (8 bytes), that length's masked CRC-32C (4), the data, the data's masked CRC-32C (4).

TensorBoard's own loader stops quietly at the first record that fails (a file still being written ends in
one), which would make a garbage file, or one cut off, look like a short one; here such a record raises
``Corrupt`` with where it starts, after every good record before it."""

from __future__ import annotations

import os
import pathlib
import struct
from collections.abc import Iterator

HEADER = 12
"""A record's length and its checksum."""
FOOTER = 4
"""A record's data's checksum."""


class Corrupt(ValueError):
    """An event file that holds no good record from byte ``offset`` on."""

    def __init__(self, offset: int, why: str) -> None:
        super().__init__(f"{why} at byte {offset}")
        self.offset = offset


def records(path: pathlib.Path) -> Iterator[tuple[int, bytes]]:
    """Each record's data in ``path`` with the byte it starts at; ``Corrupt`` at the first record cut off or
    whose checksums do not match."""
    # TensorBoard's writer frames its records with this function; reading them back checks the same framing.
    from tensorboard.compat.tensorflow_stub.pywrap_tensorflow import masked_crc32c

    with path.open("rb") as f:
        size = os.fstat(f.fileno()).st_size
        offset = 0
        while header := f.read(HEADER):
            if len(header) < HEADER:
                raise Corrupt(offset, "record cut off")
            if struct.unpack("<I", header[8:])[0] != masked_crc32c(header[:8]):
                raise Corrupt(offset, "record length's checksum does not match")
            (length,) = struct.unpack("<Q", header[:8])
            if offset + HEADER + length + FOOTER > size:
                raise Corrupt(offset, "record cut off")
            data = f.read(length)
            if struct.unpack("<I", f.read(FOOTER))[0] != masked_crc32c(data):
                raise Corrupt(offset, "record data's checksum does not match")
            yield offset, data
            offset += HEADER + length + FOOTER
