"""``scripts/busy_suite.py``: a run's counts read from its last line, a failed run's output kept whole, a run past
its limit stopped with all it started and counted as a failure, and the machine's load said beside each run."""

from __future__ import annotations

import importlib.util
import sys
import textwrap
from pathlib import Path

import psutil

ROOT = Path(__file__).resolve().parent.parent


def _script():
    spec = importlib.util.spec_from_file_location("busy_suite", ROOT / "scripts" / "busy_suite.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up by name
    spec.loader.exec_module(module)
    return module


def test_a_failed_run_is_counted_and_its_whole_output_kept(tmp_path: Path) -> None:
    busy = _script()
    code = ("import sys\nfor i in range(5000): print('line', i)\n"
            "print('12 passed, 2 failed, 3 skipped in 4.0s')\nsys.exit(1)")
    keep = tmp_path / "run.log"
    result = busy.one_run([sys.executable, "-c", code], hogs=1, limit=120, keep=keep, sample_every=0.05)
    assert result.counts == {"passed": 12, "failed": 2, "skipped": 3}
    assert result.rc == 1 and result.failures == 2
    kept = keep.read_text()
    assert "line 0\n" in kept and "line 4999\n" in kept  # whole, not a tail
    assert result.loads and all(load >= 0 for load in result.loads)
    assert "passed=12 failed=2 errors=0 skipped=3 rc=1" in result.line(1) and "load=" in result.line(1)


def test_a_clean_run_counts_no_failure_and_keeps_nothing(tmp_path: Path) -> None:
    busy = _script()
    keep = tmp_path / "run.log"
    result = busy.one_run([sys.executable, "-c", "print('7 passed in 1.0s')"], hogs=0, limit=120, keep=keep)
    assert (result.counts, result.rc, result.failures) == ({"passed": 7}, 0, 0)
    assert not keep.exists()


def test_a_run_that_ends_with_no_count_but_an_error_status_is_a_failure(tmp_path: Path) -> None:
    busy = _script()
    result = busy.one_run([sys.executable, "-c", "raise SystemExit(2)"], hogs=0, limit=120, keep=tmp_path / "l")
    assert (result.counts, result.rc, result.failures) == ({}, 2, 1)


def test_a_run_past_its_limit_is_stopped_with_what_it_started(tmp_path: Path) -> None:
    busy = _script()
    busy.GRACE_S = 5.0
    pid_file = tmp_path / "child.pid"
    code = textwrap.dedent(f"""
        import signal, subprocess, sys, time
        signal.signal(signal.SIGINT, signal.SIG_IGN)  # it ignores the interrupt: the kill must end it
        child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
        open({str(pid_file)!r}, "w").write(str(child.pid))
        print("started", flush=True)
        time.sleep(600)
    """)
    keep = tmp_path / "run.log"
    result = busy.one_run([sys.executable, "-c", code], hogs=0, limit=3, keep=keep)
    assert result.rc is None and result.failures == 1
    assert "rc=timeout" in result.line(1)
    kept = keep.read_text()
    assert "started" in kept and "ran past its limit of 3 s" in kept
    child = int(pid_file.read_text())
    try:
        psutil.Process(child).wait(timeout=30)  # killed with its group: gone (psutil.TimeoutExpired if not)
    except psutil.NoSuchProcess:
        pass
