"""TensorBoard event directories as runs, read record by record (``event_file``) into the ``tensorboard``
package's own protos, migrated as its own loader migrates them.

Every directory that holds event files (``events.out.tfevents.*``) is one run, named by its path under the
log directory (``exp1``, ``exp1/1700000000.5`` for the hparams ``torch``'s ``add_hparams`` writes beside it).
The walk follows a symbolic link only where it resolves inside the log directory, and reads each directory
once (``a/up -> ..`` is no second copy of every run). Scalars are ``metrics`` at their step and wall time; a
histogram a ``histogram`` event (its buckets split across 64 bins of equal width, as ``nissa.Histogram`` sends
them); hparams are the run's config; text is a ``text`` event. A value that is not what its plugin says, or
at a step or wall time no run log holds, is skipped and counted (``ImportedRun.skipped``), as is an event file
from its first corrupt record on (the records before it are read); other plugins' data
(images, audio, graphs) is left out, counted in the log.
"""

from __future__ import annotations

import logging
import pathlib
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from leyline import Histograms, TextLogged
from leyline.metrics import MAX_TEXT_CHARS
from leyline.text import scrub
from nissa.importer.event_file import Corrupt, records
from nissa.importer.runs import ImportedRun
from nissa.importer.tensorboard_values import BadValue, check_legacy_histogram, histogram, hparams, ndarray, scalar
from nissa.integrations.names import metric_name

logger = logging.getLogger(__name__)


def event_dirs(logdir: pathlib.Path) -> list[pathlib.Path]:
    """The directories under ``logdir`` (itself included) that hold event files, as named under it, sorted: a
    link followed only where it resolves inside ``logdir``, a directory reached twice read once (its first
    name in path order)."""
    if not logdir.is_dir():
        raise FileNotFoundError(f"{logdir}: not a directory")
    root = logdir.resolve()
    seen: set[pathlib.Path] = set()
    found: list[pathlib.Path] = []
    pending = [logdir]
    while pending:
        directory = pending.pop()
        real = directory.resolve()
        if real in seen or not _inside(real, root):
            continue
        seen.add(real)
        entries = sorted(directory.iterdir())
        if any(_event_file(e, root) for e in entries):
            found.append(directory)
        pending.extend(reversed([e for e in entries if e.is_dir()]))  # depth first, in path order
    return sorted(found)


def _inside(path: pathlib.Path, root: pathlib.Path) -> bool:
    return path == root or root in path.parents


def _event_file(path: pathlib.Path, root: pathlib.Path) -> bool:
    """Whether ``path`` is an event file inside ``root`` (a link to one elsewhere is not)."""
    from tensorboard.backend.event_processing import io_wrapper

    return io_wrapper.IsSummaryEventsFile(str(path)) and path.is_file() and _inside(path.resolve(), root)


def read_runs(logdir: pathlib.Path, project: str | None = None,
              walk: Callable[[list[pathlib.Path]], Iterable[pathlib.Path]] = iter) -> Iterator[ImportedRun]:
    """One run per event directory under ``logdir``, in path order; a directory with nothing to import (the
    empty event file a writer leaves where it only made another directory) is no run. ``walk`` goes over the
    directories (a progress bar)."""
    root = logdir.resolve()
    held: tuple[pathlib.Path, ImportedRun] | None = None  # the last run: its add_hparams directories follow it
    for directory in walk(event_dirs(logdir)):
        rel = directory.relative_to(logdir)
        name = str(rel) if str(rel) != "." else root.name
        run = read_run(directory, name, project, root)
        if held is not None and held[0] in directory.parents and _hparams_of(run):
            _fold_hparams(held[1], run)  # torch's add_hparams writes into a directory of its own, under the run's
            continue
        if run.points or run.skipped:
            if held is not None:
                yield held[1]
            held = (directory, run)
    if held is not None:
        yield held[1]


def _hparams_of(run: ImportedRun) -> dict[str, object]:
    return {k: v for k, v in run.config.items() if k != "imported_from"}


def _fold_hparams(into: ImportedRun, child: ImportedRun) -> None:
    """A run's hyperparameters on the run itself (filterable as ``config.lr``), with the values logged beside
    them (``add_hparams``' metrics), not a run of their own."""
    into.config.update(_hparams_of(child))
    into.points.extend(child.points)
    into.values += child.values
    into.skipped.update(child.skipped)
    for why, where in child.first_skipped.items():
        into.first_skipped.setdefault(why, where)


def read_run(directory: pathlib.Path, name: str, project: str | None = None,
             root: pathlib.Path | None = None) -> ImportedRun:
    """The run of one event directory: its files in name order (TensorBoard names them by their start time);
    only those inside ``root`` (default: the directory)."""
    run = ImportedRun(source=f"tensorboard:{directory.resolve()}", name=name, project=project)
    plugins: dict[str, str] = {}
    first_metadata: dict[str, Any] = {}  # TensorBoard's migration keeps a tag's first metadata per run
    left_out: Counter[str] = Counter()
    for path in sorted(directory.iterdir()):
        if not _event_file(path, root or directory.resolve()):
            continue
        for event in _events(run, path, first_metadata):
            for value in event.summary.value:
                plugin = value.metadata.plugin_data.plugin_name or plugins.get(value.tag, "")
                plugins.setdefault(value.tag, plugin)  # TensorBoard writes a tag's metadata with its first value only
                where = f"{metric_name(value.tag)} at step {event.step}"
                try:
                    taken = _import_value(run, value, plugin, int(event.step), float(event.wall_time), where)
                except BadValue as err:
                    _skip(run, err, where)
                    continue
                if not taken:
                    left_out[plugin or value.WhichOneof("value") or "?"] += 1
    if left_out:
        logger.info("%s: left out %s", directory, dict(left_out))
    run.config.setdefault("imported_from", str(directory.resolve()))
    return run


def _events(run: ImportedRun, path: pathlib.Path, first_metadata: dict[str, Any]) -> Iterator[Any]:
    """``path``'s events, migrated as TensorBoard's own loader migrates them (``data_compat``,
    ``dataclass_compat``), each legacy histogram checked before (the migration pads or drops its buckets). A
    legacy histogram malformed, a record that is no event, or the file from a corrupt record on (a file cut off,
    or garbage) is counted in ``run`` as skipped."""
    from google.protobuf.message import DecodeError  # type: ignore[import-untyped]  # protobuf ships no stubs
    from tensorboard import data_compat, dataclass_compat
    from tensorboard.compat.proto import event_pb2

    file = scrub(path.name)  # a name read from the source is text, as a run's name is
    try:
        for offset, record in records(path):
            try:
                event = event_pb2.Event.FromString(record)
            except DecodeError:
                run.skip("event record that does not parse", f"{file} at byte {offset}")
                continue
            for i in reversed(range(len(event.summary.value))):
                value = event.summary.value[i]
                try:
                    if value.HasField("histo"):
                        check_legacy_histogram(value.histo)
                except BadValue as err:
                    _skip(run, err, f"{metric_name(value.tag)} at step {event.step}")
                    del event.summary.value[i]
            yield from dataclass_compat.migrate_event(data_compat.migrate_event(event), first_metadata)
    except Corrupt as err:
        run.skip("event file corrupt", f"{file}: {err}")
    except OSError as err:
        run.skip("event file unreadable", f"{file}: {err.strerror}")


def _skip(run: ImportedRun, err: BadValue, where: str) -> None:
    run.skip(str(err), f"{where}: {err.detail}" if err.detail else where)


def _import_value(run: ImportedRun, value: Any, plugin: str, step: int, ts: float, where: str) -> bool:
    """Add one summary value to ``run`` (or count it skipped); False where it is of a kind not imported;
    ``BadValue`` where it is not what its plugin says."""
    if value.HasField("simple_value"):  # files older than the reader's own migration to tensors
        run.scalars({metric_name(value.tag): float(value.simple_value)}, step, ts)
        return True
    if not value.HasField("tensor"):
        return False
    if plugin == "scalars":
        run.scalars({metric_name(value.tag): scalar(value.tensor)}, step, ts)
    elif plugin == "histograms":
        run.take(Histograms(histograms=[histogram(metric_name(value.tag), value.tensor)]), step, ts, where)
    elif plugin == "text":
        text = ndarray(value.tensor, "text").reshape(-1)
        tag = metric_name(value.tag.removesuffix("/text_summary"))
        joined = "\n".join(t.decode(errors="replace") if isinstance(t, bytes) else str(t) for t in text)
        run.take(TextLogged(tag=tag, text=joined[:MAX_TEXT_CHARS]), step, ts, where)
    elif plugin == "hparams":
        run.config.update(hparams(value.metadata.plugin_data.content))
    else:
        return False
    return True
