"""A run's start says, on stderr, the run's id and its page (as W&B's ``View run at``): a plain script that
configured no logging sees the line; the library only logs it."""

from __future__ import annotations

import subprocess
import sys

SCRIPT = """
import sys, nissa
run = nissa.init(server=sys.argv[1], run_name="said", log_dir=sys.argv[2], system_metrics=False)
run.step(); run.log({"loss": 1.0})
print(run.run_id)
run.finish()
"""


def test_a_run_prints_its_id_and_page_when_it_starts(tmp_path, server_url):
    done = subprocess.run([sys.executable, "-c", SCRIPT, server_url, str(tmp_path)], capture_output=True,
                          text=True, timeout=120, check=True)
    run_id = done.stdout.split()[-1]
    assert f"nissa: run {run_id}: {server_url}/ui#run={run_id}" in done.stderr, done.stderr
    assert done.stderr.count(f"nissa: run {run_id}") == 1
