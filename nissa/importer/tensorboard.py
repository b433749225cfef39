"""TensorBoard event directories as runs, read with the ``tensorboard`` package's own reader.

Every directory that holds event files (``events.out.tfevents.*``) is one run, named by its path under the
log directory (``exp1``, ``exp1/1700000000.5`` for the hparams ``torch``'s ``add_hparams`` writes beside it).
Scalars are ``metrics`` at their step and wall time; a histogram a ``histogram`` event (its buckets in 64 bins
of equal width, as ``nissa.Histogram`` sends them); hparams
are the run's config; text is a ``text`` event. Other plugins' data (images, audio, graphs) is left out,
counted in the run's ``skipped``.
"""

from __future__ import annotations

import logging
import pathlib
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from leyline import Distribution, Histograms, TextLogged
from leyline.metrics import MAX_TEXT_CHARS
from leyline.payloads_histogram import DEFAULT_BINS
from nissa.importer.runs import ImportedRun
from nissa.integrations.names import metric_name

logger = logging.getLogger(__name__)


def event_dirs(logdir: pathlib.Path) -> list[pathlib.Path]:
    """The directories under ``logdir`` (itself included) that hold event files, sorted."""
    from tensorboard.backend.event_processing import io_wrapper

    if not logdir.is_dir():
        raise FileNotFoundError(f"{logdir}: not a directory")
    return sorted(pathlib.Path(d) for d in io_wrapper.GetLogdirSubdirectories(str(logdir)))


def read_runs(logdir: pathlib.Path, project: str | None = None,
              walk: Callable[[list[pathlib.Path]], Iterable[pathlib.Path]] = iter) -> Iterator[ImportedRun]:
    """One run per event directory under ``logdir``, in path order; a directory with nothing to import (the
    empty event file a writer leaves where it only made another directory) is no run. ``walk`` goes over the
    directories (a progress bar)."""
    logdir = logdir.resolve()
    for directory in walk(event_dirs(logdir)):
        rel = directory.relative_to(logdir)
        name = str(rel) if str(rel) != "." else logdir.name
        run = read_run(directory, name, project)
        if run.points:
            yield run


def read_run(directory: pathlib.Path, name: str, project: str | None = None) -> ImportedRun:
    """The run of one event directory: its files in name order (TensorBoard names them by their start time)."""
    from tensorboard.backend.event_processing import event_file_loader, io_wrapper

    run = ImportedRun(source=f"tensorboard:{directory.resolve()}", name=name, project=project)
    plugins: dict[str, str] = {}
    skipped: Counter[str] = Counter()
    for path in sorted(directory.iterdir()):
        if not io_wrapper.IsSummaryEventsFile(str(path)):
            continue
        for event in event_file_loader.EventFileLoader(str(path)).Load():
            for value in event.summary.value:
                plugin = value.metadata.plugin_data.plugin_name or plugins.get(value.tag, "")
                plugins.setdefault(value.tag, plugin)  # TensorBoard writes a tag's metadata with its first value only
                if not _import_value(run, value, plugin, int(event.step), float(event.wall_time)):
                    skipped[plugin or value.WhichOneof("value") or "?"] += 1
    if skipped:
        logger.info("%s: left out %s", directory, dict(skipped))
    run.config.setdefault("imported_from", str(directory.resolve()))
    return run


def _import_value(run: ImportedRun, value: Any, plugin: str, step: int, ts: float) -> bool:
    """Add one summary value to ``run``; False where it is of a kind not imported."""
    from tensorboard.util import tensor_util

    if value.HasField("simple_value"):  # files older than the reader's own migration to tensors
        run.scalars({metric_name(value.tag): float(value.simple_value)}, step, ts)
        return True
    if not value.HasField("tensor"):
        return False
    if plugin == "scalars":
        run.scalars({metric_name(value.tag): float(tensor_util.make_ndarray(value.tensor).item())}, step, ts)
    elif plugin == "histograms":
        run.points.append((Histograms(histograms=[_distribution(metric_name(value.tag),
                                                                tensor_util.make_ndarray(value.tensor))]), step, ts))
    elif plugin == "text":
        text = tensor_util.make_ndarray(value.tensor).reshape(-1)
        tag = metric_name(value.tag.removesuffix("/text_summary"))
        joined = "\n".join(t.decode(errors="replace") if isinstance(t, bytes) else str(t) for t in text)
        run.points.append((TextLogged(tag=tag, text=joined[:MAX_TEXT_CHARS]), step, ts))
    elif plugin == "hparams":
        run.config.update(_hparams(value.metadata.plugin_data.content))
    else:
        return False
    return True


def _distribution(name: str, buckets: Any, bins: int = DEFAULT_BINS) -> Distribution:
    """TensorBoard's ``[left, right, count]`` buckets (of any widths) as ``bins`` bins of equal width from the
    first filled bucket's left edge to the last one's right edge, each bucket's count in the bin of its centre."""
    counts = [float(c) for c in buckets[:, 2]] if buckets.size else []
    filled = [i for i, n in enumerate(counts) if n]
    if not filled:
        return Distribution(name=name, min=None, max=None, count=0, bins=[0] * bins)
    lo, hi = float(buckets[filled[0], 0]), float(buckets[filled[-1], 1])
    width = (hi - lo) / bins or 1.0
    out = [0] * bins
    for i in filled:
        centre = (float(buckets[i, 0]) + float(buckets[i, 1])) / 2
        out[min(bins - 1, max(0, int((centre - lo) / width)))] += round(counts[i])
    return Distribution(name=name, min=lo, max=hi, count=sum(out), bins=out)


def _hparams(content: bytes) -> dict[str, object]:
    """The hyperparameters of a session's start (``add_hparams``); nothing from the other hparams records."""
    from tensorboard.plugins.hparams import plugin_data_pb2

    data = plugin_data_pb2.HParamsPluginData.FromString(content)
    if data.WhichOneof("data") != "session_start_info":
        return {}
    out: dict[str, object] = {}
    for key, v in data.session_start_info.hparams.items():
        kind = v.WhichOneof("kind")
        out[key] = {"number_value": v.number_value, "string_value": v.string_value,
                    "bool_value": v.bool_value}.get(kind or "", None)
    return out
