"""Runs ``make test`` several times with CPU-bound processes beside it: does the suite hold on a busy machine?

    python scripts/busy_suite.py [--runs 3] [--hogs 2] [--limit 2400]

Each hog is a bounded busy loop (it ends with its run, or after ``--limit`` seconds at the latest). Prints one
line per run (passed, failed, errors, minutes) and a last line of key=value pairs; exits 1 if any run failed.
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
HOG = "import time\nend = time.monotonic() + {limit}\nwhile time.monotonic() < end:\n    sum(range(10000))\n"
COUNTS = re.compile(r"(\d+) (passed|failed|errors?|skipped)")


def _one_run(hogs: int, limit: float) -> tuple[dict[str, int], float, int]:
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
        sys.stdout.write(done.stdout[-4000:] + done.stderr[-2000:])
    return counts, minutes, done.returncode


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--hogs", type=int, default=2, help="CPU-bound processes beside the suite")
    parser.add_argument("--limit", type=float, default=2400, help="seconds a run (and its hogs) may last")
    args = parser.parse_args()
    failures = 0
    for i in range(args.runs):
        counts, minutes, rc = _one_run(args.hogs, args.limit)
        bad = counts.get("failed", 0) + counts.get("error", 0) + (1 if rc and not counts.get("failed") else 0)
        failures += bad
        print(f"run {i + 1}: passed={counts.get('passed', 0)} failed={counts.get('failed', 0)} "
              f"errors={counts.get('error', 0)} skipped={counts.get('skipped', 0)} rc={rc} minutes={minutes:.1f}",
              flush=True)
    print(f"runs={args.runs} hogs={args.hogs} failures={failures}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
