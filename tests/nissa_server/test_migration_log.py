"""A fresh database is created with one line in the server's log, not one per migration."""

from __future__ import annotations

import logging

import pytest

from tests.support import running_server

pytestmark = pytest.mark.single_backend


def test_a_fresh_database_says_it_is_created_once(tmp_path, caplog):
    caplog.set_level(logging.INFO, logger="nissa_server")
    with running_server(tmp_path / "a"):
        pass
    lines = [r.getMessage() for r in caplog.records if "schema" in r.getMessage()]
    assert len(lines) == 1 and lines[0].startswith("creating the database (schema v"), lines
    caplog.clear()
    with running_server(tmp_path / "b", db_path=tmp_path / "a" / "nissa.db"):  # up to date: nothing to say
        pass
    assert not [r for r in caplog.records if "schema" in r.getMessage()], caplog.text
