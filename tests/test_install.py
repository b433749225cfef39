"""The README's two set-up commands install what each needs: ``make demo`` the runtime dependencies only (no
pytest, JupyterLab or transformers for a demo), ``make test`` the dev extra on top, and only ``make bench`` the
bench extra (Ray Tune, the anchor bench/sweeps.py measures against); CI runs ``make test``."""

from __future__ import annotations

import pathlib
import re
import shutil
import subprocess

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]


def _installs(target: str, venv: pathlib.Path) -> list[str]:
    """What ``make -n TARGET`` would pip install (the commands printed, none run), on a venv not there yet."""
    if shutil.which("make") is None:
        pytest.fail("make is needed: the README's set-up commands are make targets")
    out = subprocess.run(["make", "-n", target, f"VENV={venv}"], cwd=ROOT, capture_output=True, text=True,
                         check=True, timeout=60).stdout
    return [line.split(" install ", 1)[1] for line in out.splitlines() if re.search(r"/pip install ", line)]


def test_make_demo_installs_the_runtime_and_make_test_adds_the_extras(tmp_path):
    demo = _installs("demo", tmp_path / "venv")
    assert demo[-1] == "-c constraints.txt -e ." and not any("[" in line for line in demo), demo
    test = _installs("test", tmp_path / "venv")
    assert test[:len(demo)] == demo and test[-1] == "-c constraints.txt -e '.[dev]'", test
    assert not any("bench" in line for line in test), test
    bench = _installs("bench", tmp_path / "venv")
    assert bench[:len(test)] == test and bench[-1] == "-c constraints.txt -e '.[dev,bench]'", bench
    assert (ROOT / ".ci" / "run").read_text().strip().endswith("make test")
