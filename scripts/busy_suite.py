"""Runs ``make test`` several times with CPU-bound processes beside it: does the suite hold on a busy machine?

    python scripts/busy_suite.py [--runs 3] [--hogs 2] [--limit 2400] [--keep DIR]

Each hog is a bounded busy loop (it ends with its run, or after ``--limit`` seconds at the latest). Prints one
line per run (passed, failed, errors, minutes) and a last line of key=value pairs; exits 1 if any run failed.
The whole output of a failed run is kept in ``DIR/busy-run-N.log`` (default: the system's temporary directory),
and its path printed: a failure seen once is read in full, not from a tail.
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
HOG = "import time\nend = time.monotonic() + {limit}\nwhile time.monotonic() < end:\n    sum(range(10000))\n"
COUNTS = re.compile(r"(\d+) (passed|failed|errors?|skipped)")


def _one_run(hogs: int, limit: float, keep: Path) -> tuple[dict[str, int], float, int]:
    spinners = [subprocess.Popen([sys.executable, "-c", HOG.format(limit=limit)]) for _ in range(hogs)]
    start = time.monotonic()
    try:
        done = subprocess.run(["make", "-s", "test"], cwd=ROOT, capture_output=True, text=True, timeout=limit)
    finally:
        for spinner in spinners:
            spinner.kill()
            spinner.wait()
    minutes = (time.monotonic() - start) / 60
    tail = done.stdout.strip().splitlines()[-1] if done.stdout.strip() else ""
    counts = {kind.rstrip("s") if kind.startswith("error") else kind: int(n) for n, kind in COUNTS.findall(tail)}
    if done.returncode:
        keep.write_text(done.stdout + "\n--- stderr ---\n" + done.stderr)
        sys.stdout.write(done.stdout[-4000:] + done.stderr[-2000:] + f"\n(the whole output: {keep})\n")
    return counts, minutes, done.returncode


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--hogs", type=int, default=2, help="CPU-bound processes beside the suite")
    parser.add_argument("--limit", type=float, default=2400, help="seconds a run (and its hogs) may last")
    parser.add_argument("--keep", type=Path, default=Path(tempfile.gettempdir()),
                        help="where a failed run's whole output is kept (default: %(default)s)")
    args = parser.parse_args()
    args.keep.mkdir(parents=True, exist_ok=True)
    failures = 0
    for i in range(args.runs):
        counts, minutes, rc = _one_run(args.hogs, args.limit, args.keep / f"busy-run-{i + 1}.log")
        bad = counts.get("failed", 0) + counts.get("error", 0) + (1 if rc and not counts.get("failed") else 0)
        failures += bad
        print(f"run {i + 1}: passed={counts.get('passed', 0)} failed={counts.get('failed', 0)} "
              f"errors={counts.get('error', 0)} skipped={counts.get('skipped', 0)} rc={rc} minutes={minutes:.1f}",
              flush=True)
    print(f"runs={args.runs} hogs={args.hogs} failures={failures}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
