"""``nissa sweep``: create a sweep from its TOML spec, run an agent, see where it stands, stop it.

    nissa sweep create sweep.toml --server http://127.0.0.1:8765      # prints the sweep id last
        (a pbt spec's command is probed first, up to its loop's first step: ``nissa.sweep.probe``)
    nissa sweep agent SWEEP_ID --server http://127.0.0.1:8765 --slots 4
    nissa sweep status SWEEP_ID --server http://127.0.0.1:8765
    nissa sweep stop SWEEP_ID --server http://127.0.0.1:8765
"""

from __future__ import annotations

import argparse
import json
import pathlib
import signal
import sys
import tomllib
from collections.abc import Callable
from typing import Any

import msgspec

from leyline.sweeps import MAX_PARALLEL, SweepInfo, decode_spec
from leyline.text import visible
from nissa import env
from nissa.sweep.probe import MAX_PROBE_TIMEOUT_S, PROBE_TIMEOUT_S

MAX_SPEC_BYTES = 1 << 20


def add_sweep(sub: Any) -> None:
    p = sub.add_parser("sweep", help="create, run, watch and stop sweeps",
                       description="Sweeps: trials leased by the server, run by agents, steered live.")
    verbs = p.add_subparsers(dest="verb", required=True, metavar="VERB")
    create = _common(verbs.add_parser(
        "create", help="create a sweep from its TOML spec; prints its id last",
        description="Create a sweep from its TOML spec; prints its id last. A pbt spec's command is first run once "
                    "as a probe, up to its loop's first step boundary (its run talks to no server, logs in a "
                    "temporary directory, and the process ends there), and the sweep is refused if the loop sets "
                    "no run.on_checkpoint, run.on_restore or run.on_hparams, or the probe cannot tell. Grid, random "
                    "and tpe specs are not probed."))
    create.add_argument("spec", type=pathlib.Path, help="the spec (TOML)")
    create.add_argument("--probe-timeout", type=float, default=PROBE_TIMEOUT_S, metavar="SECONDS",
                        help="pbt: how long the probed command may take to reach its first step boundary before it "
                             f"is killed and the sweep refused (default {PROBE_TIMEOUT_S:g})")
    create.add_argument("--no-probe", action="store_true",
                        help="pbt: create the sweep without probing its command (a loop that lacks a hook then "
                             "stops the sweep at its first trial, with the reason)")
    create.set_defaults(func=_create)
    agent = _common(verbs.add_parser("agent", help="run a sweep's trials here until it needs no more"))
    agent.add_argument("sweep_id")
    agent.add_argument("--slots", type=int, default=1, help="trials run here at once (default 1)")
    agent.add_argument("--log-dir", type=pathlib.Path, default=pathlib.Path("nissa-sweeps"),
                       help="where each trial's output goes, <log-dir>/<sweep>/trial-N.log (default nissa-sweeps)")
    agent.set_defaults(func=_agent)
    for verb, helps in (("status", "a sweep's trials, values and metric"), ("stop", "stop a sweep")):
        one = _common(verbs.add_parser(verb, help=helps))
        one.add_argument("sweep_id")
        if verb == "status":
            one.add_argument("--format", choices=("table", "json"), default="table")
        one.set_defaults(func=_status if verb == "status" else _stop)


def _common(p: argparse.ArgumentParser) -> argparse.ArgumentParser:
    p.add_argument("--server", default=env.server(), help="nissa-server URL (default $NISSA_SERVER)")
    p.add_argument("--token", default=None, help="bearer token, where the server wants one (default $NISSA_TOKEN)")
    return p


def _client(args: argparse.Namespace) -> Any:
    from nissa.sweep.client import SweepClient

    if not args.server:
        raise SystemExit(f"nissa sweep {args.verb}: --server is needed (or $NISSA_SERVER)")
    try:
        return SweepClient(args.server, token=args.token or None)
    except ValueError as err:
        raise SystemExit(f"nissa sweep {args.verb}: {err}") from None


def read_spec(path: pathlib.Path) -> Any:
    """The spec file, checked here first: a mistake names the key and the rule before anything is sent."""
    try:
        with path.open("rb") as f:
            raw = f.read(MAX_SPEC_BYTES + 1)
        if len(raw) > MAX_SPEC_BYTES:
            raise ValueError(f"over {MAX_SPEC_BYTES} bytes")
        return decode_spec(tomllib.loads(raw.decode("utf-8")))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError, ValueError) as err:
        raise SystemExit(f"nissa sweep create: {visible(str(path), one_line=True)}: {err}") from None


def _create(args: argparse.Namespace) -> int:
    from nissa.api import ApiError

    if not 0 < args.probe_timeout <= MAX_PROBE_TIMEOUT_S:
        raise SystemExit(f"nissa sweep create: --probe-timeout must be seconds in (0, {MAX_PROBE_TIMEOUT_S:g}], "
                         f"got {args.probe_timeout:g}")
    spec = read_spec(args.spec)
    with _client(args) as client:
        if spec.method == "pbt" and not args.no_probe and (why := _probed(spec, args.probe_timeout)) is not None:
            print(f"nissa sweep create: {why}\nnissa sweep create: nothing was created", file=sys.stderr)
            return 1
        try:
            created = client.create(spec)
        except ApiError as err:
            print(f"nissa sweep create: {err}", file=sys.stderr)
            return 1
    print(f"sweep {created.sweep_id}: {spec.method}, {spec.budget} trials, {spec.metric.goal} {spec.metric.name}; "
          f"run it with: nissa sweep agent {created.sweep_id} --server {args.server}", file=sys.stderr)
    print(created.sweep_id)
    return 0


def _probed(spec: Any, timeout_s: float) -> str | None:
    from nissa.sweep.probe import refusal

    print(f"nissa sweep create: probing the command up to its loop's first step (at most {timeout_s:g} s; "
          "--no-probe skips it)", file=sys.stderr, flush=True)
    return refusal(spec, timeout_s)


def _agent(args: argparse.Namespace) -> int:
    from nissa.sweep.agent import Agent

    if not 1 <= args.slots <= MAX_PARALLEL:
        raise SystemExit(f"nissa sweep agent: --slots must be in 1..{MAX_PARALLEL}, got {args.slots}")
    with _client(args) as client:
        agent = Agent(client=client, sweep_id=args.sweep_id, server=args.server, slots=args.slots,
                      log_dir=args.log_dir, token=args.token or env.token())

        def stop(signum: int, frame: object) -> None:
            agent.stop_all()
            raise SystemExit(130)

        signal.signal(signal.SIGTERM, stop)
        try:
            return agent.run()
        except KeyboardInterrupt:
            agent.stop_all()
            return 130


def _asked(args: argparse.Namespace, ask: Callable[[Any], SweepInfo]) -> SweepInfo | None:
    """``ask`` of the server's sweeps; None (said on stderr) where the server refused or did not answer."""
    from nissa.api import ApiError

    with _client(args) as client:
        try:
            return ask(client)
        except ApiError as err:
            print(f"nissa sweep {args.verb}: {err}", file=sys.stderr)
            return None


def _status(args: argparse.Namespace) -> int:
    info = _asked(args, lambda client: client.get(args.sweep_id))
    if info is None:
        return 1
    sys.stdout.write(msgspec.json.encode(info).decode() + "\n" if args.format == "json" else status_table(info))
    return 0


def status_table(info: SweepInfo) -> str:
    """The sweep in a few lines, then a row per trial (what a run wrote is shown as text, never as a sequence)."""
    lines = [f"sweep {info.sweep_id} ({visible(info.name, one_line=True)}): {info.status}, {info.method}, "
             f"{info.metric.goal} {visible(info.metric.name, one_line=True)}"
             + (f"; best: trial {info.best_trial}" if info.best_trial is not None else "")]
    rows = [["trial", "status", "run", "step", "metric", "exploits", "values"]]
    for t in info.trials:
        rows.append([str(t.trial_id), t.status, t.run_id or "", "" if t.step is None else str(t.step),
                     "" if t.metric is None else f"{t.metric:.6g}", str(len(t.lineage)),
                     visible(json.dumps(t.params, sort_keys=True), one_line=True)[:80]])
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    lines += ["  ".join(v.ljust(w) for v, w in zip(r, widths, strict=True)).rstrip() for r in rows]
    return "\n".join(lines) + "\n"


def _stop(args: argparse.Namespace) -> int:
    info = _asked(args, lambda client: client.stop(args.sweep_id))
    if info is None:
        return 1
    print(f"sweep {info.sweep_id}: {info.status}")
    return 0
