"""The environment variables the client library reads: read here, and nowhere else in ``nissa``.

``nissa.init``, ``nissa.Api`` and the ``nissa`` command take these values when no argument gives one; every
other part of the library receives them as arguments. (torchrun's own variables, ``WORLD_SIZE``, ``RANK`` and
``LOCAL_RANK``, are read by the ranks package, which joins the process group they describe.)
"""

from __future__ import annotations

import os

SERVER = "NISSA_SERVER"
"""nissa-server URL (or several, comma-separated) for a run or a query that names none."""
TOKEN = "NISSA_TOKEN"
"""Bearer token for a server that wants one."""


def server() -> str | None:
    """``$NISSA_SERVER`` as set (None when unset)."""
    return os.environ.get(SERVER)


def token() -> str | None:
    """``$NISSA_TOKEN`` as set (None when unset)."""
    return os.environ.get(TOKEN)
