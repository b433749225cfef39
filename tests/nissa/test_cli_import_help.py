"""``nissa import``'s options say their defaults in --help, as every command line's do; ``nissa`` runs it."""

from __future__ import annotations

import argparse
import subprocess
import sys

import pytest

import tests.test_cli_help as cli_help
from nissa.cli import parser


def _sub(p: argparse.ArgumentParser, name: str) -> argparse.ArgumentParser:
    action = next(a for a in p._actions if isinstance(a, argparse._SubParsersAction))
    return action.choices[name]


@pytest.mark.parametrize("source", ["tensorboard", "csv"])
def test_import_options_show_their_defaults(source, monkeypatch):
    name = f"nissa import {source}"
    monkeypatch.setitem(cli_help.PARSERS, name, lambda: _sub(_sub(parser(), "import"), source))
    cli_help.test_every_option_shows_its_default(name, monkeypatch)


def test_the_nissa_command_imports(tmp_path):
    (tmp_path / "x.csv").write_text("step,loss\n0,1.0\n1,0.5\n")
    done = subprocess.run([sys.executable, "-m", "nissa.cli", "import", "csv", str(tmp_path / "x.csv"), "--log-dir",
                           str(tmp_path / "imp"), "--server", ""], capture_output=True, text=True, timeout=120,
                          check=False)
    assert done.returncode == 0, done.stderr
    assert done.stderr.startswith("[1/1] x -> x-") and list((tmp_path / "imp").glob("x-*/events.jsonl"))
