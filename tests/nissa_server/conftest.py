"""Every server test runs on both store backends, SQLite and PostgreSQL, unless marked
``single_backend`` (about SQLite itself, or needing no database) or ``postgresql_only``."""

from __future__ import annotations

import pytest

from tests.support import databases, web


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "backend" in metafunc.fixturenames:
        marked = metafunc.definition.get_closest_marker
        names = ["sqlite"] if marked("single_backend") else ["postgresql"] if marked("postgresql_only") else list(
            databases.BACKENDS)
        metafunc.parametrize("backend", names, indirect=True)


@pytest.fixture(autouse=True)
def backend(request, tmp_path):
    """The backend this test's servers use (``running_server`` and ``server_url`` follow it)."""
    name = getattr(request, "param", "sqlite")
    if name == "postgresql":
        why = databases.postgres_unavailable()
        if why is not None:
            pytest.skip(why)
    with databases.backend(name):
        yield name
    databases.release(tmp_path)


@pytest.fixture(scope="module")
def browser():
    """The system's Chromium, one per test module of the web page (skipped where there is none)."""
    yield from web.chromium()
