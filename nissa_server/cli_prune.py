"""``nissa-server prune``: thin the metric events of runs last seen long ago, keeping their lifecycle,
anomalies and commands (every critical kind). Live runs are skipped. Safe beside running servers: each
chunk is its own short transaction, and a run that turns live meanwhile is left alone."""

from __future__ import annotations

import argparse
import asyncio
import logging
import pathlib
import sys
import time
from collections.abc import Sequence

from nissa_server import retention
from nissa_server.cli import add_db_arg, database_settings
from nissa_server.settings import Settings
from nissa_server.store import UnusableDatabase, create_store


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="nissa-server prune", description=__doc__.splitlines()[0].strip("`: "))
    p.add_argument("--older-than", required=True, metavar="AGE",
                   help="thin runs last seen longer ago than this: a number and s, m, h, d or w, like 30d "
                        "(required: no default)")
    p.add_argument("--keep-kinds", default="", metavar="KIND,...",
                   help="metric kinds to keep as well (default: none; lifecycle, anomalies and commands are "
                        "always kept)")
    add_db_arg(p)
    p.add_argument("--log-level", default="warning", choices=["debug", "info", "warning", "error"],
                   help="what is logged to stderr (default warning)")
    return p


def _say(line: str) -> None:
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


async def _prune(db: str | pathlib.Path, older_than_s: float, kinds: list[str]) -> list[retention.Thinned]:
    store = create_store(db, exclusive=False, series_interval_s=None)
    await asyncio.to_thread(store.open)
    store.start()
    store.series_pass.take_over_after_s = 0.0  # a pass in parts a server left halfway too
    try:
        while await store.series_pass.once():  # what a server stopped before charting it, before it goes
            pass
        return await retention.prune(store, older_than_s, kinds, time.time())
    finally:
        await store.close()


def _joined(argv: Sequence[str]) -> list[str]:
    """``--older-than -1d`` as ``--older-than=-1d``: argparse would take ``-1d`` for a flag, and its message
    would say nothing of durations."""
    out = list(argv)
    for i, arg in enumerate(out[:-1]):
        if arg == "--older-than":
            out[i:i + 2] = [f"--older-than={out[i + 1]}"]
            break
    return out


def main(argv: Sequence[str]) -> int:
    parser = build_parser()
    args = parser.parse_args(_joined(argv))
    try:
        older_than_s = retention.parse_age(args.older_than)
    except ValueError as err:
        parser.error(f"--older-than: {err}")
    try:
        kinds = retention.kinds_to_delete(k.strip() for k in args.keep_kinds.split(",") if k.strip())
    except ValueError as err:
        parser.error(f"--keep-kinds: {err}")
    try:
        settings = Settings(**database_settings(args.db))
    except ValueError as err:
        parser.error(str(err))
    if settings.db_url is None and not settings.db_path.is_file():  # pruning never creates a database
        sys.stderr.write(f"nissa-server prune: error: --db: no database at {settings.db_path}\n")
        return 2
    logging.basicConfig(level=args.log_level.upper(), stream=sys.stderr,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    try:
        results = asyncio.run(_prune(settings.database, older_than_s, kinds))
    except UnusableDatabase as err:
        sys.stderr.write(f"nissa-server prune: error: --db: {err}\n")
        return 2
    for r in results:
        if r.skipped:
            _say(f"skipped {r.run_id}: live")
        else:
            _say(f"thinned {r.run_id} ({r.status}): {r.events} metric events deleted, {r.stored_bytes} bytes")
    thinned = [r for r in results if not r.skipped]
    _say(f"pruned {len(thinned)} runs last seen over {args.older_than} ago: {sum(r.events for r in thinned)} "
         f"events, {sum(r.stored_bytes for r in thinned)} bytes deleted; {len(results) - len(thinned)} live runs "
         f"skipped; kinds deleted: {','.join(kinds) or 'none'}")
    return 0
