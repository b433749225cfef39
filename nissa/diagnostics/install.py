"""Plugging the stack diagnostics into a live run: ``answer_stacks(runtime)`` once the runtime is built, and
``start_watchdog(runtime, watchdog_s)`` once the run has begun; the stop function it returns goes in the run's
``finally`` (``Run`` does both)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from nissa.diagnostics.stacks import install_stacks
from nissa.diagnostics.watchdog import StackWatchdog

if TYPE_CHECKING:
    from nissa.runtime import Runtime


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
