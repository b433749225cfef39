"""Series points of stored events, gathered column-wise (``leyline.series_columns``): from their stored
blocks, or from the payloads ingest decoded (``add_decoded``).

Per event: the envelope and the payload decoded (not validated again), its *layout* found (its kind, run,
rank, env and the labels of the payload and of each struct in it: the seeds of an epoch, the layers of a
layer report …) and one row appended to that layout: the event's x and the tuples of its structs' flat
values. A layout is created once per pass (``Gathered``) and with it the keys of its series, so no key is
formatted and no point is an object. Numbers in dicts and lists of numbers are walked as ``points_of``
walks them. At the end each layout's rows become columns (a ``None`` is no point). Every point carries
the event's place in the pass, so a series that two layouts both feed keeps its points in order.

What a pass keeps between its events is a few flat arrays of numbers, never an object per series or point (a
run that logs a hundred thousand names would be millions of them, and each full collection of the interpreter's
garbage collector walks every one, holding up the whole server): the points found by walking a payload go to
one array per column with their series' index beside them (numpy reads them without a copy), the arrays made of
them are numpy's and tuples of them (neither is tracked by the collector).
"""

from __future__ import annotations

import logging
from array import array
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from leyline.codec import DecodeError
from leyline.series import MAX_POINTS_PER_EVENT, found_in, key_of, own_labels, walk_value
from leyline.series_columns import Envelope, KindPlan, Shape, envelopes, plan_of

logger = logging.getLogger(__name__)
STEP_SERIES = 1000
"""Series ``Gathered.series_steps`` makes arrays of in one step at most."""
NAN = float("nan")
Arrays = Sequence[np.ndarray]
"""step, epoch, round, ts, value (float64; a tuple, with the ordinal first while gathering)."""
_Parts = dict[tuple[int, str], tuple[str, tuple[Arrays, ...]]]


class _Layout:
    """Events of one kind, run, rank and env whose structs have the same labels: a row each."""

    __slots__ = ("run_key", "labels", "columns", "rows")

    def __init__(self, run_key: int, plan: KindPlan, payload: Any, envelope: dict[str, str]) -> None:
        root = plan.root
        self.run_key = run_key
        self.labels = own_labels(payload, envelope)
        self.columns: list[tuple[str, str]] = [(n, key_of(n, self.labels)) for n in root.flat_names]
        """(name, key) of each value of a row (the payload's flat fields, then each struct's in it)."""
        for attr, many, sub in root.structs:
            value = getattr(payload, attr)
            for item in (() if value is None else value if many else (value,)):
                labels = own_labels(item, self.labels, sub.item_of)
                self.columns += [(n, key_of(n, labels)) for n in sub.flat_names]
        self.rows: list[tuple] = []
        """Per event: ordinal, step, epoch, round, ts, then the values of ``columns``."""


class Gathered:
    """The points of the events of one transaction, by (run key, series key)."""

    def __init__(self) -> None:
        self._layouts: dict[tuple, _Layout] = {}
        self._walked: dict[tuple[int, str], int] = {}
        """(run key, series key) → its index in ``_names`` (the series of the points walked)."""
        self._names: list[str] = []
        self._index = array("q")
        """The series index of each point walked."""
        self._points: tuple[array, ...] = tuple(array("d") for _ in range(6))
        """The points walked, a column each: ordinal, step, epoch, round, ts, value (numpy reads them as they are)."""
        self._n = 0
        self.markers: list[tuple] = []
        """(run key, event id, marker) of the events that are a marker."""
        self.declared: list[tuple] = []
        """(run key, event id, rank, step, payload) of the events that say how a run's metrics are summarised."""
        self.result: dict[tuple[int, str], tuple[str, Arrays]] = {}

    @property
    def events(self) -> int:
        return self._n

    def add(self, run_key: int, first_id: int, body: bytes) -> None:
        """The events of a stored block: (run key, first event id, their JSON joined by commas), each decoded
        by its kind's plan (not validated again: they were when they were stored)."""
        decoded = []
        kind = None
        for env in envelopes(b"[" + body + b"]"):
            if env.kind != kind:
                kind = env.kind
                decode = plan_of(kind).decode
            decoded.append((env, decode(env.payload)))
        self.add_decoded(run_key, first_id, decoded)

    def add_decoded(self, run_key: int, first_id: int, events: list[tuple[Any, Any]]) -> None:
        """Events with consecutive ids from ``first_id``, as (envelope, payload) decoded: a stored block's
        (``add``), or ingest's validated ``BatchEvent`` and payload. This loop runs for every stored event:
        locals, and the usual event (a compiled kind, not a marker, no numbers in dicts) handled in it."""
        get = self._layouts.get
        kind = None
        n = self._n
        try:
            for i, (env, payload) in enumerate(events):
                if env.kind != kind:
                    kind = env.kind
                    plan = plan_of(getattr(kind, "_value_", kind))  # an EventKind, or its value as stored
                    rows, usual = plan.rows, plan.usual
                n += 1
                if usual and rows is not None:  # a usual kind has rows
                    labels, values, rnd = rows(payload)
                    layout = get((run_key, env.rank, env.env, plan, labels))
                    if layout is None:
                        layout = self._layout(run_key, env, plan, payload, labels)
                    if len(values) < MAX_POINTS_PER_EVENT:
                        layout.rows.append((n, env.step, env.epoch, rnd if type(rnd) is int else NAN, env.ts, *values))
                        continue
                self._unusual(run_key, first_id + i, n, env, plan, payload)
        finally:  # events that fail halfway keep the ordinals they used
            self._n = n

    def _unusual(self, run_key: int, event_id: int, n: int, env: Envelope, plan: KindPlan, payload: Any) -> None:
        """An event of a kind that has numbers in dicts or lists, or may be a marker, or near the cap."""
        rnd = payload.round if plan.has_round else None
        if type(rnd) is not int:
            rnd = None
        x = (n, env.step, env.epoch, NAN if rnd is None else rnd, env.ts)
        found = None
        if plan.rows is not None:
            labels, values, _ = plan.rows(payload)
            layout = self._layouts.get((run_key, env.rank, env.env, plan, labels))
            if layout is None:
                layout = self._layout(run_key, env, plan, payload, labels)
            found = self._others(plan.root, payload, layout.labels)
            if len(values) + len(found) < MAX_POINTS_PER_EVENT:
                layout.rows.append(x + values)
            else:
                found = None  # near the cap: walked, to drop exactly the points ``points_of`` drops
        if found is None:
            found = found_in(payload, plan.kind, env.rank, env.env)
        self._walk(run_key, x, found)
        if plan.marker is not None:
            marker = plan.marker(payload, env.step, env.epoch, rnd, env.ts, env.env, env.rank)
            if marker is not None:
                self.markers.append((run_key, event_id, marker))
        if plan.declares:
            self.declared.append((run_key, event_id, env.rank, env.step, payload))

    def _layout(self, run_key: int, env: Envelope, plan: KindPlan, payload: Any, labels: tuple) -> _Layout:
        envelope = {"rank": str(env.rank)}
        if env.env is not None:
            envelope["env"] = str(env.env)
        layout = self._layouts[(run_key, env.rank, env.env, plan, labels)] = _Layout(run_key, plan, payload, envelope)
        return layout

    @staticmethod
    def _others(shape: Shape, obj: Any, labels: dict[str, str]) -> list:
        found: list = []
        if not shape.other_names:
            return found
        for (name, attr), value in zip(shape.other_names, shape.others(obj), strict=True):
            if value is not None:
                walk_value(value, name, attr, labels, found)
        return found

    def _walk(self, run_key: int, x: tuple, found: list) -> None:
        walked, names, index = self._walked, self._names, self._index
        ordinal, step, epoch, rnd, ts, values = self._points
        n, s, e, r, t = x
        for name, labels, value in found:
            key = (run_key, key_of(name, labels))
            at = walked.get(key)
            if at is None:
                at = walked[key] = len(names)
                names.append(name)
            index.append(at)
            ordinal.append(n)
            step.append(s)
            epoch.append(e)
            rnd.append(r)
            ts.append(t)
            values.append(value)

    def series(self) -> dict[tuple[int, str], tuple[str, Arrays]]:
        """(run key, series key) → (name, arrays in ``COLUMNS`` order), points in the order of their events."""
        steps = self.series_steps()
        for _ in steps:
            pass
        return self.result

    def series_steps(self) -> Iterator[None]:
        """``series`` a layout at a time (a step each), for a caller that must not stop for all of it at
        once; the dict is ``result`` at the end."""
        parts: _Parts = {}
        for layout in self._layouts.values():
            if layout.rows:
                _layout_parts(layout, parts)
                yield
        # A step every STEP_SERIES series too: a run that logs a hundred thousand names is as many arrays.
        index = np.frombuffer(self._index, dtype=np.int64)
        order = np.argsort(index, kind="stable")  # each series' points together, in the order of their events
        columns = np.vstack([np.frombuffer(col, dtype=np.float64) for col in self._points])[:, order]
        ends = np.cumsum(np.bincount(index, minlength=len(self._names))).tolist()
        del index  # a view of ``_index``, which cannot grow while one is held
        begin = 0
        for i, (key, at) in enumerate(self._walked.items(), 1):
            _add_part(parts, key, self._names[at], tuple(columns[:, begin:ends[at]]))
            begin = ends[at]
            if not i % STEP_SERIES:
                yield
        result = {}
        for i, (key, (name, arrays)) in enumerate(parts.items(), 1):
            result[key] = (name, _in_order(arrays))
            if not i % STEP_SERIES:
                yield
        self.result = result


@dataclass
class Charted:
    """The points and markers of some stored blocks, as ``chart`` gathers them."""

    series: dict[tuple[int, str], tuple[str, Arrays]] = field(default_factory=dict)
    """(run key, series key) → (name, arrays in ``COLUMNS`` order), points in the order of their events."""
    markers: list[tuple] = field(default_factory=list)
    """(run key, event id, marker), in id order."""
    events: int = 0
    declared: list[tuple] = field(default_factory=list)
    """(run key, event id, rank, step, payload) of the events that declare summaries, in id order."""


def chart(blocks: Iterable[tuple[int, int, bytes]]) -> Charted:
    """The points and markers of ``blocks``: (run key, first event id, the block's body), in id order."""
    gathered = Gathered()
    for block in blocks:
        add_block(gathered, *block)
    return Charted(gathered.series(), gathered.markers, gathered.events, gathered.declared)


def joined_steps(parts: list[Charted], out: Charted) -> Iterator[None]:
    """Charted blocks that follow one another, as one, into ``out``: a step every ``STEP_SERIES`` series (for the
    event loop, as ``Gathered.series_steps``)."""
    if len(parts) == 1:
        out.series = parts[0].series
    else:
        series: _Parts = {}
        for part in parts:
            for key, (name, arrays) in part.series.items():
                _add_part(series, key, name, arrays)
        for i, (key, (name, pieces)) in enumerate(series.items(), 1):
            out.series[key] = (name, pieces[0] if len(pieces) == 1 else
                               tuple(np.concatenate(cols) for cols in zip(*pieces, strict=True)))
            if not i % STEP_SERIES:
                yield
    out.markers = [m for part in parts for m in part.markers]
    out.events = sum(part.events for part in parts)
    out.declared = [d for part in parts for d in part.declared]


def add_block(gathered: Gathered, run_key: int, first_id: int, body: bytes) -> None:
    """``gathered.add``, a block that does not decode logged and left out."""
    try:
        gathered.add(run_key, first_id, body)
    except (DecodeError, KeyError) as err:  # stored events were validated; one that is not stays out
        logger.warning("events not charted from the first one that does not decode: %s", err)


def _add_part(parts: _Parts, key: tuple[int, str], name: str, arrays: Arrays) -> None:
    """One more part of a series (a tuple each: a series' parts are seldom more than one or two)."""
    had = parts.get(key)
    parts[key] = (name, (arrays,)) if had is None else (name, (*had[1], arrays))


def _layout_parts(layout: _Layout, parts: _Parts) -> None:
    if not layout.rows:
        return
    columns = list(zip(*layout.rows, strict=True))
    xs = np.array([np.array(col, dtype=np.float64) for col in columns[:5]])
    for (name, key), column in zip(layout.columns, columns[5:], strict=True):
        arrays = _column(xs, column)
        if arrays is not None:
            _add_part(parts, (layout.run_key, key), name, arrays)


def _column(xs: np.ndarray, column: tuple) -> Arrays | None:
    """The arrays of one flat field's column (None where no event had a value)."""
    nones = column.count(None)
    if not nones:
        return (*xs, np.array(column, dtype=np.float64))
    if nones == len(column):
        return None
    keep = [i for i, v in enumerate(column) if v is not None]
    return (*xs[:, keep], np.array([column[i] for i in keep], dtype=np.float64))


def _in_order(parts: tuple[Arrays, ...]) -> Arrays:
    """One series' parts as one, in the order of their events, without the ordinal."""
    if len(parts) == 1:
        return tuple(parts[0][1:])
    joined = [np.concatenate(cols) for cols in zip(*parts, strict=True)]
    order = np.argsort(joined[0], kind="stable")
    return tuple(a[order] for a in joined[1:])
