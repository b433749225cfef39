"""A test process's heap kept to what its tests use now: every full collection walks all of it, holding the
interpreter's lock, and in a worker that had kept each server its tests made (4 million objects) one took 3–4 s
on an idle machine, more under load: a stall of everything in the process (servers, clients, consoles) that
timed out a connect, a handshake or a first page."""

from __future__ import annotations

import gc

_FASTAPI_CACHES = ("_is_gen_callable_cached", "_is_async_gen_callable_cached", "_is_coroutine_callable_cached")
"""FastAPI's caches of what kind of callable an endpoint is, keyed by the endpoint and up to 4,096 each: every
app adds a few endpoints of its own (its ``/openapi.json``, ``/docs``, ``/redoc``, closures over the app), so
the caches kept some 1,300 apps alive, each with its store and what its tests wrote."""


def forget_apps() -> None:
    """Let go of the apps FastAPI's caches hold (they fill again with what the next app uses)."""
    from fastapi.dependencies import models

    for name in _FASTAPI_CACHES:
        cached = getattr(models, name, None)
        if cached is not None:
            cached.cache_clear()


def freeze_imports() -> None:
    """Leave what is alive now (the modules the tests imported, and all they built) out of every later
    collection: it lives as long as the process anyway."""
    gc.collect()
    gc.freeze()
