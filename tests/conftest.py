"""Fixtures shared by every test package: a real nissa-server in-process or as a subprocess."""

from __future__ import annotations

import pytest

from tests.support import databases, running_server, start_server_process, stop_process
from tests.support.heap import forget_apps, freeze_imports
from tests.support.leftovers import stray_children


@pytest.fixture(scope="session", autouse=True)
def nothing_left_behind():
    """When a test process ends (each xdist worker, or the one process), the PostgreSQL it started is stopped
    and its data directory removed, and no process a test started still runs: what is left fails the
    process's last test at teardown (and is stopped)."""
    yield
    left = databases.shutdown() + stray_children()
    assert not left, "left behind by the tests: " + "; ".join(left)


@pytest.fixture(autouse=True)
def apps_let_go():
    """The servers a test made are freed when it ends (``tests.support.heap``)."""
    yield
    forget_apps()


def pytest_collection_finish(session: pytest.Session) -> None:
    freeze_imports()


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


# --- running in parallel (pytest-xdist, ``--dist loadgroup``: see the Makefile) -------------------------

HEAVY = "heavy"
"""The xdist group of the end-to-end tests (``tests/e2e/``, and any marked ``e2e``): they train in
subprocesses, so one at a time in a group, on one worker, while the other worker takes the light tests."""

LONG = "heavy-long"
LONG_MODULES = frozenset({"test_benchmarks.py", "test_sweeps.py"})
"""The two longest end-to-end modules (about 12 of the end-to-end tests' 22 minutes on two idle cores) are a
group of their own: each worker takes one group first (xdist hands out the largest first) and both share the
light tests, where one worker alone would run all the end-to-end tests while the other sat idle."""


E2E_TIMEOUT_S = 300
"""An end-to-end test's limit unless it sets its own (pyproject's 120 s is the light tests'): it starts processes
that import torch, which take minutes on a busy machine; the limit only stops a test that hangs."""


@pytest.hookimpl(tryfirst=True)  # before xdist's own hook turns the marks into the groups it schedules
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        group = _group(item)
        if group is not None:
            item.add_marker(pytest.mark.xdist_group(group))
        if group in (HEAVY, LONG) and item.get_closest_marker("timeout") is None:
            item.add_marker(pytest.mark.timeout(E2E_TIMEOUT_S))


def _group(item: pytest.Item) -> str | None:
    """Which tests must run on one worker: the end-to-end ones together, and a module's tests that share a
    fixture wider than one test (run once per worker it reaches: set up once, not once per worker)."""
    if item.get_closest_marker("e2e") is not None or "e2e" in item.path.parts:  # the benchmarks' runs too
        return LONG if item.path.name in LONG_MODULES else HEAVY
    info = getattr(item, "_fixtureinfo", None)
    defs = getattr(info, "name2fixturedefs", {})
    if any(d.scope in ("module", "class", "package") for ds in defs.values() for d in ds):
        return item.nodeid.split("::", 1)[0]
    return None
