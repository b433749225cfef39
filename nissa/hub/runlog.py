"""The run's local append-only log: one JSON envelope a line, line k holding seq k.

It is the source of truth: the worker appends to it, the sender and a late upload read
from it. Because seq equals the line number, a sparse index of byte offsets (one every
``INDEX_STRIDE`` lines) is enough to find any seq without keeping the log in memory.
"""

from __future__ import annotations

import io
import logging
import os
import pathlib

from leyline import DecodeError, Event, decode_event

logger = logging.getLogger(__name__)

INDEX_STRIDE = 256
_CHUNK = 1 << 20


class LogCorrupt(ValueError):
    """The file is not a hub log: its lines are not seq 1, 2, 3 … of one run and rank."""


def _scan(path: pathlib.Path, index: list[int]) -> tuple[int, int]:
    """Count complete lines and fill ``index``; returns (last seq, end of the last complete line)."""
    lines = end = 0
    with open(path, "rb") as f:
        offset = 0
        while chunk := f.read(_CHUNK):
            start = 0
            while (nl := chunk.find(b"\n", start)) >= 0:
                if lines % INDEX_STRIDE == 0:
                    index.append(offset + start)
                lines += 1
                start = nl + 1
                end = offset + start
            offset += len(chunk)
    return lines, end


def _check_line(path: pathlib.Path, index: list[int], seq: int) -> Event:
    """Decode line ``seq``; it must carry that seq."""
    reader = LogReader(path, index)
    try:
        lines = reader.read(seq, (seq, 1 << 62), 1, 1 << 30)
    finally:
        reader.close()
    try:
        event = decode_event(lines[0])
    except (DecodeError, IndexError) as err:
        raise LogCorrupt(f"{path}: line {seq} is not an event ({err})") from None
    if event.seq != seq:
        raise LogCorrupt(f"{path}: line {seq} holds seq {event.seq}")
    return event


def check_inside(path: pathlib.Path) -> None:
    """A log is a regular file of its run directory: a link that leads out of it (to another file, or to
    a device such as ``/dev/zero`` that never ends) is refused, not followed."""
    if not path.exists() and not path.is_symlink():
        return
    real = path.resolve()
    if not real.is_relative_to(path.parent.resolve()) or not real.is_file():
        raise LogCorrupt(f"{path}: not a regular file inside its run directory (a link to {real}?): not followed")


class LogFile:
    """An existing log opened for reading: its length, index, run and rank (late upload)."""

    def __init__(self, path: pathlib.Path) -> None:
        self.path = pathlib.Path(path)
        check_inside(self.path)
        self.index: list[int] = []
        self.committed = _scan(self.path, self.index)
        if self.committed[0] == 0:
            raise LogCorrupt(f"{self.path}: no complete event in the log")
        self.first = _check_line(self.path, self.index, 1)
        self.run_id, self.rank = self.first.run_id, self.first.rank
        last = _check_line(self.path, self.index, self.committed[0])
        if (last.run_id, last.rank) != (self.run_id, self.rank):
            raise LogCorrupt(f"{self.path}: first and last lines are of different runs")


class RunLog:
    """The writer's side: appends batches of encoded events, recovering an existing log first."""

    def __init__(self, path: pathlib.Path) -> None:
        self.path = pathlib.Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        check_inside(self.path)
        self.index: list[int] = []
        last_seq, end = (0, 0)
        if self.path.exists():
            last_seq, end = _scan(self.path, self.index)
            if self.path.stat().st_size != end:
                # A crash mid-write leaves a partial last line: it was never committed.
                logger.warning("run log %s: dropping a partial last line", self.path)
                os.truncate(self.path, end)
            if last_seq:
                _check_line(self.path, self.index, last_seq)
        self._file = open(self.path, "ab", buffering=0)
        # (last seq, end offset): replaced as one tuple so readers on other threads see a pair.
        self.committed: tuple[int, int] = (last_seq, end)

    @property
    def last_seq(self) -> int:
        return self.committed[0]

    def append(self, lines: list[bytes]) -> None:
        """Write lines for seqs ``last_seq + 1`` …; on OSError nothing is committed."""
        seq, end = self.committed
        new_index: list[int] = []
        offset = end
        for line in lines:
            if seq % INDEX_STRIDE == 0:
                new_index.append(offset)
            seq += 1
            offset += len(line) + 1
        data = memoryview(b"\n".join(lines) + b"\n")
        try:
            written = 0
            while written < len(data):
                written += self._file.write(data[written:])
        except OSError:
            # Take back a partial batch so the log stays whole lines with contiguous seqs.
            self._truncate_to(end)
            raise
        self.index.extend(new_index)
        self.committed = (seq, offset)

    def _truncate_to(self, end: int) -> None:
        try:
            os.ftruncate(self._file.fileno(), end)
        except OSError as err:
            logger.error("run log %s: could not undo a partial write: %s", self.path, err)

    def sync(self) -> None:
        """Ask the OS to put the log on disk (at close: a crash of the machine loses nothing)."""
        try:
            os.fsync(self._file.fileno())
        except OSError as err:
            logger.warning("run log %s: fsync failed: %s", self.path, err)

    def close(self) -> None:
        if not self._file.closed:
            self.sync()
            self._file.close()


class LogReader:
    """Reads committed lines by seq from a log that may still be growing."""

    def __init__(self, path: pathlib.Path, index: list[int]) -> None:
        self._file: io.BufferedReader = open(path, "rb")
        self._index = index
        self._next_seq = 1

    def _seek(self, seq: int) -> None:
        k = (seq - 1) // INDEX_STRIDE
        self._file.seek(self._index[k])
        self._next_seq = k * INDEX_STRIDE + 1
        while self._next_seq < seq:
            self._file.readline()
            self._next_seq += 1

    def read(self, from_seq: int, committed: tuple[int, int], max_events: int, max_bytes: int) -> list[bytes]:
        """Lines ``from_seq`` … (without newline), at most up to the committed seq and the limits."""
        last_seq = committed[0]
        if from_seq > last_seq or from_seq < 1:
            return []
        if from_seq != self._next_seq:
            self._seek(from_seq)
        lines: list[bytes] = []
        size = 0
        readline = self._file.readline
        while self._next_seq <= last_seq and len(lines) < max_events and size < max_bytes:
            line = readline()
            lines.append(line[:-1])
            size += len(line)
            self._next_seq += 1
        return lines

    def close(self) -> None:
        self._file.close()
