"""Every option of every command line says its default in --help, and esper-train's usage shows upload."""

from __future__ import annotations

import argparse

import pytest

from nissa.cli import runs_parser
from nissa_server.cli import build_parser as server_parser
from nissa_server.cli_prune import build_parser as prune_parser
from trainer.cli import train_parser, upload_parser
from tui.cli import build_parser as watch_parser

PARSERS = {"nissa-server": server_parser, "nissa-server prune": prune_parser, "esper-watch": watch_parser,
           "esper-train": train_parser, "esper-train upload": upload_parser, "nissa runs": runs_parser}


def _shown(default: object) -> list[str]:
    """How a default may be written in a help text: 10000 as 10000 or 10,000, 60.0 as 60, no tags as none."""
    if default == ():
        return ["none"]
    if isinstance(default, float):
        return [f"{default:g}"]
    if isinstance(default, int):
        return [str(default), f"{default:,}"]
    return [str(default)]


@pytest.mark.parametrize("name", sorted(PARSERS))
def test_every_option_shows_its_default(name, monkeypatch):
    for var in ("NISSA_SERVER", "NISSA_TOKEN", "NISSA_RUN_ID"):
        monkeypatch.delenv(var, raising=False)
    parser = PARSERS[name]()
    options = [a for a in parser._actions if a.option_strings and not isinstance(a, argparse._HelpAction)]
    assert options
    missing = []
    for action in options:
        text = (action.help or "") % {"default": action.default, "prog": parser.prog}
        value = action.default
        if "default" not in text:
            missing.append(f"{action.option_strings[0]}: no default in {text!r}")
        elif value is not None and not isinstance(value, bool) and not any(s in text for s in _shown(value)):
            missing.append(f"{action.option_strings[0]}: default {value!r} not in {text!r}")
    assert not missing, "\n".join(missing)


def test_esper_train_usage_names_the_upload():
    usage = train_parser().format_usage()
    assert "esper-train upload RUN_DIR" in usage and "--server" in usage
    assert "--wait" in upload_parser().format_help()
