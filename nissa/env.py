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


SWEEP_TRIAL = "NISSA_SWEEP_TRIAL"
"""Set by ``nissa sweep agent`` in a trial's process: the trial as JSON (sweep, trial, run id, values, the
sweep's project, group and method). ``nissa.init`` takes its run id, config, project, group and tags from it."""


def trial_environment(*, server: str, token: str | None, sweep_id: str, trial_id: int, run_id: str, params: str,
                      project: str, group: str, method: str) -> dict[str, str]:
    """The variables an agent sets for a trial's process (the inverse of ``sweep_trial``)."""
    import json

    out = {SERVER: server, SWEEP_TRIAL: json.dumps({
        "sweep_id": sweep_id, "trial_id": trial_id, "run_id": run_id, "params": json.loads(params),
        "project": project, "group": group, "method": method})}
    if token:
        out[TOKEN] = token
    return out


def sweep_trial() -> str | None:
    """``$NISSA_SWEEP_TRIAL`` as set (None when unset): this process is a sweep's trial."""
    return os.environ.get(SWEEP_TRIAL) or None


SWEEP_PROBE = "NISSA_SWEEP_PROBE"
"""Set by ``nissa sweep create`` in the process it probes a ``pbt`` sweep's command with: JSON naming the file to
write the loop's hooks to, the directory to log in and the values to start with (``nissa.sweep.probed``)."""


def sweep_probe() -> str | None:
    """``$NISSA_SWEEP_PROBE`` as set (None when unset): this process is a sweep's probe."""
    return os.environ.get(SWEEP_PROBE) or None
