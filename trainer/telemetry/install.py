"""Plugging profiling into a live run: what ``esper-train`` calls once its runtime is built.

    handler = install_profiling(runtime, profile_batches=args.profile)  # --profile N, or None

registers the ``profile`` command handler with the runtime's command processor (so
``POST /escalate {"action": "profile", "batches": N}`` opens a window on the live run)
and, with ``profile_batches``, asks for one window from the start of the run through the
same command path. Traces go under ``<log-dir>/<run_id>/profiles/`` and, when the run
has a server, are uploaded to it as artifacts.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from leyline import CommandAction

from trainer.telemetry.profile_handler import ArtifactUploader, ProfileHandler, UploadConfig, profile_at_start
from trainer.telemetry.profiler import ProfileConfig

if TYPE_CHECKING:
    from trainer.runtime import Runtime


def install_profiling(runtime: Runtime, *, profile_batches: int | None = None,
                      config: ProfileConfig | None = None) -> ProfileHandler:
    """Register the profile handler on ``runtime``; optionally open a window at the start."""
    hub = runtime.hub.config
    uploader = None
    if hub.server:
        uploader = ArtifactUploader(UploadConfig(server=hub.server, run_id=hub.run_id, token=hub.token))
    handler = ProfileHandler(log_dir=hub.log_dir, run_id=hub.run_id, emit=runtime.emit, uploader=uploader,
                             config=config)
    runtime.commands.register(CommandAction.PROFILE, handler)
    if profile_batches is not None:
        profile_at_start(runtime.commands, hub.run_id, profile_batches)
    return handler
