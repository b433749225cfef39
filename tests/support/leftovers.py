"""What the tests of this process left running: a check for the end of a test session."""

from __future__ import annotations

import psutil

GRACE_S = 5.0
"""How long a stray process is given to end after SIGTERM before it is killed."""
HELPERS = ("multiprocessing.resource_tracker", "multiprocessing.forkserver", "compile_worker")
"""Helpers a library starts once per process and ends when the process ends: not a test's leftovers."""


def stray_children() -> list[str]:
    """The processes this one started (and theirs) still running, one line each; each is stopped on the way
    (SIGTERM, then SIGKILL after ``GRACE_S``), so that none outlives the suite."""
    me = psutil.Process()
    running = []
    for child in me.children(recursive=True):
        try:
            command = " ".join(child.cmdline())
            if child.status() != psutil.STATUS_ZOMBIE and not any(h in command for h in HELPERS):
                running.append((child, f"pid {child.pid}: {command[:200]}"))
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
