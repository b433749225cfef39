"""Fixtures of the console's tests: a scripted run written as a local run log."""

from __future__ import annotations

from pathlib import Path

import pytest

from leyline import encode_event
from tests.tui.scenario import scripted_run
from tui.app import EsperWatch, build_app
from tui.config import WatchConfig


def write_run_log(path: Path, **kwargs: object) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"".join(encode_event(e) + b"\n" for e in scripted_run(**kwargs)))  # type: ignore[arg-type]
    return path


@pytest.fixture
def run_log(tmp_path: Path) -> Path:
    return write_run_log(tmp_path / "demo-run" / "events.jsonl")


@pytest.fixture
def replay_app(run_log: Path) -> EsperWatch:
    return build_app(WatchConfig(client=None, replay_file=run_log))
