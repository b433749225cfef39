"""Plugging the windows into a live run, any loop: the ``profile`` handler and the ranks' straggler check.

``install_profiling`` registers the ``profile`` command handler with the runtime's command processor (so
``POST /escalate {"action": "profile", "batches": N}`` opens a window on the live run) and, with
``profile_batches``, asks for one window from the start of the run through the same command path
(``profile_update``: one over the first update). Traces go under ``<log-dir>/<run_id>/profiles/`` and, when
the run has a server, are uploaded to it as artifacts.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from leyline import ProfileRequest
from nissa.control.agreement import ControlRound
from nissa.hub.secret import run_secret
from nissa.telemetry.profile_handler import ArtifactUploader, ProfileHandler, UploadConfig, profile_at_start
from nissa.telemetry.profiler import ProfileConfig
from nissa.telemetry.stragglers import StragglerCheck, StragglerConfig

if TYPE_CHECKING:
    from nissa.runtime import Runtime


def install_profiling(runtime: Runtime, *, profile_batches: int | None = None, profile_update: bool = False,
                      config: ProfileConfig | None = None, device: str | None = None,
                      phases: tuple[str, ...] | None = None) -> ProfileHandler:
    """Register the profile handler on ``runtime``; optionally open a window at the start
    (``profile_batches``) and one over the first PPO update (``profile_update``; after the first). ``device``:
    where the run's tensors live (CUDA is recorded only for a CUDA run; None: wherever there is a GPU).
    ``phases``: the run's, as its ``run_started`` declares them (a window for another is rejected)."""
    hub = runtime.hub.config
    uploader = None
    if hub.server:
        uploader = ArtifactUploader(UploadConfig(server=hub.server, run_id=hub.run_id, token=hub.token,
                                                 secret=run_secret(hub.run_dir)))
    handler = ProfileHandler(log_dir=hub.log_dir, run_id=hub.run_id, emit=runtime.emit, uploader=uploader,
                             config=config, rank=runtime.ranks.rank if runtime.ranks.distributed else None,
                             device=device, quiesce=runtime.settle_collectives, phases=phases)
    runtime.commands.register(ProfileRequest, handler)
    open_start_windows(runtime, profile_batches=profile_batches, profile_update=profile_update)
    return handler


def open_start_windows(runtime: Runtime, *, profile_batches: int | None = None, profile_update: bool = False) -> None:
    """Ask, through the command path, for a window over the first ``profile_batches`` batches and (both: after
    it) one over the first update. Rank 0 asks; the ranks' agreement applies them on every rank."""
    if not runtime.ranks.is_main:
        return
    run_id = runtime.run_id
    if profile_batches is not None:
        profile_at_start(runtime.commands, run_id, profile_batches)
    if profile_update:
        profile_at_start(runtime.commands, run_id, None, reason="--profile-update", target="update")


def install_rank_checks(runtime: Runtime, *, straggler_factor: float = StragglerConfig.factor,
                        straggler_epochs: int = StragglerConfig.epochs,
                        stragglers: StragglerConfig | None = None) -> StragglerCheck | None:
    """In a run of several ranks, compare the ranks' step times at every exchange; rank 0 reports the
    stragglers (once, not once per rank). ``stragglers``, when given, is the whole rule (the factor and
    epochs given apart are then unused). Alone: nothing to compare, None."""
    if not runtime.ranks.distributed:
        return None
    check = StragglerCheck(stragglers or StragglerConfig(factor=straggler_factor, epochs=straggler_epochs))

    def observe(agreed: ControlRound) -> None:
        found = check.run(agreed.step_times)
        if runtime.ranks.is_main:
            for anomaly in found:
                runtime.emit(anomaly)

    runtime.on_round(observe)
    return check
