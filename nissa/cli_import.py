"""``nissa import``: TensorBoard event directories and CSV files as runs on a nissa-server.

    nissa import tensorboard runs/ --server http://127.0.0.1:8765 --project cifar
    nissa import csv export.csv --server http://127.0.0.1:8765

One run per event directory (or per CSV file, or per value of its ``run`` column), written as a run log under
``--log-dir`` and uploaded like a run logged without a server (``nissa.upload``). Run ids and sequence numbers
follow from the source, so importing the same source again changes nothing on the server. ``add_import``
registers the subcommand on the ``nissa`` command's parser.
"""

from __future__ import annotations

import argparse
import pathlib
import sys
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any

from leyline.text import visible
from nissa import env

if TYPE_CHECKING:  # the importers (and torch, through nissa.run) load when an import runs, not with the parser
    from nissa.hub.upload import UploadResult
    from nissa.importer.runs import ImportedRun


def add_import(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> argparse.ArgumentParser:
    """Add ``import`` (``tensorboard``, ``csv``) to a parser's subcommands."""
    p = sub.add_parser("import", help="import TensorBoard event files or a CSV file as runs",
                       description="Import TensorBoard event directories or CSV files into runs on a nissa-server "
                                   "(idempotent: the same source again changes nothing).")
    kinds = p.add_subparsers(dest="source_kind", required=True, metavar="SOURCE")
    tb = kinds.add_parser("tensorboard", help="every event directory under LOGDIR, a run each",
                          description="Every directory under LOGDIR that holds TensorBoard event files becomes a "
                                      "run: scalars, histograms, hparams (config), text.")
    tb.add_argument("logdir", type=pathlib.Path, metavar="LOGDIR", help="a TensorBoard log directory")
    c = kinds.add_parser("csv", help="a CSV file, a row per step",
                         description="A CSV file with a header: a step column (step, Step, _step, global_step), "
                                     "optionally a wall time and a run column; every other column a metric.")
    c.add_argument("file", type=pathlib.Path, metavar="FILE", help="the CSV file")
    c.add_argument("--name", default=None, help="the run's name (default: the file's name without .csv)")
    for q in (tb, c):
        q.add_argument("--server", default=env.server(),
                       help="nissa-server URL (default $NISSA_SERVER; none: write the run logs only)")
        q.add_argument("--token", default=env.token(), help="bearer token (default $NISSA_TOKEN)")
        q.add_argument("--project", default=None, help="the project the runs belong to (default: none)")
        q.add_argument("--log-dir", type=pathlib.Path, default=pathlib.Path("nissa-runs"),
                       help="where the imported runs' logs and stream secrets are kept; import again from the same "
                            "one (default nissa-runs)")
        q.add_argument("--timeout", type=float, default=120.0, metavar="SECONDS",
                       help="give up uploading one run after this long (default 120)")
        q.set_defaults(func=run_import)
    return p


def _bar(total: int | None, what: str) -> Any:
    """A progress bar on stderr where it is a terminal; None elsewhere (a line per run is the progress there)."""
    if not sys.stderr.isatty():
        return None
    from tqdm import tqdm

    return tqdm(total=total, desc=what, unit="run", file=sys.stderr, leave=False, dynamic_ncols=True,
                mininterval=0, miniters=1)  # a run is slow to import: each one redraws the bar


def _walk(dirs: list[pathlib.Path]) -> Iterator[pathlib.Path]:
    """The event directories, with a bar while they are read (on a terminal)."""
    bar = _bar(len(dirs), "reading")
    for directory in dirs:
        yield directory
        if bar is not None:
            bar.update(1)
    if bar is not None:
        bar.close()


def run_import(args: argparse.Namespace) -> int:
    """Read the source, write each run's log, upload it: a line per run on stderr, and on a terminal a progress
    bar under them while directories are read and runs uploaded."""
    from nissa.hub.rest import ServerUnavailable
    from nissa.importer import import_runs
    from nissa.importer.runs import SourceChanged

    prog = f"nissa import {args.source_kind}"
    try:
        if args.source_kind == "tensorboard":
            from nissa.importer.tensorboard import read_runs as read_tb

            runs = list(read_tb(args.logdir, args.project, walk=_walk))
        else:
            from nissa.importer.csv_file import read_runs as read_csv

            runs = list(read_csv(args.file, args.project, args.name))
    except (OSError, ValueError) as err:
        _say(f"{prog}: {err}")
        return 2
    read, runs = runs, [run for run in runs if run.points]  # a run of skipped values only is no run
    if not runs:
        _say(f"{prog}: no event files under {args.logdir}" if not read else f"{prog}: nothing to import: "
             + summary(read, 0).split("; ", 1)[-1])
        return 1

    bar = _bar(len(runs), "uploading" if args.server else "writing")

    def progress(run: ImportedRun, i: int, results: list[UploadResult] | None) -> None:
        held = "" if results is None else (
            f", server holds {results[0].stored}/{results[0].events}" + ("" if results[0].complete else " INCOMPLETE"))
        n, name = len(run.points), visible(run.name, one_line=True)
        line = f"[{i}/{len(runs)}] {name} -> {run.run_id}: {n} point{'' if n == 1 else 's'}{held}"
        if bar is None:
            _say(line)
        else:
            bar.write(line, file=sys.stderr)  # above the bar, which stays the last line
            bar.update(1)

    try:
        done = import_runs(runs, args.log_dir, args.server or None, args.token, args.timeout, on_run=progress)
    except SourceChanged as err:
        _say(f"{prog}: {err}")
        return 1
    except ServerUnavailable as err:
        _say(f"{prog}: --server {args.server}: no nissa-server answers: {err}")
        return 1
    except OSError as err:
        _say(f"{prog}: --log-dir {args.log_dir}: {err}")
        return 2
    finally:
        if bar is not None:
            bar.close()
    _say(summary(read, len(done)))
    return 0 if all(r is None or all(x.complete for x in r) for _, r in done) else 1


def summary(runs: list[ImportedRun], imported: int) -> str:
    """``imported 4 runs, 18,402 values; skipped 3: histogram edges not finite ×2 (first: exp_a weights at step
    10), …``: what an import took and what it left out, each reason with where it was met first."""
    values = sum(run.values for run in runs if run.points)
    line = f"imported {imported} run{'' if imported == 1 else 's'}, {values:,} value{'' if values == 1 else 's'}"
    skipped: dict[str, tuple[int, str]] = {}
    for run in runs:
        for why, n in run.skipped.items():
            count, first = skipped.get(why, (0, visible(f"{run.name} {run.first_skipped[why]}", one_line=True)))
            skipped[why] = (count + n, first)
    if skipped:
        total = sum(n for n, _ in skipped.values())
        line += f"; skipped {total:,}: " + "; ".join(f"{why} ×{n:,} (first: {first})"
                                                     for why, (n, first) in sorted(skipped.items()))
    return line


def _say(text: str) -> None:
    """A line on stderr, its control characters visible (a name read from the source is text, never a sequence)."""
    sys.stderr.write(visible(text) + "\n")
    sys.stderr.flush()


def main(argv: Sequence[str] | None = None) -> int:
    """``nissa import …`` (the ``nissa`` command's parser, with this and its other subcommands)."""
    from nissa.cli import main as nissa_main

    return nissa_main(argv)


if __name__ == "__main__":
    raise SystemExit(main())
