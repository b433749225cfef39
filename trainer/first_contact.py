"""A run's first contact with its server: a token the server refuses stops the run at its start, once, in
one line, instead of a whole run of retries reported at its end.

The hub connects as soon as it starts; this waits for that first try to end: taken (welcome), refused
(the server closed the stream for the token: 4401, or HTTP 401/403), or failed otherwise (the server is
away: the run trains and the hub re-sends later, as ever). A server that says nothing within the timeout
counts as away.
"""

from __future__ import annotations

import time

from nissa import NissaHub
from ranks import Ranks

POLL_S = 0.02


def refused_at_start(hub: NissaHub, timeout: float = 5.0) -> str | None:
    """Why the server refused ``hub``'s first connection (its close code and reason), or None."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if hub.stats.connected:
            return None
        if hub.stats.last_error is not None:
            time.sleep(POLL_S)  # the sender records the error first, then whether it was a refusal
            return hub.report().refused
        time.sleep(POLL_S)
    return None


def token_refused(hub: NissaHub, ranks: Ranks, server: str | None) -> str | None:
    """Rank 0 asks; every rank hears. None: go on. Else the hub is closed and the run must stop: the line to
    say on rank 0 (an empty one on the others)."""
    why = ranks.agree(refused_at_start(hub) if ranks.is_main and server else None)
    if why is None:
        return None
    hub.close(0.0)
    return (f"--server {server} refused this run's stream at its start ({why}); the server's token goes in "
            "--token or NISSA_TOKEN") if ranks.is_main else ""
