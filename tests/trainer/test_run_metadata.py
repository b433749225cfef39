"""esper-train --project --group --tag --notes travel in the run's run_started."""

from __future__ import annotations

import json

from trainer.cli import main

TINY = ["--rounds", "1", "--episode-length", "2", "--n-envs", "1", "--train-size", "64", "--val-size", "32",
        "--batch-size", "32", "--policy", "heuristic", "--log-every", "0", "--no-system-metrics"]


def test_where_a_run_belongs_is_in_its_run_started(tmp_path):
    assert main(["--log-dir", str(tmp_path), "--server", "", "--project", "cifar", "--group", "lr-sweep",
                 "--tag", "baseline", "--tag", "seed0", "--tag", "baseline", "--notes", "first try", *TINY]) == 0
    (log,) = tmp_path.glob("*/events.jsonl")
    started = json.loads(log.read_text().splitlines()[0])
    assert started["kind"] == "run_started"
    payload = started["payload"]
    assert (payload["project"], payload["group"], payload["tags"], payload["notes"]) == (
        "cifar", "lr-sweep", ["baseline", "seed0"], "first try")
