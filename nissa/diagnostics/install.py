"""Plugging the stack diagnostics into a live run: ``install_diagnostics(runtime, watchdog_s)`` once the
runtime is built; the stop function it returns goes in the run's ``finally``."""

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
    from nissa.hub.secret import run_secret
    from nissa.telemetry.profile_handler import ArtifactUploader, UploadConfig

    hub = runtime.hub.config
    uploader = (ArtifactUploader(UploadConfig(server=hub.server, run_id=hub.run_id, token=hub.token, attempts=2,
                                              timeout_s=10.0, secret=run_secret(hub.run_dir))) if hub.server else None)
    install_stacks(runtime, upload=uploader.submit if uploader is not None else None)
    watchdog = StackWatchdog(hub.run_dir, hub.rank, watchdog_s).start() if watchdog_s > 0 else None
    return watchdog.stop if watchdog is not None else lambda: None
