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

from leyline.frames import Hello


class NotOwner(Exception):
    """A hello refused: no secret, or not the run's."""

    def __init__(self, reason: str, label: str) -> None:
        super().__init__(reason)
        self.label = label


def secret_hash(secret: str) -> bytes:
    # The secret is 256 random bits: a plain hash is as hard to invert as a slow one.
    return hashlib.sha256(secret.encode()).digest()


def digest_of(hello: Hello) -> bytes:
    """The hash of the secret ``hello`` presents; raises ``NotOwner`` when it presents none."""
    if hello.secret is None:
        raise NotOwner(f"hello for run {hello.run_id} carries no stream secret", "no_secret")
    return secret_hash(hello.secret)


def check(stored: bytes | None, digest: bytes, run_id: str) -> None:
    """Raises ``NotOwner`` unless ``digest`` is the run's secret. ``stored`` is the run's hash once the
    claim is made, so a run stored without a secret already has this one (see ``store.sql.claim_run``)."""
    if stored is None or not hmac.compare_digest(stored, digest):
        raise NotOwner(f"stream secret does not match run {run_id}", "wrong_secret")
