"""The ``profile`` command: one profile window at a time, its trace uploaded as a server artifact.

Plugged into a run with ``processor.register(CommandAction.PROFILE, handler)``. The
processor calls ``apply`` at a step boundary and forwards ``step_boundary`` (once per
training batch: it steps the window) and ``run_end``. Everything that touches the
command and the profiler happens on the training thread; only the upload (an HTTP PUT
of the trace file to ``{server}/runs/{run_id}/artifacts/{name}``) runs on a named
background thread, and the handler picks its outcome up at a later step boundary before
it reports the window ``completed``. While one window is open or uploading, another
request is rejected with a reason.
"""

from __future__ import annotations

import concurrent.futures
import logging
import pathlib
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass

import httpx

from leyline import Command, CommandAction, Payload, ProfileCompleted, ProfileStarted
from leyline.commands import MAX_PROFILE_BATCHES

from trainer.control import CommandContext, CommandProcessor, CommandRejected
from trainer.hub.rest import artifact_name, artifact_url
from trainer.telemetry.profiler import ProfileConfig, ProfileWindow, WindowResult, profiles_dir

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class UploadConfig:
    """Where traces go and how hard the uploader tries."""

    server: str
    """``http://host:port`` of nissa-server."""
    run_id: str
    token: str | None = None
    """Bearer token, sent when set."""
    timeout_s: float = 60.0
    """Per attempt."""
    attempts: int = 3
    """Tries before giving up (connection errors and 5xx are retried, 4xx are not)."""

    def __post_init__(self) -> None:
        if self.timeout_s <= 0 or self.attempts < 1:
            raise ValueError("upload: need timeout_s > 0 and attempts >= 1")


class ArtifactUploader:
    """Uploads files on one named background thread; ``submit`` returns a future of the artifact name."""

    def __init__(self, config: UploadConfig) -> None:
        self.config = config
        self._pool = concurrent.futures.ThreadPoolExecutor(max_workers=1, thread_name_prefix="nissa-artifact-upload")

    def submit(self, path: pathlib.Path, name: str) -> concurrent.futures.Future[str]:
        return self._pool.submit(self._put, pathlib.Path(path), name)

    def close(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)

    def _put(self, path: pathlib.Path, name: str) -> str:
        c = self.config
        url = artifact_url(c.server, c.run_id, name)
        headers = {"Content-Type": "application/json"}
        if c.token:
            headers["Authorization"] = f"Bearer {c.token}"
        body = path.read_bytes()
        for attempt in range(1, c.attempts + 1):
            try:
                response = httpx.put(url, content=body, headers=headers, timeout=c.timeout_s)
            except httpx.TransportError as err:
                if attempt == c.attempts:
                    raise
                logger.info("artifact upload %s: %s; retrying", name, err)
            else:
                if response.status_code < 500 or attempt == c.attempts:
                    response.raise_for_status()
                    return name
                logger.info("artifact upload %s: HTTP %d; retrying", name, response.status_code)
            time.sleep(0.5 * attempt)
        raise RuntimeError("unreachable")  # the loop returns or raises on its last attempt


@dataclass
class _Open:
    ctx: CommandContext
    window: ProfileWindow
    upload: concurrent.futures.Future[str] | None = None
    result: WindowResult | None = None


class ProfileHandler:
    """Opens profile windows on command; one at a time; see the module docstring."""

    action = CommandAction.PROFILE

    def __init__(self, *, log_dir: pathlib.Path, run_id: str, emit: Callable[[Payload], None],
                 uploader: ArtifactUploader | None = None, config: ProfileConfig | None = None,
                 end_wait_s: float = 30.0) -> None:
        self.trace_root = profiles_dir(log_dir, run_id)
        self._emit = emit
        self._uploader = uploader
        self.config = config or ProfileConfig()
        self._end_wait_s = end_wait_s
        self._open: _Open | None = None
        self._count = 0

    @property
    def busy(self) -> bool:
        return self._open is not None

    def apply(self, ctx: CommandContext) -> None:
        batches = ctx.command.batches
        if batches is None or not 1 <= batches <= MAX_PROFILE_BATCHES:
            raise CommandRejected(f"action 'profile' needs 'batches' in 1..{MAX_PROFILE_BATCHES}, got {batches}")
        if self._open is not None:
            w = self._open.window
            state = "uploading its trace" if w.done else f"recording {w.batches} batches"
            raise CommandRejected(f"profile window {w.name} is still {state} (command "
                                  f"{self._open.ctx.command_id}); one window at a time")
        self._count += 1
        name = f"w{self._count}-step{ctx.step}"
        window = ProfileWindow(name, batches, self.trace_root / name, self.config)
        try:
            window.start()
        except RuntimeError as err:  # another profiler is active in this process
            raise CommandRejected(f"cannot start the profiler: {err}") from None
        self._open = _Open(ctx=ctx, window=window)
        self._emit(ProfileStarted(window=window.name, batches=batches, trace_dir=str(window.trace_dir),
                                  activities=window.activity_names, command_id=ctx.command_id))

    def step_boundary(self, step: int, epoch: int) -> None:
        current = self._open
        if current is None or step == current.ctx.step:
            return  # the processor forwards the boundary the window was opened at: its warm-up batch is next
        if current.result is None and current.window.step():
            self._recorded(current, current.window.result)
        if current.upload is not None and current.upload.done():
            self._complete(current)

    def run_end(self, reason: str) -> None:
        current = self._open
        if current is None:
            return
        if current.result is None:
            result = current.window.stop()
            if result is None:
                self._open = None
                current.ctx.fail(f"the run ended ({reason}) before the window recorded a batch")
                return
            self._recorded(current, result)
        if current.upload is not None:
            concurrent.futures.wait([current.upload], timeout=self._end_wait_s)
            self._complete(current)
        if self._uploader is not None:
            self._uploader.close()

    def _recorded(self, current: _Open, result: WindowResult | None) -> None:
        if result is None:  # the profiler produced no trace: nothing to report but the failure
            self._open = None
            current.ctx.fail("the profiler produced no trace")
            return
        current.result = result
        if self._uploader is None:
            self._complete(current)
        else:
            current.upload = self._uploader.submit(result.trace_path, artifact_name(result.window))

    def _complete(self, current: _Open) -> None:
        result = current.result
        if result is None:
            return
        artifact, message = None, ""
        if current.upload is not None:
            try:
                artifact = current.upload.result(timeout=0)
            except (httpx.HTTPError, OSError, concurrent.futures.TimeoutError,
                    concurrent.futures.CancelledError) as err:
                message = f"trace kept at {result.trace_path}; upload failed: {type(err).__name__}: {err}"
                logger.warning("profile window %s: %s", result.window, message)
        self._open = None
        self._emit(ProfileCompleted(window=result.window, batches=result.batches, trace_path=str(result.trace_path),
                                    wall_s=result.wall_s, top_ops=result.top_ops, artifact=artifact,
                                    command_id=current.ctx.command_id))
        top = result.top_ops[0].name if result.top_ops else None
        current.ctx.complete({"window": result.window, "batches": result.batches, "partial": result.partial,
                              "trace_path": str(result.trace_path), "artifact": artifact, "top_op": top},
                             message=message)


def profile_at_start(processor: CommandProcessor, run_id: str, batches: int, reason: str = "--profile") -> str:
    """Ask for a profile window from the start of the run (``--profile``), through the command path."""
    command = Command(command_id=f"local-profile-{uuid.uuid4().hex[:12]}", run_id=run_id,
                      action=CommandAction.PROFILE, batches=batches, reason=reason, created_at=time.time())
    processor.submit(command)
    return command.command_id
