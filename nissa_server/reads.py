"""Reads that cost (a page of runs, a run, series, distributions, a page of events): a few at a time, one run's at
a time, and each client's share bounded.

Such a read is CPU work on a reader thread (decoding, downsampling, encoding) that holds the interpreter's lock
in turns with the event loop and the store's writer: many at once would slow every ack, watcher and request.
So at most ``slots`` run at once server-wide, and the reads of one run take one slot between them (a wide run
read by many clients waits for itself, not the reads of other runs: those take the other slots), as do those of no
run in particular (pages of the runs table) between them. A client (an
address) with ``per_client`` reads in progress or waiting already is answered 429 with ``Retry-After``: it asks
faster than the server serves everyone. Ingest, watchers and ``/healthz`` never pass here.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import Counter
from collections.abc import AsyncIterator
from dataclasses import dataclass, field

from fastapi import HTTPException, Request

from nissa_server.openapi import Responses, error

RETRY_AFTER_S = 1
"""What a 429 tells the client to wait before it asks again (a read takes a fraction of a second)."""
BUSY: Responses = {429: error("This client has as many reads in progress or waiting as one may (`Retry-After` "
                              "says when to ask again)", "this client has 16 reads in progress or waiting, the most "
                              "one may: wait for their replies, or ask again in 1 s")}


@dataclass
class _Key:
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    users: int = 0


class ReadGate:
    """Admits costly reads: ``client`` bounds a client's reads, ``slot`` a run's and the server's."""

    def __init__(self, slots: int, per_client: int) -> None:
        self.per_client = per_client
        self._slots = asyncio.Semaphore(slots)
        self._keyless = asyncio.Semaphore(max(1, slots // 2))
        """Reads of no run in particular (the runs table) take half the slots at most: a page of runs is the
        costliest read there is, and a table polled by many leaves the reads of runs' charts their share."""
        self._clients: Counter[str] = Counter()
        self._keys: dict[object, _Key] = {}
        self.refused = 0
        """Reads answered 429, for ``/metrics``."""

    @contextlib.asynccontextmanager
    async def client(self, request: Request) -> AsyncIterator[None]:
        """One read of the request's client, or 429 where it has ``per_client`` in progress or waiting."""
        who = request.client.host if request.client is not None else ""
        if self._clients[who] >= self.per_client:
            self.refused += 1
            raise HTTPException(429, f"this client has {self._clients[who]} reads in progress or waiting, the most "
                                f"one may: wait for their replies, or ask again in {RETRY_AFTER_S} s",
                                headers={"Retry-After": str(RETRY_AFTER_S)})
        self._clients[who] += 1
        try:
            yield
        finally:
            self._clients[who] -= 1
            if not self._clients[who]:
                del self._clients[who]

    @contextlib.asynccontextmanager
    async def slot(self, key: object = None) -> AsyncIterator[None]:
        """A slot of the server's, the reads of ``key`` (a run) one at a time (None: no such turn)."""
        if key is None:
            async with self._keyless, self._slots:
                yield
            return
        turn = self._keys.setdefault(key, _Key())
        turn.users += 1
        try:
            async with turn.lock, self._slots:
                yield
        finally:
            turn.users -= 1
            if not turn.users:
                del self._keys[key]

    @contextlib.asynccontextmanager
    async def read(self, request: Request, key: object = None) -> AsyncIterator[None]:
        """``client`` and ``slot`` at once: a read of one run (or of none in particular)."""
        async with self.client(request), self.slot(key):
            yield
