"""Runs an integration started, ended when the process dies of an exception nothing caught.

A Hugging Face ``Trainer`` or an Accelerate loop that raises never reaches ``on_train_end`` or
``end_training``, and neither library calls its callbacks or trackers on an exception: the run would stay
``live`` until the server calls it ``lost``. So the integrations hand the runs they start to
``finish_on_uncaught``. When an exception reaches the interpreter's top level (``sys.excepthook``, which
runs before the interpreter shuts down, while the hub's threads still deliver), the traceback is printed
as before, then each such run still open ends as ``failed`` with the exception's type and message
(``interrupted`` on Ctrl-C, ``Run.fail``). An exception the caller catches ends nothing: it may go on.
"""

from __future__ import annotations

import sys
import threading
import weakref
from types import TracebackType

from nissa.run import Run

FINISH_TIMEOUT_S = 10.0
"""How long ending each run may take to deliver what is left, on the way out."""

_runs: weakref.WeakSet[Run] = weakref.WeakSet()
_lock = threading.Lock()
_installed = False


def finish_on_uncaught(run: Run) -> None:
    """End ``run`` as failed should the process die of an uncaught exception while it is open."""
    global _installed
    with _lock:
        _runs.add(run)
        if _installed:
            return
        previous = sys.excepthook

        def hook(kind: type[BaseException], err: BaseException, tb: TracebackType | None) -> None:
            previous(kind, err, tb)
            finish_all(err)

        sys.excepthook = hook
        _installed = True


def finish_all(err: BaseException) -> None:
    """End every run handed to ``finish_on_uncaught`` and still open, for ``err``."""
    with _lock:
        runs = list(_runs)
        _runs.clear()
    for run in runs:
        if not run.finished:
            run.fail(err, timeout=FINISH_TIMEOUT_S)
