"""``nissa``: a lab's runs from a shell.

    nissa runs --server http://127.0.0.1:8765 -q "group:lr-sweep" --sort val_loss.best
    nissa runs -q "project:cifar val_loss<0.5" --format csv > runs.csv
    nissa import tensorboard runs/ --server http://127.0.0.1:8765 --project cifar

``runs`` lists the runs a query finds (the server's filter language, ``GET /runs?q=``), a row each: id, name,
status, project, group, tags, the config keys whose values differ, and the metrics the runs share (their
best, or the statistic asked for: ``--metric val_loss.min``). ``--format json`` gives the server's own records.
What a run wrote is shown as text, its control characters replaced.

    nissa import tensorboard runs/ --server http://127.0.0.1:8765
    nissa import csv metrics.csv --server http://127.0.0.1:8765

``import`` brings TensorBoard event files and CSV files in as runs (``nissa.cli_import``).
"""

from __future__ import annotations

import argparse
import csv
import json
import logging
import sys
from collections.abc import Sequence

import msgspec

from leyline.charts import PARAM_COLUMNS
from leyline.runs import RunSummary
from leyline.runs_table import MAX_METRIC_COLUMNS, differing_params, metric_of, shared_metrics
from leyline.text import csv_row, visible
from nissa import env

CELL_CHARS = 40


def parser() -> argparse.ArgumentParser:
    from nissa.cli_import import add_import
    from nissa.sweep.cli import add_sweep

    p = argparse.ArgumentParser(prog="nissa", description="A lab's runs on a nissa-server, from a shell.")
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")
    runs = add_runs(sub.add_parser("runs", help="list the runs a query finds", description="List the runs a query "
                                   "finds, sorted, as a table, CSV or JSON."))
    runs.set_defaults(func=_runs)
    add_import(sub)
    add_sweep(sub)
    return p


def runs_parser() -> argparse.ArgumentParser:
    """``nissa runs`` alone (its --help)."""
    return add_runs(argparse.ArgumentParser(prog="nissa runs"))


def add_runs(runs: argparse.ArgumentParser) -> argparse.ArgumentParser:
    runs.add_argument("--server", default=env.server(),
                      help="nissa-server URL, e.g. http://127.0.0.1:8765 (default $NISSA_SERVER)")
    runs.add_argument("--token", default=None, help="bearer token, where reads need one (default $NISSA_TOKEN)")
    runs.add_argument("-q", "--query", default="", help='filter: "project:cifar tag:baseline config.lr>=0.01 '
                      'val_loss<0.5" (see GET /runs; default: every run)')
    runs.add_argument("--project", help="only this project's runs (default: any)")
    runs.add_argument("--group", help="only this group's runs (default: any)")
    runs.add_argument("--sort", default=None, help="e.g. val_loss.best, name, --sort=-config.lr (descending; "
                      "default: newest first)")
    runs.add_argument("--limit", type=int, default=None, help="at most this many runs (default: all)")
    runs.add_argument("--metric", action="append", default=None, metavar="KEY[.STAT]", dest="metrics",
                      help="a metric column (repeat for several; default: the metrics every run has, best)")
    runs.add_argument("--format", choices=("table", "csv", "json"), default="table", help="(default table)")
    return runs


def main(argv: Sequence[str] | None = None) -> int:
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    args = parser().parse_args(argv)
    return args.func(args)


def _runs(args: argparse.Namespace) -> int:
    from nissa.api import Api, ApiError

    if not args.server:
        print("nissa runs: --server is needed (or $NISSA_SERVER)", file=sys.stderr)
        return 2
    if args.limit is not None and args.limit < 1:
        print(f"nissa runs: --limit must be >= 1, got {args.limit}", file=sys.stderr)
        return 2
    try:
        columns = [_column(m) for m in args.metrics or ()]
        with Api(args.server, token=args.token) as api:
            runs = api.runs(args.query, project=args.project, group=args.group, sort=args.sort, limit=args.limit)
    except (ApiError, ValueError) as err:
        print(f"nissa runs: {err}", file=sys.stderr)
        return 1
    if args.format == "json":
        json.dump(msgspec.to_builtins(runs), sys.stdout, indent=1)
        sys.stdout.write("\n")
        return 0
    table = args.format == "table"
    rows = _rows(runs, columns, table)
    if table:
        _table(rows)
    else:
        writer = csv.writer(sys.stdout)
        writer.writerows(csv_row(row) for row in rows)  # a run named =HYPERLINK(…) is no formula
    return 0


def _column(text: str) -> tuple[str, str]:
    """``--metric`` as (series key, statistic)."""
    from leyline.query import QueryError, field_of

    try:
        field = field_of(text)
    except QueryError as err:
        raise ValueError(f"--metric {text!r}: {err.reason}") from None
    if field.kind != "metric":
        raise ValueError(f"--metric {text!r}: not a metric")
    return field.name, field.stat


def _rows(runs: list[RunSummary], metrics: list[tuple[str, str]], table: bool) -> list[list[str]]:
    """The runs as rows of text under a head: the columns every runs table shows by default
    (``leyline.runs_table``), all of them in a CSV, the first few in a table; ``metrics`` (series key, statistic)
    where ``--metric`` names them."""
    from leyline.query import short_key

    config = differing_params(runs, None if not table else PARAM_COLUMNS)
    if not metrics:
        metrics = [(key, "best") for key in shared_metrics(runs, None if not table else MAX_METRIC_COLUMNS)]
    head = ["id", "name", "status", "project", "group", "tags", *(f"config.{k}" for k in config),
            *(f"{short_key(key)}.{stat}" for key, stat in metrics)]
    rows = [[_text(h) for h in head]]  # keys are a run's texts too (a label value stored before ingest scrubbed it)
    for run in runs:
        values = [run.run_id, run.name, run.status, run.project, run.group, ",".join(run.tags)]
        values += [_cell(run.config.get(k)) for k in config]
        summaries = [(metric_of(run, key), stat) for key, stat in metrics]  # ``val_loss``: rank 0's in any run
        values += [_cell(None if summary is None else getattr(summary, stat)) for summary, stat in summaries]
        rows.append([_text(v) for v in values])
    return rows


def _cell(value: object) -> str:
    if value is None:
        return ""
    if isinstance(value, float):
        return f"{value:.6g}"
    return str(value)


def _text(value: str) -> str:
    """A run's text as data: control characters (escape sequences among them) shown as visible stand-ins (``␛``)."""
    return visible(value, one_line=True)


def _table(rows: list[list[str]]) -> None:
    cut = [[v if len(v) <= CELL_CHARS else v[:CELL_CHARS - 1] + "…" for v in row] for row in rows]
    widths = [max(len(row[i]) for row in cut) for i in range(len(cut[0]))]
    for row in cut:
        sys.stdout.write("  ".join(v.ljust(w) for v, w in zip(row, widths, strict=True)).rstrip() + "\n")


if __name__ == "__main__":
    raise SystemExit(main())
