"""An imported run: its events built from a source, written as a run log, then uploaded idempotently."""

from __future__ import annotations

import hashlib
import logging
import math
import pathlib
import re
import time
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field

import msgspec

from leyline import AnyPayload, Metrics, RunFinished, RunStarted, make_event, metric_value
from leyline.codec import encode_event
from leyline.events import MAX_TS_AHEAD_S, MIN_TS
from leyline.metrics import MAX_METRICS
from leyline.payloads import is_step
from leyline.text import scrub, scrub_json
from nissa.hub.runlog import RunLog
from nissa.hub.secret import run_secret
from nissa.hub.upload import UploadResult, upload_run
from nissa.metadata import flat_config

logger = logging.getLogger(__name__)

Point = tuple[AnyPayload, int, float]
"""A payload with its step and wall time."""


class SourceChanged(ValueError):
    """The source no longer gives the run log an earlier import wrote (it changed, not only grew)."""


@dataclass
class ImportedRun:
    """A run read from a source: its name, config and points (a payload, step and wall time each)."""

    source: str
    """What it was read from (a directory, a file), for the run id and the messages."""
    name: str
    config: dict[str, object] = field(default_factory=dict)
    points: list[Point] = field(default_factory=list)
    project: str | None = None
    values: int = 0
    """Values taken (a scalar, a histogram, a text each)."""
    skipped: Counter[str] = field(default_factory=Counter)
    """Values left out, by why (``histogram edges not finite``)."""
    first_skipped: dict[str, str] = field(default_factory=dict)
    """Where each reason was met first (``weights at step 10``)."""

    def __post_init__(self) -> None:
        self.name = scrub(self.name)  # as every door takes a text in (leyline.text): it is printed, and sent

    def skip(self, why: str, where: str) -> None:
        """Count a value left out: ``why`` (the same words for every value alike), ``where`` (its tag and step)."""
        self.skipped[why] += 1
        self.first_skipped.setdefault(why, where)

    def take(self, payload: AnyPayload, step: int, ts: float, where: str) -> bool:
        """Add a point if the run log can hold it (a step from 0 to 2⁵³, a wall time a server takes, a payload
        its type takes), else count it as skipped; whether it was added."""
        why = _unfit(step, ts)
        refused = _refused(payload) if why is None else None
        if why is not None or refused is not None:
            self.skip(why or f"{payload.KIND.value} the contract refuses", f"{where}: {refused}" if refused else where)
            return False
        self.points.append((payload, step, ts))
        self.values += 1
        return True

    @property
    def run_id(self) -> str:
        """``<kind>-<name>-<hash of the source>``: the same source, the same run."""
        slug = re.sub(r"[^A-Za-z0-9._-]+", "-", self.name).strip("-.")[:64] or "run"
        digest = hashlib.sha1(self.source.encode()).hexdigest()[:10]
        return f"{slug}-{digest}"

    def scalars(self, values: dict[str, float], step: int, ts: float, labels: dict[str, str] | None = None) -> None:
        """Named values at a step; merged into the previous ``metrics`` point where it is of the same step and
        labels (TensorBoard writes one value an event). At a step or wall time a run log cannot hold: skipped."""
        if not values:
            return
        why = _unfit(step, ts)
        if why is not None:
            for name in values:
                self.skip(why, f"{name} at step {step}")
            return
        self.values += len(values)
        last = self.points[-1] if self.points else None
        if (last is not None and isinstance(last[0], Metrics) and last[1] == step and last[0].labels == (labels or {})
                and not set(values) & set(last[0].values) and len(last[0].values) + len(values) <= MAX_METRICS):
            merged = Metrics(values={**last[0].values, **{k: metric_value(v) for k, v in values.items()}},
                             labels=last[0].labels)
            self.points[-1] = (merged, step, last[2])
            return
        self.points.append((Metrics(values={k: metric_value(v) for k, v in values.items()}, labels=labels or {}),
                            step, ts))

    def events(self) -> Iterator[bytes]:
        """The run log's lines: ``run_started``, every point in the source's order, ``run_finished``."""
        run_id = self.run_id
        first = self.points[0][2] if self.points else 0.0
        last = max((ts for _, _, ts in self.points), default=first)
        started = RunStarted(name=self.name[:200], config=flat_config(self.config), device="",
                             project=self.project or "")
        seq = 1
        # Each line scrubbed as the server stores it (leyline.text.scrub_json): the log holds what is sent.
        yield scrub_json(encode_event(make_event(started, run_id=run_id, seq=seq, ts=first)))
        for payload, step, ts in self.points:
            seq += 1
            yield scrub_json(encode_event(make_event(payload, run_id=run_id, seq=seq, ts=ts, step=step)))
        final_step = max((step for _, step, _ in self.points), default=0)
        yield encode_event(make_event(RunFinished(status="completed", duration_s=max(0.0, last - first)),
                                      run_id=run_id, seq=seq + 1, ts=last, step=final_step))


def _unfit(step: int, ts: float) -> str | None:
    """Why a point at ``step`` and wall time ``ts`` cannot be in a run log a server takes (None: it can)."""
    if not is_step(step):
        return "step negative or past 2^53"
    if not math.isfinite(ts):
        return "wall time not finite"
    if not MIN_TS <= ts <= time.time() + MAX_TS_AHEAD_S:
        return "wall time before 2000 or in the future"
    return None


def _refused(payload: AnyPayload) -> str | None:
    """Why the server would refuse ``payload`` as its type decodes it (None: it would take it)."""
    try:
        msgspec.json.decode(msgspec.json.encode(payload), type=type(payload))
    except msgspec.ValidationError as err:
        return str(err)
    return None


def write_log(run: ImportedRun, log_dir: pathlib.Path) -> pathlib.Path:
    """Write ``run``'s log under ``log_dir`` (what an earlier import wrote is kept; the same lines again are
    nothing to add); returns the run directory. ``SourceChanged`` when the log there says otherwise."""
    run_dir = log_dir / run.run_id
    run_dir.mkdir(parents=True, exist_ok=True)
    run_secret(run_dir)
    path = run_dir / "events.jsonl"
    lines = [line.rstrip(b"\n") for line in run.events()]
    held = path.read_bytes().splitlines() if path.exists() else []
    if held:
        if held != lines:
            raise SourceChanged(f"{run.source}: it gives another run log than the one imported before "
                                f"({path}); import it with another --log-dir to make a new run of it")
        return run_dir
    log = RunLog(path)
    try:
        log.append(lines)
        log.sync()
    finally:
        log.close()
    return run_dir


def import_runs(runs: Iterable[ImportedRun], log_dir: pathlib.Path, server: str | None, token: str | None = None,
                timeout: float = 120.0,
                on_run: Callable[[ImportedRun, int, list[UploadResult] | None], None] | None = None,
                ) -> list[tuple[ImportedRun, list[UploadResult] | None]]:
    """Write each run's log, and upload it to ``server`` (None: logs only); ``on_run`` hears of each as it
    is done (the run, its number from 1, its upload results)."""
    done = []
    for i, run in enumerate(runs, start=1):
        run_dir = write_log(run, log_dir)
        results = upload_run(run_dir, server, token, timeout=timeout) if server else None
        if on_run is not None:
            on_run(run, i, results)
        done.append((run, results))
    return done
