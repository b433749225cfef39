"""Series: every numeric field of an event's payload, as points of a named, labelled series.

The definition is generic, with no code per kind: any int or float field (not bool) of a payload,
walking nested structs, lists of structs and dicts of numbers, is a point of the series
``<kind>.<field>`` (nested: ``<kind>.<field>.<sub>``). Fields that say *which* thing a value is about
rather than measure it (env, rank, slot, scope, layer, seed id …; ``LABEL_FIELDS``) become labels,
together with the envelope's ``env`` and ``rank``::

    epoch_completed.accuracy{env=2,rank=0}
    epoch_completed.seeds.alpha{env=0,rank=0,seed_id=s3,slot=r0c0}
    ppo_update.entropy.op{rank=0}

A numeric field added to a payload later is a series with no further change. A loop's free-form
``metrics`` event is the one exception: each of its values is the series of its own name. ``None`` ("not measured")
is no point; NaN and infinity are points (a ``summary`` event has none: ``NO_POINTS_KINDS``). ``marker_of`` says
what happened to a run (a command applied, an anomaly, a seed fossilized or pruned, a resume, the end), for the
markers on its charts.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Literal

import msgspec

from leyline.enums import Kind
from leyline.events import Event
from leyline.kinds import KIND_NAMES, KINDS
from leyline.metrics import Metrics
from leyline.payloads_ops import CommandStatusChanged

XAxis = Literal["step", "epoch", "round", "ts"]
X_AXES: tuple[str, ...] = ("step", "epoch", "round", "ts")

LABEL_FIELDS: frozenset[str] = frozenset(
    {"env", "rank", "slot", "scope", "layer", "seed_id", "model", "phase", "anomaly", "blueprint", "head",
     "name", "mode", "target"}
)
"""Field names (str or int) that label a value rather than measure it."""
COORDINATE_FIELDS: frozenset[str] = frozenset({"round"})
"""Numeric fields that place a point on an x axis (``SeriesPoint.round``) rather than being one."""
IGNORED_FIELDS: frozenset[str] = frozenset({"pid", "bins"})
"""Numbers that identify a process, neither a measure nor a label worth a series; a histogram's bins (parts
of one distribution, read whole at ``/runs/{run_id}/histograms/{name}``)."""
NO_POINTS_KINDS: frozenset[str] = frozenset({"summary"})
"""Kinds whose numbers are no points: what a loop says of its results (``leyline.summaries``) is summarised
as it is, never charted."""
MAX_POINTS_PER_EVENT = 1024
"""Points one event yields at most (a huge dict in a payload is not a thousand series)."""

_ESCAPE = str.maketrans({"\\": "\\\\", "{": "\\{", "}": "\\}", ",": "\\,", "=": "\\="})
_NAME_SAFE = str.maketrans("{},=\\", "_____")  # a dict key in a name: no character a key gives meaning to


class SeriesPoint(msgspec.Struct, kw_only=True, frozen=True, gc=False):
    """One value of one series, with where it sits on every x axis."""

    name: str
    labels: dict[str, str]
    key: str
    """``name{k=v,…}``, labels sorted (just ``name`` when there are none): one series."""
    step: int
    epoch: int | None
    round: int | None
    ts: float
    value: float


class Marker(msgspec.Struct, kw_only=True, frozen=True):
    """Something that happened to the run, to mark on its charts."""

    kind: str
    """``command``, ``anomaly``, ``fossilized``, ``pruned``, ``resumed`` or ``end``."""
    label: str
    step: int
    epoch: int | None
    round: int | None
    ts: float
    env: int | None
    rank: int
    command_id: str | None = None
    """A command's mark: the command (its entry in the run's command history)."""


# --- keys ------------------------------------------------------------------------------------------


def format_key(name: str, labels: dict[str, str]) -> str:
    """The canonical key of a series: ``name{k=v,…}``, labels sorted, special characters escaped."""
    if not labels:
        return name
    inner = ",".join(f"{k.translate(_ESCAPE)}={str(labels[k]).translate(_ESCAPE)}" for k in sorted(labels))
    return f"{name}{{{inner}}}"


def _split_unescaped(text: str, sep: str) -> list[str]:
    parts, cur, i = [], [], 0
    while i < len(text):
        ch = text[i]
        if ch == "\\" and i + 1 < len(text):
            cur.append(text[i:i + 2])
            i += 2
            continue
        if ch == sep:
            parts.append("".join(cur))
            cur = []
        else:
            cur.append(ch)
        i += 1
    parts.append("".join(cur))
    return parts


def _unescape(text: str) -> str:
    out, i = [], 0
    while i < len(text):
        if text[i] == "\\" and i + 1 < len(text):
            i += 1
        out.append(text[i])
        i += 1
    return "".join(out)


def parse_label_pairs(text: str) -> dict[str, str]:
    """``env=2,data=a\\,b`` → ``{"env": "2", "data": "a,b"}``: pairs split at each unescaped ``,``, a name
    from its value at the first unescaped ``=``; ``\\`` escapes the next character, as in a series key, so
    any label value can be named. Blanks around names and values and empty pairs are dropped; raises
    ``ValueError`` naming a pair that is not ``name=value``."""
    labels: dict[str, str] = {}
    for pair in _split_unescaped(text, ","):
        if not pair.strip():
            continue
        name, *value = _split_unescaped(pair, "=")
        if not value or not name.strip():
            raise ValueError(f"labels: {pair!r} is not name=value")
        labels[_unescape(name.strip())] = _unescape("=".join(value).strip())
    return labels


def parse_key(key: str) -> tuple[str, dict[str, str]]:
    """``"a.b{env=2}"`` → ``("a.b", {"env": "2"})``; the inverse of ``format_key``. Raises ``ValueError``."""
    if "\\" not in key:  # nothing escaped (most keys): the same split, by the string's own methods
        return _parse_plain(key)
    brace = _split_unescaped(key, "{")
    if len(brace) == 1:
        return _unescape(key), {}
    name, rest = brace[0], "{".join(brace[1:])
    if not rest.endswith("}") or rest.endswith("\\}"):
        raise ValueError(f"series key {key!r}: labels must end with '}}'")
    labels: dict[str, str] = {}
    for pair in _split_unescaped(rest[:-1], ","):
        kv = _split_unescaped(pair, "=")
        if len(kv) != 2 or not kv[0]:
            raise ValueError(f"series key {key!r}: label {pair!r} is not k=v")
        labels[_unescape(kv[0])] = _unescape(kv[1])
    return _unescape(name), labels


def _parse_plain(key: str) -> tuple[str, dict[str, str]]:
    """``parse_key`` of a key without ``\\``."""
    name, brace, rest = key.partition("{")
    if not brace:
        return key, {}
    if not rest.endswith("}"):
        raise ValueError(f"series key {key!r}: labels must end with '}}'")
    labels: dict[str, str] = {}
    for pair in rest[:-1].split(","):
        kv = pair.split("=")
        if len(kv) != 2 or not kv[0]:
            raise ValueError(f"series key {key!r}: label {pair!r} is not k=v")
        labels[kv[0]] = kv[1]
    return name, labels


# --- points ----------------------------------------------------------------------------------------


def _plan(cls: type[msgspec.Struct]) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """A struct type's label fields and the fields that may hold numbers (cached: types are few)."""
    plan = _PLANS.get(cls)
    if plan is None:
        fields = cls.__struct_fields__
        labels = tuple(f for f in fields if f in LABEL_FIELDS)
        values = tuple(f for f in fields if f not in LABEL_FIELDS and f not in COORDINATE_FIELDS
                       and f not in IGNORED_FIELDS)
        plan = _PLANS[cls] = (labels, values)
    return plan


_PLANS: dict[type, tuple[tuple[str, ...], tuple[str, ...]]] = {}
_Found = list[tuple[str, dict[str, str], float]]


def _walk(obj: msgspec.Struct, prefix: str, labels: dict[str, str], out: _Found, item_of: str = "") -> None:
    """Append ``(name, labels, value)`` for every number under struct ``obj``."""
    own = own_labels(obj, labels, item_of)
    for field in _plan(type(obj))[1]:
        value = getattr(obj, field)
        if value is None or value is True or value is False:
            continue
        cls = type(value)
        if cls is float or cls is int:
            if len(out) < MAX_POINTS_PER_EVENT:
                out.append((f"{prefix}.{field}", own, float(value)))
        elif cls is not str:
            _value(value, f"{prefix}.{field}", field, own, out)


def own_labels(obj: msgspec.Struct, labels: dict[str, str], item_of: str = "") -> dict[str, str]:
    """``labels`` with those of struct ``obj``'s label fields (a copy only where it has some)."""
    own = labels
    for field in _plan(type(obj))[0]:
        value = getattr(obj, field)
        if isinstance(value, (str, int)) and not isinstance(value, bool):
            if field == "name":  # in a list's item, ``name`` says which item: ``layers`` → ``layer``
                if not item_of:
                    continue
                field = item_of
            if own is labels:
                own = dict(labels)
            own[field] = str(value)
    return own


def walk_value(value: object, name: str, field: str, labels: dict[str, str], out: _Found) -> None:
    """Append ``(name, labels, value)`` for every number in ``value``, field ``field`` of a payload."""
    _value(value, name, field, labels, out)


def _value(value: object, name: str, field: str, labels: dict[str, str], out: _Found) -> None:
    if len(out) >= MAX_POINTS_PER_EVENT or value is None or isinstance(value, (bool, str)):
        return
    if isinstance(value, (int, float)):
        out.append((name, labels, float(value)))
    elif isinstance(value, msgspec.Struct):
        _walk(value, name, labels, out)
    elif isinstance(value, (list, tuple)):
        item = field[:-1] if field.endswith("s") else field
        for i, element in enumerate(value):
            if isinstance(element, msgspec.Struct):
                _walk(element, name, labels, out, item_of=item)
            else:
                _value(element, name, field, {**labels, item: str(i)}, out)
    elif isinstance(value, dict):
        for sub, element in value.items():
            sub = str(sub).translate(_NAME_SAFE)
            _value(element, f"{name}.{sub}", sub, labels, out)


def _kind_name(event: Event) -> str:
    kind = event.kind
    return kind.value if isinstance(kind, Kind) else str(kind)


def points_of(event: Event) -> list[SeriesPoint]:
    """Every point an event carries (none for a payload without numbers)."""
    found = _found(event)
    rnd = _round_of(event)
    step, epoch, ts = event.step, event.epoch, event.ts
    return [SeriesPoint(name=name, labels=labels, key=_key(name, labels), step=step, epoch=epoch, round=rnd,
                        ts=ts, value=value) for name, labels, value in found]


def values_of(event: Event) -> list[tuple[str, str, float]]:
    """``points_of``'s points as ``(key, name, value)`` only (their x are the event's ``step``, ``epoch``,
    ``ts`` and the payload's ``round``): for a store that writes millions, without the objects."""
    return [(_key(name, labels), name, value) for name, labels, value in _found(event)]


def _found(event: Event) -> _Found:
    return found_in(event.payload, _kind_name(event), event.rank, event.env)


def found_in(payload: Any, kind: str, rank: int, env: int | None) -> _Found:
    """``(name, labels, value)`` of every point of an event of ``kind`` with this payload, rank and env.

    ``payload`` is a payload of ``kind``, or the lean struct a store decodes it into (a type made at run time,
    ``leyline.series_columns``): a ``metrics`` one is always the whole ``Metrics``."""
    envelope = {"rank": str(rank)}
    if env is not None:
        envelope["env"] = str(env)
    found: _Found = []
    if kind in NO_POINTS_KINDS:
        return found
    if kind == "metrics":
        _metrics(payload, envelope, found)
    else:
        _walk(payload, kind, envelope, found)
    return found




def kind_of_name(name: str) -> str:
    """The event kind a series of this name comes from: its first dotted part where that is a kind of
    the contract, else ``metrics`` (a loop's own value, named as ``run.log`` was given it)."""
    head = name.split(".", 1)[0]
    return head if head != name and head in KIND_NAMES else "metrics"


def internal(key: str) -> bool:
    """Whether a series (a name or a key) is of the run's machinery rather than a measure of its loop's: its kind
    says so (``KindSpec.internal``: ``hub_health.*``, ``run_started.*``, ``run_finished.*``, ``system.*`` …). A
    loop's own values, named as it logged them (``val_loss``), never are. Kept apart: not a runs table's default
    columns, not in ``nissa.Api.runs_frame`` unless asked."""
    try:
        name = parse_key(key)[0]
    except ValueError:
        name = key
    kind = kind_of_name(name)
    return kind != "metrics" and KINDS[KIND_NAMES[kind]].internal


def key_of(name: str, labels: dict[str, str]) -> str:
    """``format_key``, remembered: the same few series recur in every event."""
    return _key(name, labels)


def _metrics(payload: Metrics, labels: dict[str, str], out: _Found) -> None:
    """A loop's ``metrics`` (``run.log``): each value is the series of its own name (``loss``, not
    ``metrics.values.loss``), labelled by the event's labels; ``"nan"`` and ``"inf"`` are points too."""
    own = {**labels, **payload.labels} if payload.labels else labels
    for name, value in payload.values.items():
        if len(out) < MAX_POINTS_PER_EVENT:
            out.append((name, own, float(value)))


def _key(name: str, labels: dict[str, str]) -> str:
    cache = (name, *labels.items())
    key = _KEYS.get(cache)
    if key is None:
        if len(_KEYS) >= 65536:  # series are few; a flood of distinct ones only costs their formatting
            _KEYS.clear()
        key = _KEYS[cache] = format_key(name, labels)
    return key


_KEYS: dict[tuple, str] = {}


def round_of(event: Event) -> int | None:
    """The event's place on the ``round`` axis: its payload's ``round``, if it has one."""
    return _round_of(event)


def _round_of(event: Event) -> int | None:
    rnd = getattr(event.payload, "round", None)
    return rnd if isinstance(rnd, int) and not isinstance(rnd, bool) else None


def x_of(point: SeriesPoint | Marker, axis: str) -> float | None:
    """Where ``point`` sits on ``axis`` (one of ``X_AXES``); None where it has no place on it."""
    value = getattr(point, axis)
    return None if value is None else float(value)


# --- markers ---------------------------------------------------------------------------------------

_MARKERS = {kind: spec.marker for kind, spec in KINDS.items() if spec.marker is not None}
MARKER_KINDS: frozenset[Kind] = frozenset(_MARKERS)
"""Event kinds that may be a marker (``KindSpec.marker``)."""


def marker_of(event: Event) -> Marker | None:
    """What happened to the run, if ``event`` is worth a mark on its charts."""
    make = marker_maker(event.kind)
    if make is None:
        return None
    return make(event.payload, event.step, event.epoch, _round_of(event), event.ts, event.env, event.rank)


def marker_maker(kind: Kind) -> Callable[..., Marker | None] | None:
    """For a kind that may be a marker: ``(payload, step, epoch, round, ts, env, rank)`` → its marker or None."""
    entry = _MARKERS.get(kind)
    if entry is None:
        return None
    marker_kind, label_of = entry

    def make(payload: object, step: int, epoch: int | None, rnd: int | None, ts: float, env: int | None,
             rank: int) -> Marker | None:
        label = label_of(payload)
        if label is None:
            return None
        command_id = payload.command_id if isinstance(payload, CommandStatusChanged) else None
        return Marker(kind=marker_kind, label=str(label), step=step, epoch=epoch, round=rnd, ts=ts, env=env,
                      rank=rank, command_id=command_id)
    return make
