"""A process that floods a NissaHub past its queue: metric events interleaved with critical ones.

    python tests/e2e/storm.py --server URL --log-dir DIR --metrics N --critical-every K --queue Q

Prints one JSON line: the run id and how many events of each kind it emitted.
"""

from __future__ import annotations

import argparse
import json
import pathlib
import sys

from leyline import RunFinished, RunStarted
from leyline.esper import EpochCompleted, SeedGerminated
from nissa.hub import HubConfig, NissaHub


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--server", required=True)
    p.add_argument("--log-dir", type=pathlib.Path, required=True)
    p.add_argument("--metrics", type=int, default=50_000)
    p.add_argument("--critical-every", type=int, default=100)
    p.add_argument("--queue", type=int, default=100)
    args = p.parse_args()
    hub = NissaHub(HubConfig(run_id="storm-run", log_dir=args.log_dir, server=args.server,
                             queue_size=args.queue, drop_report_s=0.05)).start()
    hub.emit(RunStarted(name="storm", config={"metrics": args.metrics}), step=0, epoch=0)
    critical = 1
    for i in range(args.metrics):
        hub.emit(EpochCompleted(accuracy=0.5, val_loss=1.0), step=i, epoch=0, env=0)
        if i % args.critical_every == 0:
            hub.emit(SeedGerminated(slot="r0c0", seed_id=f"s{i}", blueprint="conv", params=1), step=i, epoch=0)
            critical += 1
    hub.emit(RunFinished(status="completed", duration_s=0.0), step=args.metrics, epoch=0)
    report = hub.close(timeout=60)
    sys.stdout.write(json.dumps({"run_id": "storm-run", "metrics": args.metrics, "critical": critical + 1,
                                 "acked": report.acked, "logged": report.logged}) + "\n")
    return 0 if report.complete else 1


if __name__ == "__main__":
    raise SystemExit(main())
