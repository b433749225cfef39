"""Fixtures shared by every test package: a real nissa-server in-process or as a subprocess."""

from __future__ import annotations

import pytest

from tests.support import running_server, start_server_process, stop_process


@pytest.fixture
def server_url(tmp_path):
    """Base URL of a fresh in-process server (its own SQLite file in ``tmp_path``)."""
    with running_server(tmp_path) as url:
        yield url


@pytest.fixture
def server_process(tmp_path):
    """A ``nissa-server --port 0`` subprocess: yields (process, base URL); stopped afterwards."""
    proc, url = start_server_process(tmp_path / "server" / "nissa.db")
    try:
        yield proc, url
    finally:
        stop_process(proc)
