"""What the tests of this process left running: a check for the end of a test session."""

from __future__ import annotations

import psutil

GRACE_S = 5.0
"""How long a stray process is given to end after SIGTERM before it is killed."""


def stray_children() -> list[str]:
    """The processes this one started (and theirs) still running, one line each; each is stopped on the way
    (SIGTERM, then SIGKILL after ``GRACE_S``), so that none outlives the suite."""
    me = psutil.Process()
    running = []
    for child in me.children(recursive=True):
        try:
            if child.status() != psutil.STATUS_ZOMBIE:
                running.append((child, f"pid {child.pid}: {' '.join(child.cmdline())[:200]}"))
        except psutil.NoSuchProcess:
            continue
    for child, _ in running:
        try:
            child.terminate()
        except psutil.NoSuchProcess:
            pass
    _, alive = psutil.wait_procs([c for c, _ in running], timeout=GRACE_S)
    for child in alive:
        try:
            child.kill()
        except psutil.NoSuchProcess:
            pass
    return [f"process {line}" for _, line in running]
