"""This process as ``nissa sweep create``'s probe of a ``pbt`` sweep's command (``$NISSA_SWEEP_PROBE``, set by
``nissa.sweep.probe``): ``nissa.init`` makes a run that streams to no server and logs under the probe's temporary
directory, its config the values a trial could start with; at its first step boundary, where a loop has set its
hooks, the run writes which it set (``Steering``) to the file the probe named, and the process ends at once."""

from __future__ import annotations

import dataclasses
import os
import sys
from typing import TYPE_CHECKING

import msgspec

from leyline.sweeps import Value
from nissa import env
from nissa.sweep.trial import Steering, from_variable

if TYPE_CHECKING:
    from nissa.run import Run
    from nissa.settings import Settings


class ProbeSettings(msgspec.Struct, forbid_unknown_fields=True):
    report: str
    """Where the loop's ``Steering`` goes (JSON)."""
    log_dir: str
    """The run's ``log_dir``: a temporary directory the probe removes."""
    params: dict[str, Value] = {}
    """Values over the loop's config, as a trial's are."""


def current() -> ProbeSettings | None:
    """The probe this process runs for (None: it is no probe). A malformed variable is a ``ValueError``."""
    return from_variable(env.sweep_probe(), ProbeSettings, env.SWEEP_PROBE)


def applied(settings: Settings, probe: ProbeSettings) -> Settings:
    """``settings`` as the probe runs them: no server (nothing is sent, no run is created on one), the run logged
    under the probe's directory, no sampling of the machine, the probe's values over the loop's config."""
    return dataclasses.replace(settings, server="", log_dir=probe.log_dir, system_metrics=False,
                               config={**dict(settings.config or {}), **probe.params})


def watch(run: Run, probe: ProbeSettings) -> None:
    """At ``run``'s first step boundary: report its hooks and end the process."""
    run.runtime.on_first_step(lambda: report_and_exit(probe.report, run.steering))


def report_and_exit(path: str, steering: Steering) -> None:
    """Write ``steering`` to ``path`` (whole or not at all: a file renamed into place), then end the process with
    status 0 through ``os._exit``: no exception unwinds the loop, so none of its ``finally`` blocks, ``with``
    exits (``with run:`` finishing the run), ``atexit`` functions or the hub's last flush run. Whatever a loop
    saves, uploads or sends on its way out stays unsaved, unuploaded and unsent, as a probe's must."""
    try:
        with open(f"{path}.{os.getpid()}", "wb") as out:
            out.write(msgspec.json.encode(steering))
        os.replace(f"{path}.{os.getpid()}", path)
    except OSError as err:
        sys.stderr.write(f"nissa: the sweep probe's report {path!r} could not be written: {err}\n")
        sys.stderr.flush()
        os._exit(1)
    os._exit(0)
