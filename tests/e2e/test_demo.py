"""``make demo`` without a terminal: the server, a heuristic run and the summary of what grew."""

from __future__ import annotations

import pathlib
import re
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(300)]


def test_the_demo_fossilizes_a_seed_in_its_first_round_and_says_what_it_brought(tmp_path):
    # About 10 s: one round of the demo's run (its default is 60).
    done = subprocess.run([sys.executable, "scripts/demo.py", "--dir", str(tmp_path), "--rounds", "1"], cwd=ROOT,
                          stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=240)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert re.search(r"run demo-\S+ \(demo\): finished", done.stdout), done.stdout[-3000:]
    grown = re.findall(r"epoch (\d+) env \d: \S+ fossilized in r0c\d, contribution ([+-]\d+\.\d) pp", done.stdout)
    assert grown and all(1 <= int(epoch) <= 12 and float(pp) > 0 for epoch, pp in grown), done.stdout[-3000:]
