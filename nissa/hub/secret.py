"""The run's stream secret: ``<log-dir>/<run_id>/stream.secret``, readable by its owner only.

Created with the run and sent in every ``hello`` (reconnects and ``esper-train upload`` included),
it is what makes the server take this run's events from this run directory and no one else. Every
rank of a run shares the directory and so the one secret: the first to start creates the file, the
others read it.
"""

from __future__ import annotations

import os
import pathlib
import secrets

import msgspec

from leyline.frames import StreamSecret

SECRET_FILE = "stream.secret"
_check = msgspec.json.Decoder(StreamSecret)


class SecretError(ValueError):
    """The run directory's secret file exists but does not hold a stream secret."""


def run_secret(run_dir: pathlib.Path, value: str | None = None) -> str:
    """The run's stream secret, created if the run directory has none yet (OSError if it cannot be).

    ``value``: the secret rank 0 created, for a rank on another machine (its own log dir has none yet);
    a file that holds another secret is a ``SecretError``."""
    path = pathlib.Path(run_dir) / SECRET_FILE
    if not path.exists():
        _create(path, value)
    found = _read(path)
    if value is not None and found != value:
        raise SecretError(f"{path} holds another secret than the run's (rank 0's): a different run's directory?")
    return found


def _read(path: pathlib.Path) -> str:
    text = path.read_text(encoding="ascii", errors="replace").strip()
    try:
        return _check.decode(msgspec.json.encode(text))
    except msgspec.ValidationError:
        raise SecretError(f"{path} does not hold a stream secret (43 characters of A-Z a-z 0-9 _ -)") from None


def _create(path: pathlib.Path, value: str | None = None) -> None:
    """Write a fresh secret to a private file, then link it into place: the file appears whole or not
    at all, and a rank that lost the race keeps the winner's."""
    path.parent.mkdir(parents=True, exist_ok=True)
    draft = path.with_name(f".{SECRET_FILE}.{os.getpid()}.{secrets.token_hex(4)}")
    fd = os.open(draft, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        os.write(fd, ((value or secrets.token_urlsafe(32)) + "\n").encode())
        os.fsync(fd)
    finally:
        os.close(fd)
    try:
        os.link(draft, path)
    except FileExistsError:
        pass
    except OSError:  # a file system without hard links: a rename, racing only with a rank started alongside
        if not path.exists():
            os.replace(draft, path)
    finally:
        draft.unlink(missing_ok=True)
