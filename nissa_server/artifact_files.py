"""Artifact files on disk and their rows, kept in step: an upload lands in its run's folder and gets its
row in one writer transaction that first finds the run (and locks its row), so an upload racing
``DELETE /runs/{id}`` either lands before the delete (which then removes it) or finds the run gone and
leaves nothing behind. Uploads are spooled outside the runs' folders, which a delete removes whole.
"""

from __future__ import annotations

import os
import pathlib
from dataclasses import dataclass

from nissa_server.store import sql
from nissa_server.store.conn import Conn

SPOOL = ".incoming"
"""Folder under the artifact directory where uploads are written until they are complete."""


@dataclass(frozen=True)
class Quota:
    """What one run may hold in artifacts."""

    max_files: int
    max_bytes: int


@dataclass(frozen=True)
class Refused:
    status: int
    reason: str


def held(conn: Conn, run_key: int, but: str) -> tuple[int, int]:
    """(files, bytes) a run's artifacts hold, leaving out ``but`` (an upload under that name replaces it)."""
    row = conn.execute("SELECT COUNT(*), COALESCE(SUM(size), 0) FROM artifacts WHERE run_key = ? AND name <> ?",
                       (run_key, but)).fetchone()
    return int(row[0]), int(row[1])


def stored(conn: Conn, run_key: int, name: str) -> bool:
    """Whether the run holds an artifact of this name (one stored before its name's rule tightened)."""
    row = conn.execute("SELECT 1 FROM artifacts WHERE run_key = ? AND name = ?", (run_key, name)).fetchone()
    return row is not None


def room(quota: Quota, files: int, nbytes: int, run_id: str) -> int | Refused:
    """Bytes one more artifact of a run holding (``files``, ``nbytes``) may have, or why it may have none."""
    if files >= quota.max_files:
        return Refused(413, f"run {run_id!r} holds {files} artifacts, the most a run may")
    left = quota.max_bytes - nbytes
    if left <= 0:
        return Refused(413, f"run {run_id!r} holds {nbytes} bytes of artifacts, the most a run may")
    return left


def land(conn: Conn, run_key: int, run_id: str, partial: pathlib.Path, path: pathlib.Path, row: tuple,
         quota: Quota) -> Refused | None:
    """Inside a writer transaction: move a complete upload into place and record it, if its run is still
    there and within its quota; else say why not (the caller removes the spooled file)."""
    name, size = row[0], row[1]
    if conn.execute(f"SELECT 1 FROM runs WHERE run_key = ?{conn.for_update}", (run_key,)).fetchone() is None:
        return Refused(404, f"unknown run {run_id!r} (deleted meanwhile)")
    left = room(quota, *held(conn, run_key, name), run_id)
    if isinstance(left, Refused):
        return left
    if size > left:
        return Refused(413, f"run {run_id!r} has {left} bytes left of its {quota.max_bytes} for artifacts")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        os.replace(partial, path)
    except OSError as err:  # the disk, not the request: said as such, and nothing recorded
        return Refused(507, f"cannot store the artifact: {err.strerror or err}")
    sql.put_artifact(conn, run_key, *row)
    return None
