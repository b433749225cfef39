"""CSV files as runs: a header row, then a row per step (a W&B or TensorBoard "download CSV" export, a
spreadsheet, a pandas ``to_csv``).

Columns: ``step`` (or ``Step``, ``_step``, ``global_step``: the x of the row; default its row number from 0);
a wall time in ``wall_time``, ``Wall time``, ``timestamp`` or ``_timestamp`` (unix seconds; default the
file's modification time, the same for every row); ``run`` (or ``run_id``, ``run_name``, ``name``) splits the
rows into one run per value (default: one run, named after the file). Every other column is a metric,
its cells numbers (empty cells and text are left out).
"""

from __future__ import annotations

import csv
import math
import pathlib
from collections.abc import Iterator

from nissa.importer.runs import ImportedRun
from nissa.integrations.names import metric_name

STEP_COLUMNS = ("step", "Step", "_step", "global_step")
TIME_COLUMNS = ("wall_time", "Wall time", "timestamp", "_timestamp")
RUN_COLUMNS = ("run", "run_id", "run_name", "name")


def _first(header: list[str], names: tuple[str, ...]) -> str | None:
    return next((n for n in names if n in header), None)


def _number(text: str | None) -> float | None:
    if text is None or not text.strip():
        return None
    try:
        value = float(text)
    except ValueError:
        return None
    return value


def read_runs(path: pathlib.Path, project: str | None = None, name: str | None = None) -> Iterator[ImportedRun]:
    """The runs of one CSV file, in the order their first rows come."""
    path = path.resolve()
    with open(path, newline="", encoding="utf-8-sig") as f:
        reader = csv.DictReader(f)
        header = list(reader.fieldnames or [])
        if not header:
            raise ValueError(f"{path}: no header row")
        step_col, time_col, run_col = (_first(header, STEP_COLUMNS), _first(header, TIME_COLUMNS),
                                       _first(header, RUN_COLUMNS))
        metrics = [c for c in header if c not in (step_col, time_col, run_col)]
        if not metrics:
            raise ValueError(f"{path}: no metric columns (only {header})")
        default_ts = path.stat().st_mtime
        runs: dict[str, ImportedRun] = {}
        for row_number, row in enumerate(reader):
            key = (row.get(run_col) or "").strip() if run_col else ""
            run = runs.get(key)
            if run is None:
                label = key or name or path.stem
                run = runs[key] = ImportedRun(source=f"csv:{path}#{key}", name=label, project=project,
                                              config={"imported_from": str(path)})
            step = _number(row.get(step_col)) if step_col else None
            ts = _number(row.get(time_col)) if time_col else None
            values = {metric_name(c): v for c in metrics if (v := _number(row.get(c))) is not None}
            run.scalars(values, int(step) if step is not None and math.isfinite(step) and step >= 0 else row_number,
                        ts if ts is not None and math.isfinite(ts) else default_ts)
    yield from runs.values()
