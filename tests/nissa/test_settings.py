"""``nissa.Settings``: ``nissa.init``'s arguments as one frozen dataclass, checked once on construction; ``init``
starts a run from it (a field or two changed), and a run never changes the settings it was started with."""

from __future__ import annotations

import dataclasses

import pytest

import nissa
from leyline import EventKind, TelemetryLevel, decode_event


def test_settings_are_checked_when_made_and_frozen(tmp_path, monkeypatch):
    monkeypatch.delenv("NISSA_SERVER", raising=False)
    settings = nissa.Settings(run_name="s", log_dir=tmp_path, level="debug", tags=("a",), phases=["update"])
    assert (settings.level, settings.telemetry_level, settings.phases, settings.stream_to) == (
        "DEBUG", TelemetryLevel.DEBUG, ("update",), None)
    with pytest.raises(dataclasses.FrozenInstanceError):
        settings.run_name = "t"  # type: ignore[misc]
    for given, match in [({"queue_size": 0}, "queue_size must be an int >= 1"),
                         ({"token": "two words"}, "nissa.init: token .* printable ASCII"),
                         ({"project": "a b"}, "nissa.init: project"), ({"run_name": "x" * 300}, "run name"),
                         ({"run_id": "a/b"}, "^nissa.init: run_id: 'a/b' must be"),
                         ({"system_metrics_s": 0}, "system_metrics_s: system metrics interval")]:
        with pytest.raises(ValueError, match=match):
            nissa.Settings(log_dir=tmp_path, **given)
    assert not any(tmp_path.iterdir())  # nothing made for a setting refused


def test_the_server_is_chosen_once(tmp_path, monkeypatch):
    monkeypatch.setenv("NISSA_SERVER", "http://127.0.0.1:9")
    from_env, none = nissa.Settings(log_dir=tmp_path), nissa.Settings(log_dir=tmp_path, server="")
    assert (from_env.stream_to, none.stream_to) == ("http://127.0.0.1:9", None)
    monkeypatch.setenv("NISSA_SERVER", "http://127.0.0.1:10")
    assert dataclasses.replace(none, run_name="copy").stream_to is None  # a copy keeps what was chosen
    assert dataclasses.replace(from_env, run_name="copy").stream_to == "http://127.0.0.1:9"


def test_init_starts_runs_from_settings_without_changing_them(tmp_path):
    settings = nissa.Settings(run_name="base", log_dir=tmp_path, server="", system_metrics=False,
                              summary={"val_loss": "min"})
    first = nissa.init(settings, run_id="first")
    first.define_metric("val_acc", "max")  # before its start: the run's own directions grow
    first.finish()
    second = nissa.init(settings, run_id="second", project="p")
    second.finish()
    assert settings.metadata.summary == {"val_loss": "min"} and settings.project is None
    started = [decode_event(run.log_path.read_bytes().splitlines()[0]) for run in (first, second)]
    assert [e.kind for e in started] == [EventKind.RUN_STARTED] * 2
    assert [(e.run_id, e.payload.project, e.payload.summary) for e in started] == [
        ("first", "", {"val_loss": "min", "val_acc": "max"}), ("second", "p", {"val_loss": "min"})]
    with pytest.raises(TypeError, match="unexpected keyword argument 'colour'"):
        nissa.init(settings, colour="red")
