"""The ``profile`` command: one profile window at a time, its trace uploaded as a server artifact.

Plugged into a run with ``processor.register(ProfileRequest, handler)``. The
processor calls ``apply`` at a step boundary and forwards ``step_boundary`` (once per
training batch: it steps the window), ``update_begin`` / ``update_end`` and ``run_end``.
A window of ``target`` ``update`` is armed when applied and records the next PPO update:
the profiler starts at ``update_begin`` (prepared there, with an empty warm-up step) and
its one step ends at ``update_end``, so a once-per-round update is never caught by luck. Everything that touches the
command and the profiler happens on the training thread; only the upload (an HTTP PUT
of the trace file to ``{server}/runs/{run_id}/artifacts/{name}``) runs on a named
background thread, and the handler picks its outcome up at a later step boundary before
it reports the window ``completed``. While one window is open or uploading, another
request is rejected with a reason.
"""

from __future__ import annotations

import concurrent.futures
import dataclasses
import logging
import pathlib
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

import httpx

from leyline import AnyPayload, ProfileCompleted, ProfileRequest, ProfileStarted
from leyline.calls import unprofilable
from leyline.enums import ProfileTarget
from nissa.control import CommandContext, CommandProcessor, CommandRejected
from nissa.hub.rest import artifact_name, artifact_url, auth_headers
from nissa.telemetry.profiler import ProfileConfig, ProfileWindow, WindowResult, profiles_dir

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class UploadConfig:
    """Where traces go and how hard the uploader tries."""

    server: str
    """``http://host:port`` of nissa-server."""
    run_id: str
    token: str | None = None
    """Bearer token, sent when set."""
    secret: str | None = None
    """The run's stream secret: the server takes a run's artifacts only from its own trainer."""
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
        headers = {"Content-Type": "application/json", **auth_headers(c.token, c.secret)}
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
    ctx: CommandContext[ProfileRequest]
    window: ProfileWindow
    upload: concurrent.futures.Future[str] | None = None
    result: WindowResult | None = None

    @property
    def on_update(self) -> bool:
        return self.ctx.request.target == "update"

    @property
    def state(self) -> str:
        if self.window.done:
            return "uploading its trace"
        if self.on_update:
            return "recording the next PPO update" if self.window.open else "waiting for the next PPO update"
        return f"recording {self.window.batches} batches"


class ProfileHandler:
    """Opens profile windows on command; one at a time; see the module docstring."""

    def __init__(self, *, log_dir: pathlib.Path, run_id: str, emit: Callable[[AnyPayload], None],
                 uploader: ArtifactUploader | None = None, config: ProfileConfig | None = None,
                 end_wait_s: float = 30.0, rank: int | None = None, device: str | None = None,
                 quiesce: Callable[[], None] | None = None, phases: tuple[str, ...] | None = None) -> None:
        self.trace_root = profiles_dir(log_dir, run_id)
        self.device = device
        """Where the run's tensors live (``cuda:0``, ``cpu``): a window records CUDA only for a CUDA run."""
        self.quiesce = quiesce
        """Passed to each window (``ProfileWindow``): called before its profiler starts, steps or stops."""
        self.phases = phases
        """The run's phases as its ``run_started`` declares them (None: not declared, a window waits for any)."""
        self.rank = rank
        """This process's rank in a run of several (its traces and artifacts are named by it), else None."""
        self._emit = emit
        self._uploader = uploader
        self.config = config or ProfileConfig()
        self._end_wait_s = end_wait_s
        self._open: _Open | None = None
        self._count = 0

    @property
    def busy(self) -> bool:
        return self._open is not None

    def apply(self, ctx: CommandContext[ProfileRequest]) -> None:
        request = ctx.request
        on_update = request.target == "update"
        batches = request.batches or 1  # None only with target "update" (its forms): the update, one step
        impossible = unprofilable(self.phases, request.phase) if on_update else None
        if impossible is not None:
            raise CommandRejected(impossible)
        if self._open is not None:
            raise CommandRejected(f"profile window {self._open.window.name} is still {self._open.state} (command "
                                  f"{self._open.ctx.command_id}); one window at a time")
        self._count += 1
        name = f"w{self._count}-{(request.phase or 'update') if on_update else 'step'}{ctx.step}"
        window = ProfileWindow(name, batches, self.trace_root / name, window_config(self.config, request),
                               rank=self.rank, device=self.device, quiesce=self.quiesce)
        self._open = _Open(ctx=ctx, window=window)
        if not on_update:
            self._start(self._open)

    def _start(self, current: _Open) -> None:
        window = current.window
        try:
            window.start()
        except RuntimeError as err:  # another profiler is active in this process
            self._open = None
            if current.on_update:
                current.ctx.fail(f"cannot start the profiler: {err}")
                return
            raise CommandRejected(f"cannot start the profiler: {err}") from None
        self._emit(ProfileStarted(window=window.name, batches=0 if current.on_update else window.batches,
                                  trace_dir=str(window.trace_dir), activities=window.activity_names,
                                  command_id=current.ctx.command_id, target="update" if current.on_update
                                  else "batches"))

    def step_boundary(self, step: int, epoch: int) -> None:
        current = self._open
        if current is None or step == current.ctx.step:
            return  # the processor forwards the boundary the window was opened at: its warm-up batch is next
        if current.result is None and not current.on_update and current.window.step():
            self._recorded(current, current.window.result)
        if current.upload is not None and current.upload.done():
            self._complete(current)

    def update_begin(self, round_: int) -> None:
        """An armed update window starts: the profiler is prepared (its warm-up, an empty step) and
        records from here to the end of the update."""
        current = self._open
        if current is None or not current.on_update or current.window.open or current.window.done:
            return
        self._start(current)
        if self._open is current:
            current.window.step()

    def update_end(self, round_: int) -> None:
        current = self._open
        if current is not None and current.on_update and current.window.open and current.window.step():
            self._recorded(current, current.window.result)

    def phase_begin(self, name: str) -> None:
        """A phase of the loop's own begins (``with run.phase(name)``): an armed window for it starts."""
        if self._awaits(name):
            self.update_begin(0)

    def phase_end(self, name: str) -> None:
        if self._awaits(name):
            self.update_end(0)

    def _awaits(self, name: str) -> bool:
        current = self._open
        return current is not None and current.on_update and (current.ctx.request.phase or "update") == name

    def run_end(self, reason: str) -> None:
        current = self._open
        if current is None:
            return
        if current.result is None:
            result = current.window.stop()
            if result is None:
                self._open = None
                what = "the next PPO update" if current.on_update else "a batch"
                current.ctx.fail(f"the run ended ({reason}) before the window recorded {what}")
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
            current.upload = self._uploader.submit(result.trace_path, artifact_name(result.window, rank=self.rank))

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
        target: Literal["batches", "update"] = "update" if current.on_update else "batches"
        batches = 0 if current.on_update else result.batches
        self._emit(ProfileCompleted(window=result.window, batches=batches, trace_path=str(result.trace_path),
                                    wall_s=result.wall_s, top_ops=result.top_ops, artifact=artifact,
                                    command_id=current.ctx.command_id, target=target))
        top = result.top_ops[0].name if result.top_ops else None
        options = current.window.config
        current.ctx.complete({"window": result.window, "target": target, "batches": batches,
                              "partial": result.partial, "trace_path": str(result.trace_path), "artifact": artifact,
                              "top_op": top, "record_shapes": options.record_shapes,
                              "with_stack": options.with_stack, "profile_memory": options.profile_memory},
                             message=message)


def window_config(base: ProfileConfig, request: ProfileRequest) -> ProfileConfig:
    """The run's profile settings with what this request asks for on top (a request only adds recording:
    shapes, Python stacks, memory; the cheap default records none of them)."""
    return dataclasses.replace(base, record_shapes=base.record_shapes or request.record_shapes,
                               with_stack=base.with_stack or request.with_stack,
                               profile_memory=base.profile_memory or request.profile_memory)


def profile_at_start(processor: CommandProcessor, run_id: str, batches: int | None,
                     reason: str = "--profile", target: ProfileTarget = "batches") -> str:
    """Ask for a profile window through the command path: over the first ``batches`` batches
    (``--profile``), or over the run's first PPO update (``target="update"``, ``--profile-update``)."""
    request = ProfileRequest(run_id=run_id, batches=None if target == "update" else batches, target=target,
                             reason=reason)
    return processor.issue(request, prefix="local-profile")
