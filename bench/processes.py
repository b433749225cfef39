"""Stopping a console script run as a subprocess (``nissa-server``, ``esper-train``, ``esper-watch``) the way a
user does, for the benchmarks, the scripts and the tests alike.

Only the standard library: the scripts import it with the repository's root on their path, the tests as
``bench.processes``, and it imports none of them back.
"""

from __future__ import annotations

import signal
import subprocess


def stop_process(proc: subprocess.Popen, timeout: float = 20.0, *, close_stdout: bool = True) -> int:
    """SIGINT (a server drains and closes its store, a trainer finishes its run), then SIGKILL if it has not
    exited within ``timeout`` seconds; returns the exit status. A piped stdout is closed after, unless
    ``close_stdout`` is False (a thread of the caller's still reads it to its end)."""
    if proc.poll() is None:
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=timeout)
    if close_stdout and proc.stdout is not None:
        proc.stdout.close()
    return proc.returncode
