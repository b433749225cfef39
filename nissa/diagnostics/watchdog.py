"""The stack watchdog: every thread's stack written to the run directory when no Python thread can run.

``faulthandler.dump_traceback_later`` arms a timer in C that writes every thread's stack to a file
without taking the GIL. A Python thread of ours re-arms it every ``timeout_s / 4``: while any Python
thread can run the timer never fires; when none can for ``timeout_s`` (the training thread holding the
GIL in native code), it fires, and keeps writing every ``timeout_s`` while that lasts. The file is
``<run_dir>/stacks/stacks-watchdog-rank<N>-<host>-<pid>.txt``; ``esper-train upload`` sends it.
"""

from __future__ import annotations

import faulthandler
import logging
import pathlib
import threading
from typing import IO

from nissa.hub.traces import STACKS_DIR, stacks_name

logger = logging.getLogger(__name__)


class StackWatchdog:
    """See the module docstring; ``start`` and ``stop`` it around the run."""

    def __init__(self, run_dir: pathlib.Path, rank: int, timeout_s: float) -> None:
        if not timeout_s > 0:
            raise ValueError(f"--stack-watchdog: must be > 0 seconds, got {timeout_s}")
        self.timeout_s = timeout_s
        self.path = pathlib.Path(run_dir) / STACKS_DIR / stacks_name("watchdog", rank)
        self._file: IO[str] | None = None
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._rearm, name=f"nissa-stack-watchdog-r{rank}", daemon=True)

    def start(self) -> StackWatchdog:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._file = open(self.path, "a")  # noqa: SIM115 - faulthandler writes to its descriptor until stop
        faulthandler.dump_traceback_later(self.timeout_s, repeat=True, file=self._file)
        self._thread.start()
        return self

    def _rearm(self) -> None:
        while not self._stop.wait(self.timeout_s / 4):
            with self._lock:
                if self._file is not None:
                    faulthandler.dump_traceback_later(self.timeout_s, repeat=True, file=self._file)

    def stop(self) -> None:
        self._stop.set()
        with self._lock:
            faulthandler.cancel_dump_traceback_later()
            if self._file is not None:
                self._file.close()
                self._file = None
        self._thread.join(timeout=1.0)
        if self.path.exists() and self.path.stat().st_size == 0:
            self.path.unlink()  # nothing was stuck: no empty file to upload
