"""A run's first contact with its server: a token the server refuses stops the run at its start, once, in
one line, instead of a whole run of retries reported at its end.

The stream connects as soon as the run is made; rank 0 waits for that first try to end (``Run.first_contact``):
taken, refused (the server closed the stream for the token: 4401, or HTTP 401/403), or failed otherwise (the
server is away: the run trains and re-sends later, as ever). Every rank hears what rank 0 heard.
"""

from __future__ import annotations

from nissa import Run


def token_refused(run: Run, server: str | None) -> str | None:
    """Rank 0 asks; every rank hears. None: go on. Else the run is abandoned and must stop: the line to say on
    rank 0 (an empty one on the others)."""
    ranks = run.ranks
    why = ranks.agree(run.first_contact() if ranks.is_main and server else None)
    if why is None:
        return None
    run.abandon()
    return (f"--server {server} refused this run's stream at its start ({why}); the server's token goes in "
            "--token or NISSA_TOKEN") if ranks.is_main else ""
