"""Keeps torch's profiler markers out of the trainer's terminal, and nothing else.

Kineto (torch.profiler's engine) writes ``USDT:… profiler_start`` and ``… profiler_stop`` to the
process's stderr each time a window starts and stops recording: markers meant for tracing tools. Its
log levels rank them above ERROR, so ``KINETO_LOG_LEVEL`` cannot drop them without dropping Kineto's
errors too. ``without_profiler_markers`` instead captures file descriptor 2 around the profiler calls
that write them and writes everything else back, in order, when the call returns.
"""

from __future__ import annotations

import contextlib
import os
import re
import sys
import tempfile
from collections.abc import Iterator

_MARKER = re.compile(rb"^USDT:.*\] profiler_(start|stop)\s*$")


def is_profiler_marker(line: bytes) -> bool:
    return _MARKER.match(line) is not None


@contextlib.contextmanager
def without_profiler_markers() -> Iterator[None]:
    """Run the body with fd 2 captured; then pass on every captured line but the profiler markers."""
    sys.stderr.flush()
    try:
        saved = os.dup(2)
    except OSError:  # no stderr at all: nothing to keep clean
        yield
        return
    with tempfile.TemporaryFile() as capture:
        os.dup2(capture.fileno(), 2)
        try:
            yield
        finally:
            sys.stderr.flush()
            os.dup2(saved, 2)
            os.close(saved)
            capture.seek(0)
            kept = b"".join(line for line in capture.read().splitlines(keepends=True)
                            if not is_profiler_marker(line))
            _write_all(2, kept)


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]
