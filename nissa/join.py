"""Joining a run: this process's ranks, and the run id and stream secret every rank shares.

Under torchrun ``nissa.init`` joins the process group (or uses the one the loop already made); rank 0 picks
the run id and creates the run directory with its stream secret, and every rank gets both through the
group, exactly as ``esper-train`` does.
"""

from __future__ import annotations

import pathlib
import re
import secrets
import time

import msgspec

from leyline.events import RUN_ID_RULE, RunId
from nissa.hub.secret import SecretError, run_secret
from ranks import Ranks


def new_run_id(name: str) -> str:
    """``<name>-<utc time>-<random>``: unique, sortable, and a valid leyline RunId."""
    safe = re.sub(r"[^A-Za-z0-9._-]+", "-", name).strip("-.")[:64] or "run"
    return f"{safe}-{time.strftime('%Y%m%d-%H%M%S', time.gmtime())}-{secrets.token_hex(3)}"


def checked_run_id(value: str, flag: str = "run_id") -> str:
    try:
        return msgspec.convert(value, RunId)
    except msgspec.ValidationError:
        raise ValueError(f"{flag}: {value!r} must be {RUN_ID_RULE}") from None


def agree_on_run(ranks: Ranks, log_dir: pathlib.Path, run_id: str | None, name: str) -> str:
    """Rank 0 chooses the run id and creates its directory and stream secret; every rank gets both.
    ``OSError`` / ``SecretError`` say why the directory failed (on the other ranks: an ``OSError`` saying rank 0's
    failed)."""
    chosen: tuple[str, str] | None = None
    if ranks.is_main:
        rid = checked_run_id(run_id) if run_id else new_run_id(name)
        try:
            chosen = (rid, run_secret(log_dir / rid))
        except (OSError, SecretError):
            ranks.agree(None)  # the others stop too
            raise
    chosen = ranks.agree(chosen)
    if chosen is None:
        raise OSError(f"rank 0 could not create the run's directory under {log_dir} (its error says why)")
    rid, secret = chosen
    if not ranks.is_main:
        run_secret(log_dir / rid, secret)
    return rid
