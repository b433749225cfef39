"""Multi-rank runs on the CPU: what agreeing on commands costs, and how long a command takes to apply everywhere.

Two measurements, each against a baseline taken in the same invocation:

1. Step time (wall time of the training loop over its steps) of one rank alone, of two ranks under
   torchrun (gloo) without command agreement, and of two ranks with it (the default of every real run).
   ``agreement_overhead`` = step time with agreement / without - 1 (noisy: two ranks share two cores);
   measured inside the agreeing runs, ``exchange_share`` = the time a rank spent at its exchanges over
   the loop's time (waiting there for the slower rank included), and ``exchange_cost`` = the loop's
   exchanges at what one costs when the ranks arrive together (the median of 80, timed after the
   loop) over the loop's time. Repeats are interleaved; medians are reported.
2. ``POST /escalate`` → applied on every rank, through a real nissa-server: each latency is the latest
   ``ts`` of the ranks' ``command_status: applied`` events minus the time just before the POST (one
   machine's clock), for a run of two ranks and, as the baseline, one rank alone (which applies at its
   next step; two ranks apply at their next exchange, the end of an epoch). Each POST waits a random
   while first, so that it lands anywhere in an epoch.

    python bench/multirank.py [--rounds 6] [--repeats 3] [--samples 20]

Two ranks on two shared cores compete with each other and with the server: the step-time ratio
between one and two ranks says more about the machine than about the code. Last line: key=value pairs.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import httpx
from escalation_latency import _say, _script, _wait  # a sibling script module

from leyline import CommandStatus, CommandStatusChanged, decode_events

TRAIN = ["--device", "cpu", "--n-envs", "1", "--train-size", "512", "--val-size", "64", "--batch-size", "32",
         "--episode-length", "4", "--lstm-hidden", "16", "--log-every", "0"]
SIZE = TRAIN.index("--train-size") + 1
WORKER_TAG = "WORKER "


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("NISSA_TOKEN", "NISSA_SERVER")}
    env["PYTHONUNBUFFERED"] = "1"
    return env


# --- 1. step time: the worker, one per rank ----------------------------------------------------------


def worker(argv: list[str]) -> int:
    """One rank of a timed run (no server): prints, on rank 0, every rank's step time and exchange time."""
    from ranks import Ranks
    from trainer.build import build_run, open_run
    from trainer.cli import train_parser
    from trainer.simic.config import TrainConfig

    p = argparse.ArgumentParser()
    p.add_argument("--agree", choices=("on", "off"), default="on")
    p.add_argument("--log-dir", required=True)
    ours, rest = p.parse_known_args(argv)
    config = TrainConfig.from_args(train_parser().parse_args(rest))
    ranks = Ranks.start(config.device)  # the loop's own group: the run leaves it open at its end
    try:
        run = build_run(config, open_run(config, run_name="bench", log_dir=Path(ours.log_dir), system_metrics=False,
                                         agree=ours.agree == "on"))
        runtime = run.run.runtime
        run.run.start()
        start = time.perf_counter()
        summary = run.train()
        wall = time.perf_counter() - start
        run.run.end(summary, timeout=5.0)
        steps = runtime.step
        exchange = runtime.agreement.total_s if runtime.agreement is not None else 0.0
        exchanges = runtime.agreement.rounds if runtime.agreement is not None else 0
        mine = {"step_ms": wall * 1e3 / steps, "wall_s": wall, "exchange_share": exchange / wall,
                "exchanges": exchanges, "exchange_s": _exchange_alone(runtime) if exchanges else 0.0}
        rows = [json.loads(raw) for raw in ranks.gather(json.dumps(mine).encode())]
    finally:
        ranks.close()
    if ranks.is_main:
        _say(WORKER_TAG + json.dumps(rows))
    return 0


def _exchange_alone(runtime) -> float:
    """Median time of the run's exchange (an empty report) with the ranks arriving together: its own cost,
    without the wait for a slower rank that the loop's exchanges include."""
    from nissa.control.agreement import Agreement

    agreement = Agreement(runtime.ranks)
    for _ in range(100):
        agreement.exchange(runtime.step, [], 0.01)
    return statistics.median(agreement.times[20:])


def _timed(ranks: int, agree: str, rounds: int, tmp: Path) -> list[dict]:
    args = [__file__, "--worker", "--agree", agree, "--log-dir", str(tmp / "runs"), "--rounds", str(rounds), *TRAIN]
    cmd = ([sys.executable, *args] if ranks == 1 else
           [_script("torchrun"), "--standalone", "--nproc-per-node", str(ranks), *args])
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=900, env=_env())
    lines = [line for line in done.stdout.splitlines() if line.startswith(WORKER_TAG)]
    if done.returncode != 0 or not lines:
        raise SystemExit(f"{ranks}-rank run failed:\n{done.stdout[-2000:]}\n{done.stderr[-3000:]}")
    return json.loads(lines[-1][len(WORKER_TAG):])


def step_times(rounds: int, repeats: int, tmp: Path) -> dict[str, float]:
    one, off, on, share, cost = [], [], [], [], []
    for _ in range(repeats):  # interleaved, so that a change in the machine's load hits every variant
        one.append(_timed(1, "off", rounds, tmp)[0]["step_ms"])
        off.append(max(r["step_ms"] for r in _timed(2, "off", rounds, tmp)))
        agreeing = _timed(2, "on", rounds, tmp)
        on.append(max(r["step_ms"] for r in agreeing))
        share.append(max(r["exchange_share"] for r in agreeing))
        cost.append(max(r["exchange_s"] * r["exchanges"] / r["wall_s"] for r in agreeing))
    med = statistics.median
    return {"step_ms_1": med(one), "step_ms_2_off": med(off), "step_ms_2_on": med(on),
            "exchange_share": med(share), "exchange_cost": med(cost)}


# --- 2. latency: POST /escalate → applied on every rank ----------------------------------------------


def _applied(url: str, run_id: str, ranks: int) -> dict[str, list[float]]:
    out: dict[str, list[float]] = {}
    for rank in range(ranks):
        resp = httpx.get(f"{url}/runs/{run_id}/events", params={"kind": "command_status", "limit": 10000,
                                                                "rank": rank}, timeout=30)
        resp.raise_for_status()
        for e in decode_events(resp.content):
            if isinstance(e.payload, CommandStatusChanged) and e.payload.status is CommandStatus.APPLIED:
                out.setdefault(e.payload.command_id, []).append(e.ts)
    return out


def latencies(url: str, ranks: int, samples: int, tmp: Path, spread_s: float) -> list[float]:
    log_dir = tmp / f"live{ranks}"
    args = ["-m", "trainer", "--server", url, "--log-dir", str(log_dir), "--run-name", f"live{ranks}",
            "--rounds", "1000", *TRAIN]
    cmd = ([sys.executable, *args] if ranks == 1 else
           [_script("torchrun"), "--standalone", "--nproc-per-node", str(ranks), *args])
    trainer = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=_env())
    try:
        logs = _wait(lambda: sorted(log_dir.glob("*/events*.jsonl")) if len(list(log_dir.glob("*/events*.jsonl")))
                     == ranks else None, 120, "the run's logs")
        run_id = logs[0].parent.name
        _wait(lambda: httpx.get(f"{url}/runs/{run_id}", timeout=5).json().get("status") == "live", 60, "a live run")
        sent: dict[str, float] = {}
        rng = random.Random(ranks)
        with httpx.Client(timeout=10) as client:
            for _ in range(samples):
                # A POST at a random moment: right after the last one applied, it would find the ranks just
                # past an exchange, and wait a whole epoch for the next.
                time.sleep(rng.uniform(0.0, spread_s))
                t0 = time.time()
                resp = client.post(f"{url}/escalate", json={"run_id": run_id, "action": "debug", "epochs": 1})
                if resp.status_code != 202:
                    raise SystemExit(f"POST /escalate: {resp.status_code} {resp.text}")
                cid = resp.json()["command_id"]
                sent[cid] = t0
                _wait(lambda cid=cid: client.get(f"{url}/commands/{cid}").json()["status"] in ("applied", "completed"),
                      60, f"command {cid} applied")
        found = _wait(lambda: (a := _applied(url, run_id, ranks)) and all(len(a.get(c, ())) == ranks for c in sent)
                      and a, 60, "every rank's applied events")
        return [(max(found[c]) - t0) * 1e3 for c, t0 in sent.items()]
    finally:
        trainer.terminate()
        try:
            trainer.wait(timeout=60)
        except subprocess.TimeoutExpired:
            trainer.kill()


def _percentiles(values: list[float]) -> tuple[float, float]:
    if len(values) < 2:
        return values[0], values[0]
    return statistics.median(values), statistics.quantiles(values, n=100, method="inclusive")[98]


def options(argv: list[str] | None = None) -> argparse.Namespace:
    """The benchmark's settings from ``argv``: its own defaults, checked."""
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--rounds", type=int, default=6, help="rounds of each timed run (default %(default)s)")
    p.add_argument("--repeats", type=int, default=3, help="timed runs of each variant (default %(default)s)")
    p.add_argument("--samples", type=int, default=20, help="escalations per live run (default %(default)s)")
    p.add_argument("--train-size", type=int, default=int(TRAIN[SIZE]),
                   help="training images an epoch (default %(default)s; 32 a step)")
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["--worker"]:
        return worker(argv[1:])
    args = options(argv)
    TRAIN[SIZE] = str(args.train_size)
    with tempfile.TemporaryDirectory(prefix="multirank-bench-") as tmp_name:
        tmp = Path(tmp_name)
        times = step_times(args.rounds, args.repeats, tmp)
        server = subprocess.Popen([_script("nissa-server"), "--host", "127.0.0.1", "--port", "0", "--db",
                                   str(tmp / "nissa.db")], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                  text=True, env=_env())
        try:
            assert server.stdout is not None
            url = server.stdout.readline().strip().rsplit(" ", 1)[-1]
            threading.Thread(target=lambda: [None for _ in server.stdout], daemon=True).start()
            spread = 2 * times["step_ms_2_on"] * (args.train_size // 32) / 1e3  # about an epoch
            one = latencies(url, 1, args.samples, tmp, spread)
            two = latencies(url, 2, args.samples, tmp, spread)
        finally:
            server.terminate()
            server.wait(timeout=30)
    overhead = times["step_ms_2_on"] / times["step_ms_2_off"] - 1
    (p50_1, p99_1), (p50_2, p99_2) = _percentiles(one), _percentiles(two)
    _say(f"step time: 1 rank {times['step_ms_1']:.2f} ms; 2 ranks {times['step_ms_2_off']:.2f} ms without "
         f"agreement, {times['step_ms_2_on']:.2f} ms with it ({overhead:+.2%}); at the exchanges "
         f"{times['exchange_share']:.2%} of the loop's time, of which the exchanges themselves "
         f"{times['exchange_cost']:.3%}")
    _say(f"POST -> applied on every rank: 1 rank p50 {p50_1:.1f} ms, p99 {p99_1:.1f} ms; 2 ranks p50 {p50_2:.1f} ms, "
         f"p99 {p99_2:.1f} ms")
    _say(f"agreement_overhead={overhead:.4f} exchange_cost={times['exchange_cost']:.5f} "
         f"exchange_share={times['exchange_share']:.4f} "
         f"step_ms_1={times['step_ms_1']:.3f} step_ms_2_off={times['step_ms_2_off']:.3f} "
         f"step_ms_2_on={times['step_ms_2_on']:.3f} ranks_ratio={times['step_ms_2_off'] / times['step_ms_1']:.3f} "
         f"p50_ms_1={p50_1:.1f} p99_ms_1={p99_1:.1f} p50_ms_2={p50_2:.1f} p99_ms_2={p99_2:.1f} "
         f"ratio={p50_2 / p50_1:.3f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
