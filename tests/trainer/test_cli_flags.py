"""esper-train's telemetry, ranks, checkpoint and upload flags are made from their dataclasses: each field a flag
with the dataclass's default (the ``$NISSA_*`` ones from the environment), shown once by argparse, never written
by hand; the spellings that worked before still do, and a bad value is one line naming its flag."""

from __future__ import annotations

import argparse
import dataclasses
import re

import pytest

from leyline import TelemetryLevel
from trainer import flags
from trainer.checkpoint.resume import CheckpointFlags
from trainer.cli import main, train_parser, upload_parser
from trainer.cli_flags import RanksFlags, TelemetryFlags, UploadFlags, check_telemetry_args

TRAIN = [(TelemetryFlags, f) for f in dataclasses.fields(TelemetryFlags)] + \
        [(RanksFlags, f) for f in dataclasses.fields(RanksFlags)] + \
        [(CheckpointFlags, f) for f in dataclasses.fields(CheckpointFlags)]
UPLOAD = [(UploadFlags, f) for f in dataclasses.fields(UploadFlags)]
ENV = ("NISSA_SERVER", "NISSA_TOKEN", "NISSA_RUN_ID")
SHOWN = (" (default: %(default)s)", " (default: none)", " (default: set, not shown)")
"""How ``flags.add_fields`` ends a help text: argparse shows the default, or it has none, or it is a secret."""


@pytest.fixture(autouse=True)
def _no_nissa_environment(monkeypatch):
    for var in ENV:
        monkeypatch.delenv(var, raising=False)


def _actions(parser: argparse.ArgumentParser) -> dict[str, argparse.Action]:
    return {a.dest: a for a in parser._actions if not isinstance(a, argparse._HelpAction)}


def _own_default(f: dataclasses.Field):
    return dataclasses.MISSING if f.default is dataclasses.MISSING else f.default


@pytest.mark.parametrize(("cls", "field", "parser"), [(*t, train_parser) for t in TRAIN] +
                         [(*t, upload_parser) for t in UPLOAD], ids=lambda v: getattr(v, "name", ""))
def test_every_field_has_its_flag_with_the_dataclass_default_and_docstring(cls, field, parser):
    action = _actions(parser())[field.name]
    doc = flags.field_docs(cls)[field.name].replace("``", "")
    assert action.help and action.help.startswith(doc.split(".")[0][:20])
    default = _own_default(field)
    if default is dataclasses.MISSING:  # the upload's run directory: a positional argument
        assert not action.option_strings and action.required
        return
    assert action.default == (default.value if isinstance(default, TelemetryLevel) else default)
    assert action.help.endswith(SHOWN[0] if default not in (None, "", ()) else SHOWN[1])


@pytest.mark.parametrize("parser", [train_parser, upload_parser], ids=["esper-train", "esper-train upload"])
def test_no_help_text_spells_a_default_twice(parser):
    """Argparse shows each default once (``%(default)s``); no help text writes one by hand as well."""
    for action in _actions(parser()).values():
        if not action.option_strings:
            continue
        text = action.help or ""
        suffix = next((s for s in SHOWN if text.endswith(s)), None)
        assert suffix, f"{action.option_strings[0]}: its default is not the one argparse shows: {text!r}"
        assert not re.search(r"\bdefault[: ]", text.removesuffix(suffix)), f"{action.option_strings[0]}: {text!r}"


def test_the_nissa_environment_is_the_default_and_the_token_is_never_shown(monkeypatch):
    monkeypatch.setenv("NISSA_SERVER", "http://127.0.0.1:9")
    monkeypatch.setenv("NISSA_TOKEN", "s3cret-token")
    monkeypatch.setenv("NISSA_RUN_ID", "from-env")
    for parser in (train_parser(), upload_parser()):
        ns = parser.parse_args(["some-dir"] if "upload" in parser.prog else [])
        assert (ns.server, ns.token) == ("http://127.0.0.1:9", "s3cret-token")
        text = parser.format_help()
        assert text.count("http://127.0.0.1:9") == 1 and "s3cret-token" not in text
    assert train_parser().parse_args([]).run_id == "from-env"


def test_the_spellings_of_before_set_the_same_attributes():
    ns = train_parser().parse_args(["--no-system-metrics", "-v", "--tag", "a", "--tag", "b", "--telemetry-level",
                                    "debug", "--profile-update", "--epochs", "5", "--profile", "2"])
    assert (ns.system_metrics, ns.verbose, ns.tags, ns.telemetry_level, ns.profile_update, ns.episode_length,
            ns.profile) == (False, True, ("a", "b"), "DEBUG", True, 5, 2)
    ns = train_parser().parse_args(["--verbose", "--resume", "runs/r", "--checkpoint", "round-000001"])
    assert (ns.verbose, ns.resume, ns.checkpoint) == (True, "runs/r", "round-000001")
    default = train_parser().parse_args([])
    assert (default.system_metrics, default.verbose, default.tags, default.telemetry_level) == \
        (True, False, (), "NORMAL")
    assert flags.build(TelemetryFlags, flags.values(default, TelemetryFlags)) == TelemetryFlags()
    assert flags.build(RanksFlags, flags.values(default, RanksFlags)) == RanksFlags()
    assert flags.build(CheckpointFlags, flags.values(default, CheckpointFlags)) == CheckpointFlags()


@pytest.mark.parametrize(("argv", "message"), [
    (["--heartbeat", "0"], "--heartbeat: must be in 0.1..3600 seconds, got 0.0"),
    (["--stack-watchdog", "-1"], "--stack-watchdog: must be finite seconds >= 0"),
    (["--profile", "501"], "--profile: must be in 1..500, got 501"),
    (["--straggler-epochs", "0"], "--straggler-epochs: must be an integer >= 1, got 0"),
    (["--system-metrics-interval", "0"], "--system-metrics-interval: system metrics interval must be in"),
])
def test_a_bound_names_its_flag(argv, message):
    with pytest.raises(ValueError, match=f"^{re.escape(message)}"):
        check_telemetry_args(train_parser().parse_args(argv))


@pytest.mark.parametrize(("argv", "message"), [
    (["--server", "http://127.0.0.1:9", "--wait", "-1"], "--wait: must be >= 0 seconds, got -1.0"),
    (["--server", "http://127.0.0.1:9", "--timeout", "0"], "--timeout: must be > 0 seconds, got 0.0"),
    ([], "--server: required (or set NISSA_SERVER)"),
])
def test_an_upload_bound_is_one_line_naming_its_flag(capsys, tmp_path, argv, message):
    with pytest.raises(SystemExit) as done:
        main(["upload", str(tmp_path), *argv])
    assert done.value.code == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and f"esper-train upload: error: {message}" in err
