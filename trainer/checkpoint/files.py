"""A run's checkpoints on disk: ``<run dir>/checkpoints/round-NNNNNN/``, one per round boundary.

Each rank writes its own part into the checkpoint's directory: ``rankR.pt`` (``torch.save`` of the
rank's state) and ``rankR.json``, its manifest (sizes and sha256 of its files, the run id, the world
size, the round, step and epoch, the torch version, how long the training thread paused for it).
Each file is written beside (``*.tmp``), fsynced, renamed into place, and the directory fsynced; the
manifest comes last, so a part with a manifest is whole. A checkpoint is complete when every rank's
manifest is there. Loading checks sizes and checksums first, then ``torch.load(weights_only=True)``:
a checkpoint is a file someone may hand over, and it holds only tensors and plain containers. For the
same reason only the names the format gives are read (``round-NNNNNN/rankR.json`` and the ``rankR.pt``
its manifest lists), each only as a regular file inside the checkpoint directory: a link (to
``/dev/zero``, say), a device, a pipe or a manifest naming any other file is refused, never read.
"""

from __future__ import annotations

import errno
import hashlib
import json
import logging
import os
import pathlib
import pickle
import re
import shutil
import stat
import zipfile
from dataclasses import dataclass
from typing import IO, Any

import torch

logger = logging.getLogger(__name__)

FORMAT = "esper-checkpoint/1"
_NAME = re.compile(r"^round-(\d{6,})$")
MANIFEST_MAX_BYTES = 1 << 20
"""A manifest is a few hundred bytes plus the training config: anything past this is not one."""


class CheckpointError(ValueError):
    """A checkpoint that cannot be used (missing, incomplete, truncated, corrupt); the message says which."""


def checkpoint_name(round_: int) -> str:
    return f"round-{round_:06d}"


def is_checkpoint_name(name: str) -> bool:
    """``round-NNNNNN``: a name, never a path (``/abs``, ``round-000001/../x``)."""
    return _NAME.match(name) is not None


def open_regular(path: pathlib.Path, name: str) -> IO[bytes]:
    """``path`` opened for reading if it is a regular file; a symbolic link, a device, a pipe or a directory is
    refused (``CheckpointError``) without being read or waited on. FileNotFoundError if it is not there."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError as err:
        if err.errno == errno.ELOOP:
            raise CheckpointError(f"checkpoint {name}: {path.name} is a symbolic link, not a regular file") from None
        if err.errno == errno.ENOENT:
            raise
        raise CheckpointError(f"checkpoint {name}: {path.name} cannot be opened: {err.strerror}") from None
    f = os.fdopen(fd, "rb")
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        f.close()
        raise CheckpointError(f"checkpoint {name}: {path.name} is not a regular file")
    return f


@dataclass(frozen=True)
class Written:
    """One rank's part of a checkpoint, once on disk."""

    name: str
    path: pathlib.Path
    """The checkpoint's directory."""
    bytes: int
    """Size of this rank's state file."""
    round: int
    step: int
    epoch: int
    pause_s: float
    write_s: float


def _fsync_dir(path: pathlib.Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _replace_durably(tmp: pathlib.Path, final: pathlib.Path) -> None:
    os.replace(tmp, final)
    _fsync_dir(final.parent)


def sha256_of(path: pathlib.Path) -> str:
    with path.open("rb") as f:
        return _sha256(f)


def _sha256(f: IO[bytes]) -> str:
    digest = hashlib.sha256()
    for block in iter(lambda: f.read(1 << 20), b""):
        digest.update(block)
    return digest.hexdigest()


class CheckpointStore:
    """The checkpoints of one run (``root``: its ``checkpoints`` directory), for one rank."""

    def __init__(self, root: pathlib.Path, rank: int = 0) -> None:
        self.root = root
        self.rank = rank

    # --- writing ---------------------------------------------------------------------------------

    def write(self, name: str, state: dict[str, Any], manifest: dict[str, Any]) -> int:
        """Write this rank's part of checkpoint ``name``; returns the state file's size."""
        directory = self.root / name
        directory.mkdir(parents=True, exist_ok=True)
        data, meta = directory / f"rank{self.rank}.pt", directory / f"rank{self.rank}.json"
        meta.unlink(missing_ok=True)  # rewriting a round (a resumed run does): unfinished until the new manifest
        tmp = data.with_name(data.name + ".tmp")
        with tmp.open("wb") as f:
            torch.save(state, f)
            f.flush()
            os.fsync(f.fileno())
        size, digest = tmp.stat().st_size, sha256_of(tmp)
        _replace_durably(tmp, data)
        body = {**manifest, "format": FORMAT, "rank": self.rank,
                "files": {data.name: {"bytes": size, "sha256": digest}}}
        tmp = meta.with_name(meta.name + ".tmp")
        with tmp.open("w", encoding="utf-8") as f:
            json.dump(body, f, indent=1, sort_keys=True)
            f.flush()
            os.fsync(f.fileno())
        _replace_durably(tmp, meta)
        return size

    def prune(self, keep: int) -> list[str]:
        """Delete all but the newest ``keep`` complete checkpoints (and unfinished ones older than the
        newest complete one); returns the names deleted."""
        names = self.names()
        complete = [n for n in names if self.complete(n)]
        kept = set(complete[-keep:]) if keep > 0 else set(complete)
        newest = complete[-1] if complete else None
        gone = [n for n in names if n not in kept and (n in complete or (newest is not None and n < newest))]
        for name in gone:
            shutil.rmtree(self.root / name, ignore_errors=True)
        return gone

    def set_aside_after(self, name: str) -> pathlib.Path | None:
        """Move the checkpoint directories newer than ``name`` into ``abandoned-after-<name>[-N]/`` (a run
        resumed from an older checkpoint writes those rounds anew: left in place, they would mix with the new
        ones, and pruning could take a directory another rank is writing). Returns where, or None."""
        newer = [n for n in self.names() if n > name]
        if not newer:
            return None
        target, n = self.root / f"abandoned-after-{name}", 1
        while target.exists():
            n += 1
            target = self.root / f"abandoned-after-{name}-{n}"
        target.mkdir()
        for old in newer:
            os.replace(self.root / old, target / old)
        _fsync_dir(self.root)
        return target

    # --- reading ---------------------------------------------------------------------------------

    def names(self) -> list[str]:
        """Checkpoint directories, oldest first (complete or not)."""
        if not self.root.is_dir():
            return []
        return sorted(p.name for p in self.root.iterdir()
                      if _NAME.match(p.name) and not p.is_symlink() and p.is_dir())

    def manifest(self, name: str, rank: int | None = None) -> dict[str, Any]:
        rank = self.rank if rank is None else rank
        if not is_checkpoint_name(name):
            raise CheckpointError(f"checkpoint {name!r}: not a checkpoint's name (round-NNNNNN)")
        if (self.root / name).is_symlink():
            raise CheckpointError(f"checkpoint {name}: a symbolic link, not a directory of {self.root}")
        path = self.root / name / f"rank{rank}.json"
        try:
            with open_regular(path, name) as f:
                raw = f.read(MANIFEST_MAX_BYTES + 1)
            if len(raw) > MANIFEST_MAX_BYTES:
                raise CheckpointError(f"checkpoint {name}: {path.name} is over {MANIFEST_MAX_BYTES} bytes: "
                                      "not a manifest")
            body = json.loads(raw.decode("utf-8"))
        except FileNotFoundError:
            raise CheckpointError(f"checkpoint {name}: rank {rank}'s part is incomplete (no {path.name})") from None
        except (OSError, ValueError) as err:
            raise CheckpointError(f"checkpoint {name}: {path.name} is unreadable: {err}") from None
        if not isinstance(body, dict) or body.get("format") != FORMAT or not isinstance(body.get("files"), dict):
            raise CheckpointError(f"checkpoint {name}: {path.name} is not a {FORMAT} manifest")
        return body

    def complete(self, name: str) -> bool:
        """Every rank's manifest is there (their files are not checked: ``verify`` does)."""
        try:
            world = int(self.manifest(name, 0).get("world_size", 1))
        except (CheckpointError, TypeError, ValueError):
            return False
        return all((self.root / name / f"rank{r}.json").is_file() for r in range(world))

    def verify(self, name: str, ranks: range | None = None) -> dict[str, Any]:
        """Check the sizes and checksums of ``ranks``' parts (all the run's by default); returns rank
        0's manifest. Raises ``CheckpointError`` naming the checkpoint and the file."""
        directory = self.root / name
        if not is_checkpoint_name(name) or directory.is_symlink() or not directory.is_dir():
            raise CheckpointError(f"checkpoint {name}: no such checkpoint in {self.root}")
        head = self.manifest(name, 0)
        for rank in ranks if ranks is not None else range(int(head.get("world_size", 1))):
            self._check_file(name, rank, self.manifest(name, rank)["files"]).close()
        return head

    def _check_file(self, name: str, rank: int, files: dict[str, Any]) -> IO[bytes]:
        """Rank ``rank``'s state file, checked against its manifest's entry ``files``: returned open, so that
        what is loaded is the file that was checked."""
        expected = f"rank{rank}.pt"
        if set(files) != {expected} or not isinstance(files[expected], dict):
            raise CheckpointError(f"checkpoint {name}: rank{rank}.json must list {expected} and nothing else, "
                                  f"not {sorted(files)[:4]}")
        entry, path = files[expected], self.root / name / expected
        try:
            f = open_regular(path, name)
        except FileNotFoundError:
            raise CheckpointError(f"checkpoint {name}: {path.name} is missing") from None
        size = os.fstat(f.fileno()).st_size
        if size != entry.get("bytes"):
            f.close()
            raise CheckpointError(f"checkpoint {name}: {path.name} is truncated or altered "
                                  f"({size} bytes, the manifest says {entry.get('bytes')})")
        if _sha256(f) != entry.get("sha256"):
            f.close()
            raise CheckpointError(f"checkpoint {name}: {path.name} is corrupt (sha256 differs from the manifest)")
        f.seek(0)
        return f

    def load(self, name: str) -> dict[str, Any]:
        """This rank's state of checkpoint ``name``, verified, on the CPU."""
        path = self.root / name / f"rank{self.rank}.pt"
        try:
            with self._check_file(name, self.rank, self.manifest(name)["files"]) as f:
                state = torch.load(f, map_location="cpu", weights_only=True)
        except (RuntimeError, pickle.UnpicklingError, EOFError, zipfile.BadZipFile, OSError) as err:
            raise CheckpointError(f"checkpoint {name}: {path.name} cannot be loaded: {err}".splitlines()[0]) from None
        if not isinstance(state, dict) or "progress" not in state:
            raise CheckpointError(f"checkpoint {name}: {path.name} holds no esper-train state")
        return state

    def latest_good(self, before: str | None = None) -> str | None:
        """The newest complete checkpoint (older than ``before``) whose files check out, or None."""
        for name in reversed(self.names()):
            if before is not None and name >= before:
                continue
            try:
                if self.complete(name):
                    self.verify(name)
                    return name
            except CheckpointError as err:
                logger.warning("skipping %s", err)
        return None
