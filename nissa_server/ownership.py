"""Who may stream a run: whoever holds the secret it was created with.

A trainer creates a random stream secret with its run (kept in the run directory) and sends it in
every ``hello``, reconnects and late uploads included. The server keeps only its SHA-256 and refuses
a hello for the run without the same secret (close 4403), so no other client can take over a run's
stream, receive its commands or slip its own events in under the run's seqs.

Runs stored before streams had secrets have none: the first hello that presents one binds it (the
trainer resuming the run, or ``esper-train upload`` of its directory, which then creates the file).
"""

from __future__ import annotations

import hashlib
import hmac
import logging

from leyline import RunStatus
from leyline.frames import Hello
from nissa_server.runs import RunRegistry, RunState

logger = logging.getLogger(__name__)


class NotOwner(Exception):
    """A hello refused: no secret, or not the run's."""

    def __init__(self, reason: str, label: str) -> None:
        super().__init__(reason)
        self.label = label


def secret_hash(secret: str) -> bytes:
    # The secret is 256 random bits: a plain hash is as hard to invert as a slow one.
    return hashlib.sha256(secret.encode()).digest()


def claim(registry: RunRegistry, hello: Hello) -> RunState:
    """The run ``hello`` may stream to, created if new; raises ``NotOwner`` otherwise.

    Synchronous on purpose: two hellos racing for a new (or secret-less) run cannot both bind it.
    """
    if hello.secret is None:
        raise NotOwner(f"hello for run {hello.run_id} carries no stream secret", "no_secret")
    digest = secret_hash(hello.secret)
    run = registry.get(hello.run_id)
    if run is None:
        # An upload brings a past run's log: no trainer is behind it, so it is not live.
        status = RunStatus.LOST if hello.upload else RunStatus.LIVE
        return registry.create(hello.run_id, hello.name, secret_hash=digest, status=status)
    if run.secret_hash is None:
        logger.warning("run %s was stored without a stream secret; bound to the first one presented", run.run_id)
        run.secret_hash = digest
    elif not hmac.compare_digest(run.secret_hash, digest):
        raise NotOwner(f"stream secret does not match run {hello.run_id}", "wrong_secret")
    return run
