"""Every benchmark runs at its own defaults (``python bench/X.py``, nothing else: its arguments parse and pass its
own checks), and each runs end to end at its smallest size; those not run in ``test_benchmarks.py`` or
``test_series_bench.py`` are run here."""

from __future__ import annotations

import argparse
import importlib.util
import pathlib
import subprocess
import sys
from types import ModuleType

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
BENCHES = sorted(p for p in (ROOT / "bench").glob("*.py") if 'if __name__ == "__main__":' in p.read_text())


def _load(path: pathlib.Path, monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    """``bench/<path>`` imported as a module (beside its siblings, which it imports by name)."""
    monkeypatch.syspath_prepend(str(ROOT / "bench"))
    spec = importlib.util.spec_from_file_location(f"bench_{path.stem}", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, spec.name, module)  # its dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def test_the_benchmarks_are_all_here():
    assert len(BENCHES) >= 20 and {p.stem for p in BENCHES} >= {"learning", "host_syncs", "anomaly_detection"}


@pytest.mark.parametrize("path", BENCHES, ids=lambda p: p.stem)
def test_a_benchmark_takes_its_own_defaults(path, monkeypatch):
    """``options([])`` is what ``python bench/X.py`` parses: the benchmark's own defaults, passing its own checks
    (``learning.py`` once refused its defaults: ``--rounds`` took the trainer's 3, under its ``2 × --window``)."""
    module = _load(path, monkeypatch)
    assert isinstance(module.options([]), argparse.Namespace)


def test_a_training_benchmarks_defaults_are_its_own(monkeypatch):
    learning = _load(ROOT / "bench" / "learning.py", monkeypatch)
    host_syncs = _load(ROOT / "bench" / "host_syncs.py", monkeypatch)
    assert (learning.options([]).rounds, learning.options([]).device) == (12, "cpu") == (
        learning.DEFAULTS.rounds, learning.DEFAULTS.device)
    assert host_syncs.options([]).rounds == host_syncs.DEFAULTS.rounds == 2
    assert learning.options(["--rounds", "8"]).rounds == 8
    with pytest.raises(SystemExit):
        learning.options(["--rounds", "4", "--window", "3"])


SMALLEST = {
    "hub_emit": ["--steps", "200", "--rounds", "1"],
    "serialization": ["--rounds", "1", "--calls", "50"],
    "page_memory": ["--events", "20", "--config-kb", "1", "--reads", "1"],
    "fanout": ["--seconds", "0.3", "--watchers", "0,1", "--rate", "500", "--batch", "50"],
    "escalation_latency": ["--samples", "2"],
    "reliability": ["--rounds", "1", "--burst", "10", "--silent", "10"],
    "telemetry_overhead": ["--repeats", "1", "--rounds", "1", "--episode-length", "2", "--n-envs", "1",
                           "--profile-batches", "1", "--stride", "2", "--env-exec", "per-env"],
    "series_reads": ["--before", str(ROOT), "--label-sets", "20", "--overlay-runs", "1", "--overlay-sets", "2",
                     "--overlay-points", "5", "--at-once", "2"],
}
"""The benchmarks the other tests do not run, each at its smallest size."""


def test_every_benchmark_is_run_somewhere():
    elsewhere = "".join((ROOT / "tests" / "e2e" / name).read_text()
                        for name in ("test_benchmarks.py", "test_series_bench.py"))
    assert [p.stem for p in BENCHES if f"bench/{p.name}" not in elsewhere and p.stem not in SMALLEST] == []


@pytest.mark.timeout(300)
@pytest.mark.parametrize("name", sorted(SMALLEST))
def test_a_benchmark_runs_at_its_smallest_size(name):
    done = subprocess.run([sys.executable, f"bench/{name}.py", *SMALLEST[name]], cwd=ROOT, capture_output=True,
                          text=True, timeout=280)
    assert done.returncode == 0, done.stderr[-3000:]
    last = done.stdout.strip().splitlines()[-1]
    pairs = dict(pair.split("=", 1) for pair in last.split())
    assert pairs and all(key and value for key, value in pairs.items()), last
