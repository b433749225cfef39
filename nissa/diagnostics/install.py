"""Plugging the stack diagnostics into a live run: ``install_diagnostics(runtime, watchdog_s)`` once the
runtime is built (or its two halves, ``answer_stacks`` and ``start_watchdog``); the stop function it
returns goes in the run's ``finally``."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from nissa.diagnostics.stacks import install_stacks
from nissa.diagnostics.watchdog import StackWatchdog

if TYPE_CHECKING:
    from nissa.runtime import Runtime


def install_diagnostics(runtime: Runtime, watchdog_s: float) -> Callable[[], None]:
    """``stacks`` commands answered by the hub's thread (their files uploaded when the run has a server),
    and, with ``watchdog_s`` > 0, the stack watchdog; returns what stops the watchdog."""
    answer_stacks(runtime)
    return start_watchdog(runtime, watchdog_s)


def answer_stacks(runtime: Runtime) -> None:
    """``stacks`` commands answered by the run's hub thread, their files uploaded when it has a server."""
    from nissa.hub.secret import run_secret
    from nissa.telemetry.profile_handler import ArtifactUploader, UploadConfig

    hub = runtime.hub.config
    uploader = (ArtifactUploader(UploadConfig(server=hub.server, run_id=hub.run_id, token=hub.token, attempts=2,
                                              timeout_s=10.0, secret=run_secret(hub.run_dir))) if hub.server else None)
    install_stacks(runtime, upload=uploader.submit if uploader is not None else None)


def start_watchdog(runtime: Runtime, watchdog_s: float) -> Callable[[], None]:
    """With ``watchdog_s`` > 0, the stack watchdog of the run's rank; returns what stops it (0: nothing)."""
    hub = runtime.hub.config
    watchdog = StackWatchdog(hub.run_dir, hub.rank, watchdog_s).start() if watchdog_s > 0 else None
    return watchdog.stop if watchdog is not None else lambda: None
