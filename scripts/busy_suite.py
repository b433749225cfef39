"""Runs ``make test`` several times with CPU-bound processes beside it: does the suite hold on a busy machine?

    python scripts/busy_suite.py [--runs 3] [--hogs 2] [--limit 5400] [--keep DIR]

Each hog is a bounded busy loop (it ends with its run, or after ``--limit`` seconds at the latest). Prints one
line per run (passed, failed, errors, skipped, minutes, and the machine's 1-minute load average while it ran,
sampled every 30 s: median and range) and a last line of key=value pairs; exits 1 if any run failed or ran past
``--limit`` (it is then interrupted, and killed 30 s later if it has not ended). The whole output of such a run is
kept in ``DIR/busy-run-N.log`` (default: the system's temporary directory), and its path printed: a failure seen
once is read in full, not from a tail.
"""

from __future__ import annotations

import argparse
import os
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
HOG = "import time\nend = time.monotonic() + {limit}\nwhile time.monotonic() < end:\n    sum(range(10000))\n"
COUNTS = re.compile(r"(\d+) (passed|failed|errors?|skipped)")
GRACE_S = 30.0
"""How long a run past its limit has, once interrupted, to stop its own processes before it is killed."""


@dataclass
class RunResult:
    """One run of the suite."""

    counts: dict[str, int]
    minutes: float
    rc: int | None
    """The exit status; None when the run went past its limit and was stopped."""
    loads: list[float] = field(default_factory=list)
    """The 1-minute load average, sampled while it ran."""

    @property
    def failures(self) -> int:
        bad = self.counts.get("failed", 0) + self.counts.get("error", 0)
        return bad if bad or self.rc == 0 else 1

    def line(self, number: int) -> str:
        load = (f"load={statistics.median(self.loads):.1f} ({min(self.loads):.1f}-{max(self.loads):.1f})"
                if self.loads else "load=?")
        rc = "timeout" if self.rc is None else self.rc
        return (f"run {number}: passed={self.counts.get('passed', 0)} failed={self.counts.get('failed', 0)} "
                f"errors={self.counts.get('error', 0)} skipped={self.counts.get('skipped', 0)} rc={rc} "
                f"minutes={self.minutes:.1f} {load}")


class LoadSampler(threading.Thread):
    """The machine's 1-minute load average every ``every`` seconds (the first at once) until stopped."""

    def __init__(self, every: float = 30.0) -> None:
        super().__init__(daemon=True)
        self.every = every
        self.loads: list[float] = []
        self._done = threading.Event()

    def run(self) -> None:
        while True:
            self.loads.append(os.getloadavg()[0])
            if self._done.wait(self.every):
                return

    def stop(self) -> list[float]:
        self._done.set()
        self.join()
        return self.loads


def _run_bounded(command: list[str], limit: float) -> tuple[str, int | None]:
    """Its output (stdout, then stderr) and exit status; past ``limit``, its whole process group is interrupted
    (then killed) and the status is None."""
    proc = subprocess.Popen(command, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)
    try:
        out, err = proc.communicate(timeout=limit)
        return out + "\n--- stderr ---\n" + err, proc.returncode
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGINT)
        try:
            out, err = proc.communicate(timeout=GRACE_S)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            out, err = proc.communicate()
        return out + "\n--- stderr ---\n" + err + f"\n(stopped: it ran past its limit of {limit:.0f} s)\n", None


def one_run(command: list[str], hogs: int, limit: float, keep: Path, sample_every: float = 30.0) -> RunResult:
    """``command`` once, beside ``hogs`` busy loops; its output kept in ``keep`` if it failed."""
    spinners = [subprocess.Popen([sys.executable, "-c", HOG.format(limit=limit)]) for _ in range(hogs)]
    sampler = LoadSampler(sample_every)
    sampler.start()
    start = time.monotonic()
    try:
        output, rc = _run_bounded(command, limit)
    finally:
        for spinner in spinners:
            spinner.kill()
            spinner.wait()
    result = RunResult({}, (time.monotonic() - start) / 60, rc, sampler.stop())
    stdout = output.split("\n--- stderr ---\n", 1)[0].strip()
    tail = stdout.splitlines()[-1] if stdout else ""
    result.counts = {kind.rstrip("s") if kind.startswith("error") else kind: int(n) for n, kind in COUNTS.findall(tail)}
    if rc != 0:
        keep.write_text(output)
        sys.stdout.write(output[-6000:] + f"\n(the whole output: {keep})\n")
    return result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--hogs", type=int, default=2, help="CPU-bound processes beside the suite")
    parser.add_argument("--limit", type=float, default=5400, help="seconds a run (and its hogs) may last")
    parser.add_argument("--keep", type=Path, default=Path(tempfile.gettempdir()),
                        help="where a failed run's whole output is kept (default: %(default)s)")
    args = parser.parse_args()
    args.keep.mkdir(parents=True, exist_ok=True)
    failures = 0
    for i in range(args.runs):
        result = one_run(["make", "-s", "test"], args.hogs, args.limit, args.keep / f"busy-run-{i + 1}.log")
        failures += result.failures
        print(result.line(i + 1), flush=True)
    print(f"runs={args.runs} hogs={args.hogs} failures={failures}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
