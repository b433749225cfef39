"""What the charts hold: series tracks per run, their markers, and how live points join a history.

Pure logic, no widgets: the chart screen feeds it a run's downsampled history (``GET
/runs/{id}/series/{name}``) and the points ``leyline.series.points_of`` finds in each event the watch
stream brings. A live point that arrived before its history is kept back until the history is in,
then kept only if it lies past the history's last x (the seam between the two reads); every point
after that is appended as it comes, so each point shows once and in the order it happened.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

import numpy as np
from tsdownsample import MinMaxLTTBDownsampler

from leyline import Event, RunStarted
from leyline.run_keys import shown_point
from leyline.series import Marker, SeriesPoint, marker_of, points_of, x_of

_DOWNSAMPLER = MinMaxLTTBDownsampler()


@dataclass
class Track:
    """One series of one run on the current x axis."""

    run_id: str
    key: str
    name: str
    labels: dict[str, str]
    x: list[float] = field(default_factory=list)
    y: list[float] = field(default_factory=list)

    @property
    def label_text(self) -> str:
        """The labels that tell this track from its siblings (its run shows a rank only where it has several),
        else its full series name (``val.loss``, never ``loss``: that would be another series)."""
        return ",".join(f"{k}={v}" for k, v in sorted(self.labels.items())) or self.name

    def last(self) -> float | None:
        for value in reversed(self.y):
            if math.isfinite(value):
                return value
        return None


class SeriesSet:
    """Tracks of the names wanted, for one or several runs, on one x axis."""

    def __init__(self, axis: str = "step") -> None:
        self.axis = axis
        self.tracks: dict[tuple[str, str], Track] = {}
        self.markers: dict[str, list[Marker]] = {}
        self.wanted: set[str] = set()
        self.names_seen: set[str] = set()
        self.runs_expected: set[str] = set()
        self.listed: set[str] = set()
        """The runs drawn, and those whose series names are known: until then a chart is loading."""
        self._loaded: set[tuple[str, str]] = set()  # (run, name) whose history is in
        self._pending: dict[tuple[str, str], list[SeriesPoint]] = {}
        self._markers_loaded: set[str] = set()
        self._pending_markers: dict[str, list[Marker]] = {}
        self.version = 0  # bumped on every change: panels redraw only when it moved
        self.accept: Callable[[str], bool] = lambda name: False
        """Whether a name first seen in a live point is one a chart shows (then it is wanted)."""
        self.world_sizes: dict[str, int] = {}
        """Each run's ranks (its summary's, or its ``run_started``): the keys of its live points are shown as the
        server shows its history's (``leyline.run_keys``), the rank only in a run of several."""

    def reset(self, axis: str) -> None:
        """Start over on another x axis (histories are fetched again for it)."""
        kept = self.wanted, self.names_seen, self.accept, self.runs_expected, self.listed, self.world_sizes
        SeriesSet.__init__(self, axis)
        self.wanted, self.names_seen, self.accept, self.runs_expected, self.listed, self.world_sizes = kept

    def know_world(self, run_id: str, world_size: int) -> None:
        self.world_sizes[run_id] = max(self.world_sizes.get(run_id, 1), world_size)

    def tracks_of(self, name: str, run_id: str | None = None) -> list[Track]:
        return [t for (run, _), t in sorted(self.tracks.items())
                if t.name == name and (run_id is None or run == run_id)]

    def _track(self, run_id: str, key: str, name: str, labels: dict[str, str]) -> Track:
        track = self.tracks.get((run_id, key))
        if track is None:
            track = self.tracks[(run_id, key)] = Track(run_id, key, name, dict(labels))
        return track

    # --- history ---------------------------------------------------------------------------------

    def load_history(self, run_id: str, name: str, series: Iterable[dict]) -> None:
        """``series`` items as the series API gives them: ``key``, ``labels``, ``x``, ``y``. A second
        history of a name already loaded is ignored: the live points since the first are in its tracks."""
        if (run_id, name) in self._loaded:
            return
        last_x: dict[str, float] = {}
        for item in series:
            track = self._track(run_id, item["key"], name, item.get("labels") or {})
            xs = [float(v) for v in item["x"]]
            track.x, track.y = xs, [math.nan if v is None else float(v) for v in item["y"]]
            if xs:
                last_x[item["key"]] = xs[-1]
        self._loaded.add((run_id, name))
        self.names_seen.add(name)
        for point in self._pending.pop((run_id, name), []):
            x = x_of(point, self.axis)
            if x is not None and x > last_x.get(point.key, -math.inf):
                self._append(run_id, point, x)
        self.version += 1

    def load_markers(self, run_id: str, markers: Iterable[Marker]) -> None:
        known = list(markers)
        seen = {(m.kind, m.label, m.step, m.ts) for m in known}
        pending = [m for m in self._pending_markers.pop(run_id, []) if (m.kind, m.label, m.step, m.ts) not in seen]
        self.markers[run_id] = known + pending
        self._markers_loaded.add(run_id)
        self.version += 1

    # --- live ------------------------------------------------------------------------------------

    def _append(self, run_id: str, point: SeriesPoint, x: float) -> None:
        track = self._track(run_id, point.key, point.name, point.labels)
        track.x.append(x)
        track.y.append(point.value)

    def add_points(self, run_id: str, points: Iterable[SeriesPoint]) -> None:
        """Points as ``points_of`` finds them (stored keys), shown under the run's keys."""
        changed = False
        world = self.world_sizes.get(run_id, 1)
        for stored in points:
            point = shown_point(stored, world)
            if point.name not in self.names_seen:
                self.names_seen.add(point.name)
                if self.accept(point.name):
                    self.wanted.add(point.name)  # a chart's series the run had not produced before
            if point.name not in self.wanted:
                continue
            if (run_id, point.name) not in self._loaded:
                self._pending.setdefault((run_id, point.name), []).append(point)
                continue
            x = x_of(point, self.axis)
            if x is not None:
                self._append(run_id, point, x)
                changed = True
        if changed:
            self.version += 1

    def add_marker(self, run_id: str, marker: Marker) -> None:
        if run_id in self._markers_loaded:
            self.markers.setdefault(run_id, []).append(marker)
            self.version += 1
        else:
            self._pending_markers.setdefault(run_id, []).append(marker)

    def add_events(self, run_id: str, events: Iterable[Event]) -> None:
        """The watch stream's events: their points and markers, through the same definition as the server."""
        for event in events:
            if isinstance(event.payload, RunStarted):
                self.know_world(run_id, event.payload.world_size)
            self.add_points(run_id, points_of(event))
            marker = marker_of(event)
            if marker is not None:
                self.add_marker(run_id, marker)

    def run_of(self, marker: Marker) -> str:
        return next((run for run, markers in self.markers.items() if marker in markers), "")

    def has_history(self, run_id: str, name: str) -> bool:
        return (run_id, name) in self._loaded

    def needs_history(self, run_id: str) -> list[str]:
        return sorted(n for n in self.wanted if (run_id, n) not in self._loaded)


class LocalSeries:
    """A whole run computed here from its events (a local run log): every series, any x axis."""

    def __init__(self, run_id: str, events: Iterable[Event]) -> None:
        self.run_id = run_id
        self.points: dict[str, list[SeriesPoint]] = {}
        self.markers: list[Marker] = []
        self.config: dict[str, object] | None = None
        """The run's config (its ``run_started``), None until it is read."""
        self.world_size = 1
        self.add(events)

    def add(self, events: Iterable[Event]) -> None:
        for event in events:
            started: object = event.payload
            if isinstance(started, RunStarted):
                self.world_size = max(self.world_size, started.world_size)
                if event.rank == 0:
                    self.config = dict(started.config)
            for point in points_of(event):
                self.points.setdefault(point.key, []).append(point)
            marker = marker_of(event)
            if marker is not None:
                self.markers.append(marker)

    def names(self) -> set[str]:
        return {points[0].name for points in self.points.values()}

    def fill(self, target: SeriesSet) -> None:
        """Load every wanted series into ``target`` on its axis, as a server's history would be."""
        by_name: dict[str, list[dict]] = {}
        target.know_world(self.run_id, self.world_size)
        for points in self.points.values():
            name = points[0].name
            target.names_seen.add(name)
            if name not in target.wanted:
                continue
            pairs = [(x, p.value) for p in points if (x := x_of(p, target.axis)) is not None]
            shown = shown_point(points[0], self.world_size)
            by_name.setdefault(name, []).append({"key": shown.key, "labels": shown.labels,
                                                 "x": [x for x, _ in pairs], "y": [y for _, y in pairs]})
        for name in target.wanted:
            target.load_history(self.run_id, name, by_name.get(name, []))
        target.load_markers(self.run_id, self.markers)


# --- what a chart draws ------------------------------------------------------------------------------


def smooth(y: np.ndarray, weight: float) -> np.ndarray:
    """TensorBoard's debiased exponential moving average; non-finite values are skipped, not spread."""
    if weight <= 0 or len(y) == 0:
        return y
    out = np.empty_like(y)
    last, count = 0.0, 0
    for i, v in enumerate(y):
        if math.isfinite(v):
            last = last * weight + (1 - weight) * v
            count += 1
            out[i] = last / (1 - weight ** count)
        else:
            out[i] = v
    return out


def running_best(y: np.ndarray, higher_is_better: bool) -> np.ndarray:
    clean = np.where(np.isfinite(y), y, -np.inf if higher_is_better else np.inf)
    return np.maximum.accumulate(clean) if higher_is_better else np.minimum.accumulate(clean)


def best_point(x: np.ndarray, y: np.ndarray, higher_is_better: bool) -> tuple[float, float] | None:
    finite = np.isfinite(y)
    if not finite.any():
        return None
    idx = np.flatnonzero(finite)
    i = idx[np.argmax(y[idx])] if higher_is_better else idx[np.argmin(y[idx])]
    return float(x[i]), float(y[i])


def window(x: np.ndarray, y: np.ndarray, lo: float | None, hi: float | None,
           max_points: int) -> tuple[np.ndarray, np.ndarray]:
    """The finite points within [lo, hi] (with one neighbour each side, so lines reach the edges),
    downsampled keeping extremes to at most ``max_points``."""
    keep = np.isfinite(y) & np.isfinite(x)
    x, y = x[keep], y[keep]
    if lo is not None and hi is not None and len(x):
        inside = (x >= lo) & (x <= hi)
        near = inside.copy()
        near[1:] |= inside[:-1]
        near[:-1] |= inside[1:]
        x, y = x[near], y[near]
    if len(x) > max_points >= 4:
        idx = _DOWNSAMPLER.downsample(y, n_out=max_points - max_points % 2)
        x, y = x[idx], y[idx]
    return x, y
