"""The ``stacks`` command: every thread's Python stack, answered at once by the thread that receives it.

The hub's receiver thread hands a ``stacks`` command to ``StacksResponder`` instead of the training
thread's inbox (``NissaHub.answer_at_once``): the training thread may be the one that is stuck. The
responder formats every thread's stack (``sys._current_frames``), writes it to
``<run_dir>/stacks/<artifact name>``, reports the command ``applied`` and ``completed`` with the text in its
result (cut to ``MAX_RESULT_CHARS``) and uploads the file as an artifact on the uploader's own thread.
``esper-train upload`` sends the files a live run could not.
"""

from __future__ import annotations

import concurrent.futures
import logging
import os
import pathlib
import sys
import threading
import time
import traceback
from collections.abc import Callable
from typing import TYPE_CHECKING

from leyline import AnyPayload, Command, CommandStatus, CommandStatusChanged, StacksRequest
from nissa.hub.traces import STACKS_DIR, stacks_name

if TYPE_CHECKING:
    from nissa.runtime import Runtime

logger = logging.getLogger(__name__)

MAX_RESULT_CHARS = 64 * 1024
"""Stack text carried in the command's result (the artifact has all of it)."""


def format_stacks(title: str = "") -> tuple[str, int]:
    """Every thread's Python stack, most recent call last, and how many threads there are."""
    names = {t.ident: t for t in threading.enumerate()}
    frames = sys._current_frames()
    parts = [title + "\n"] if title else []
    for ident, frame in sorted(frames.items(), key=lambda item: item[0] != threading.main_thread().ident):
        thread = names.get(ident)
        name = thread.name if thread is not None else "?"
        daemon = " daemon" if thread is not None and thread.daemon else ""
        parts.append(f'\nThread {ident:#x} "{name}"{daemon} (most recent call last):\n')
        parts.extend(traceback.format_stack(frame))
    return "".join(parts), len(frames)


Upload = Callable[[pathlib.Path, str], "concurrent.futures.Future[str]"]
Emit = Callable[[AnyPayload], None]


class StacksResponder:
    """Answers ``stacks`` commands on the thread that calls it; see the module docstring."""

    def __init__(self, *, run_dir: pathlib.Path, rank: int, emit: Emit, step: Callable[[], int],
                 upload: Upload | None = None) -> None:
        self.folder = pathlib.Path(run_dir) / STACKS_DIR
        self.rank = rank
        self._emit = emit
        self._step = step
        self._upload = upload

    def __call__(self, command: Command) -> None:
        step = self._step()
        self._report(command, CommandStatus.APPLIED, step)
        title = f"stacks of rank {self.rank} (pid {os.getpid()}) at step {step}, {time.strftime('%Y-%m-%d %H:%M:%S')}"
        text, threads = format_stacks(title)
        name = stacks_name(command.command_id[:16], self.rank)
        path: pathlib.Path | None = self.folder / name
        try:
            self.folder.mkdir(parents=True, exist_ok=True)
            (self.folder / name).write_text(text)
        except OSError as err:
            logger.warning("stacks: cannot write %s: %s", path, err)
            path = None
        result = {"threads": threads, "rank": self.rank, "stacks": text[:MAX_RESULT_CHARS],
                  "truncated": len(text) > MAX_RESULT_CHARS, "path": str(path) if path else None,
                  "artifact": name if path is not None and self._upload is not None else None}
        self._report(command, CommandStatus.COMPLETED, step, result)
        if path is not None and self._upload is not None:
            self._upload(path, name).add_done_callback(lambda f: _log_upload(f, name))

    def _report(self, command: Command, status: CommandStatus, step: int, result: dict | None = None) -> None:
        self._emit(CommandStatusChanged(command_id=command.command_id, action=command.action, status=status,
                                        applied_step=step, result=result))


def _log_upload(future: concurrent.futures.Future[str], name: str) -> None:
    err = future.exception()
    if err is not None:
        logger.warning("stacks %s: upload failed (kept in the run directory): %s", name, err)


def install_stacks(runtime: Runtime, upload: Upload | None = None) -> StacksResponder:
    """Let the run's hub answer ``stacks`` commands at once, on its own thread."""
    hub = runtime.hub

    def emit(payload: AnyPayload) -> None:
        hub.emit(payload, step=runtime.step, epoch=runtime.epoch)

    responder = StacksResponder(run_dir=hub.config.run_dir, rank=hub.config.rank, emit=emit,
                                step=lambda: runtime.step, upload=upload)
    hub.answer_at_once(StacksRequest, responder)
    return responder
