"""The suite leaves nothing behind: its PostgreSQL is stopped and its data directory removed when a test
process ends, and a process a test started and forgot is reported and stopped (``tests/conftest.py``)."""

from __future__ import annotations

import subprocess
import sys

import psutil
import pytest

from tests.support import databases
from tests.support.leftovers import stray_children


@pytest.mark.timeout(300)  # it may start the PostgreSQL (initdb): 88 s seen on a busy machine
def test_the_suites_postgresql_is_stopped_and_its_directory_removed():
    why = databases.postgres_unavailable()
    if why is not None:
        pytest.skip(why)
    started = databases.running()
    assert started is not None
    pid, root = started
    assert pid is not None and root.is_dir() and psutil.pid_exists(pid)
    assert databases.shutdown() == []
    assert not root.exists()
    assert not psutil.pid_exists(pid) or psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    assert databases.shutdown() == []  # twice: nothing to do


def test_a_forgotten_process_is_reported_and_stopped():
    forgotten = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    try:
        left = stray_children()
        assert any(line.startswith(f"process pid {forgotten.pid}: ") for line in left), left
        assert forgotten.wait(timeout=30) is not None
    finally:
        if forgotten.poll() is None:
            forgotten.kill()
            forgotten.wait()
