"""``make demo`` without a terminal: the server, a heuristic run and the summary of what grew."""

from __future__ import annotations

import importlib.util
import os
import pathlib
import re
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(300)]


def _demo_module():
    spec = importlib.util.spec_from_file_location("demo", ROOT / "scripts" / "demo.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_demo_keeps_the_consoles_state_in_its_folder_unless_told_where(monkeypatch, tmp_path):
    from tui.cli import default_log_file

    demo = _demo_module()
    monkeypatch.delenv("XDG_STATE_HOME", raising=False)
    env = demo._state_env(tmp_path / "demo")
    monkeypatch.setenv("XDG_STATE_HOME", env["XDG_STATE_HOME"])
    assert default_log_file().is_relative_to(tmp_path / "demo")  # what esper-watch, run by the demo, writes
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "mine"))
    assert demo._state_env(tmp_path / "demo")["XDG_STATE_HOME"] == str(tmp_path / "mine")
    assert default_log_file() == tmp_path / "mine" / "esper-watch" / "log" / "esper-watch.log"


def test_the_demo_fossilizes_a_seed_in_its_first_round_and_says_what_it_brought(tmp_path):
    # About 10 s: one round of the demo's run (its default is 60). Nothing is written to the user's home.
    home = tmp_path / "home"
    home.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith("XDG_")} | {"HOME": str(home)}
    done = subprocess.run([sys.executable, "scripts/demo.py", "--dir", str(tmp_path / "demo"), "--rounds", "1"],
                          cwd=ROOT, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=240, env=env)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert re.search(r"run demo-\S+ \(demo\): finished", done.stdout), done.stdout[-3000:]
    grown = re.findall(r"epoch (\d+) env \d: \S+ fossilized in r0c\d, contribution ([+-]\d+\.\d) pp", done.stdout)
    assert grown and all(1 <= int(epoch) <= 12 and float(pp) > 0 for epoch, pp in grown), done.stdout[-3000:]
    assert not list(home.iterdir()), list(home.rglob("*"))
