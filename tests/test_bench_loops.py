"""The benchmarks' load loops report what they did however loaded the machine: a read loop whose time is up
before its first answer still counts one read a client (it had none, and no median to print)."""

from __future__ import annotations

import pathlib
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parents[1]


def test_a_read_loop_out_of_time_before_its_first_answer_still_reads_once_a_client(server_url):
    done = subprocess.run([sys.executable, "bench/read_isolation.py", "--read-loop", server_url, "0", "3", "/healthz"],
                          cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    count, p50, worst, refused = (float(v) for v in done.stdout.split())
    assert (count, refused) == (3, 0) and 0 < p50 <= worst, done.stdout
