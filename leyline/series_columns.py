"""``leyline.series``' definition compiled once per payload type, for a store that charts every event.

``points_of`` walks each event's payload field by field and formats each point's key. A store that
writes every event of a lab cannot afford that per event; this module finds, once per payload type,
what ``points_of`` would find again and again (``KindPlan``, one ``Shape`` per struct type in a payload):

- which fields label (``LABEL_FIELDS``), place (``round``) or measure a value, from the type's
  annotations: a field that can only hold an int, a float or None is *flat*; the flat fields of the
  payload and of the structs in it (a struct field, or a list of structs such as an epoch's seeds) share
  their struct's labels, so a store formats their keys once per set of labels, not per event;
- a function written for the type (``KindPlan.rows``) that reads an event's labels and flat values in one
  call; numbers in dicts, lists of numbers and deeper structs are walked as ``points_of`` walks them;
- a lean copy of the payload type with only those fields (``Shape.lean``), what a store decodes.

``envelopes`` decodes stored events without validating them again (they were validated when they were
stored) and without building an ``Event``: only what a point needs.
"""

from __future__ import annotations

import functools
import keyword
import types
from collections.abc import Callable
from operator import attrgetter
from typing import Any

import msgspec
import msgspec.inspect as mi

from leyline.enums import EventKind, Kind
from leyline.events import PAYLOAD_TYPES
from leyline.series import COORDINATE_FIELDS, IGNORED_FIELDS, LABEL_FIELDS, NO_POINTS_KINDS, Marker, marker_maker

_NUMBERS = (mi.IntType, mi.FloatType)
_SCALARS = (mi.StrType, mi.IntType, mi.EnumType, mi.LiteralType, mi.NoneType)
"""Label types a compiled plan handles (no bool: ``True == 1`` would share a set of labels)."""


def _members(t: mi.Type) -> tuple[mi.Type, ...]:
    return t.types if isinstance(t, mi.UnionType) else (t,)


def _never_a_number(t: mi.Type) -> bool:
    """A field that ``points_of`` always skips: only ever a str, a str enum, a bool or None."""
    for m in _members(t):
        if isinstance(m, (mi.EnumType, mi.LiteralType)):
            values = [e.value for e in m.cls] if isinstance(m, mi.EnumType) else list(m.values)
            if not all(isinstance(v, str) for v in values):
                return False
        elif not isinstance(m, (mi.StrType, mi.BoolType, mi.NoneType)):
            return False
    return True


def _getter(names: tuple[str, ...]) -> Callable[[Any], tuple]:
    """``obj`` → the tuple of its attributes ``names``."""
    if len(names) > 1:
        return attrgetter(*names)
    if names:
        one = attrgetter(names[0])
        return lambda obj: (one(obj),)
    return lambda obj: ()


class Shape:
    """A struct type at one place in a payload, compiled: its label fields, its flat fields (and their
    series' names), its struct fields and lists of structs (shapes of their own), the rest walked."""

    __slots__ = ("item_of", "label_names", "flat_fields", "flat_names", "structs", "others",
                 "other_names", "lean", "compiled")

    lean: type
    compiled: bool

    def __init__(self, cls: type, prefix: str, item_of: str = "") -> None:
        self.item_of = item_of
        """The label a ``name`` field gives (``layer`` for an item of ``layers``); none at the top."""
        info = mi.type_info(cls)
        if not isinstance(info, mi.StructType):
            raise TypeError(f"{cls!r} is not a struct type")
        fields = info.fields
        labels = [f for f in fields if f.name in LABEL_FIELDS and (item_of or f.name != "name")]
        values = [f for f in fields if f.name not in LABEL_FIELDS and f.name not in COORDINATE_FIELDS
                  and f.name not in IGNORED_FIELDS and not _never_a_number(f.type)]
        flat = tuple(f.name for f in values if all(isinstance(m, (*_NUMBERS, mi.NoneType)) for m in _members(f.type)))
        structs = [(f.name, _struct_of(f.type)) for f in values if f.name not in flat]
        self.structs = tuple((name, many, Shape(c, f"{prefix}.{name}", (name[:-1] if name.endswith("s") else name)
                                                if many else "")) for name, (c, many) in structs if c is not None)
        compiled_structs = {name for name, _, _ in self.structs}
        others = tuple(f.name for f in values if f.name not in flat and f.name not in compiled_structs)
        self.label_names = tuple(f.name for f in labels)
        self.flat_fields = flat
        self.flat_names = tuple(f"{prefix}.{name}" for name in flat)
        self.others = _getter(others)
        self.other_names = tuple((f"{prefix}.{name}", name) for name in others)
        self.lean = _lean(cls, {*self.label_names, *flat, *others, *COORDINATE_FIELDS},
                          {name: (shape.lean, many) for name, many, shape in self.structs})
        """``cls`` with only the fields a point needs (and no cycles to collect): what a store decodes."""
        scalar_labels = all(isinstance(m, _SCALARS) for f in labels for m in _members(f.type))
        self.compiled = scalar_labels and all(shape.compiled and not shape.structs and not shape.other_names
                                              for _, _, shape in self.structs)
        """False where a label field may hold something unhashable, or structs nest deeper than one
        level under the payload, or hold more than numbers: such events are walked."""


def _lean(cls: type, keep: set[str], structs: dict[str, tuple[type, bool]]) -> type:
    """A struct type decoding the same JSON as ``cls`` into only its fields ``keep`` and ``structs`` (those
    as their own lean types), with the same defaults: what its points are made of, nothing else decoded."""
    fields: list[tuple] = []
    for f in msgspec.structs.fields(cls):
        if f.name in structs:
            lean, many = structs[f.name]
            kind: Any = types.GenericAlias(list, (lean,)) if many else lean | None
        elif f.name in keep:
            kind = f.type
        else:
            continue
        if f.default is not msgspec.NODEFAULT:
            field = msgspec.field(default=f.default, name=f.encode_name)
        elif f.default_factory is not msgspec.NODEFAULT:
            field = msgspec.field(default_factory=f.default_factory, name=f.encode_name)
        else:
            field = msgspec.field(name=f.encode_name)
        fields.append((f.name, kind, field))
    return msgspec.defstruct(f"{cls.__name__}Points", fields, kw_only=True, gc=False)


def _struct_of(t: mi.Type) -> tuple[type | None, bool]:
    """(the struct type, whether a list of them) of a field that holds one struct, a list of one struct
    type or None; ``(None, False)`` for any other field."""
    members = [m for m in _members(t) if not isinstance(m, mi.NoneType)]
    if len(members) != 1:
        return None, False
    m = members[0]
    if isinstance(m, mi.StructType) and not m.array_like:
        return m.cls, False
    if isinstance(m, mi.ListType) and isinstance(m.item_type, mi.StructType) and not m.item_type.array_like:
        return m.item_type.cls, True
    return None, False


DECLARING_KINDS: frozenset[EventKind] = frozenset({EventKind.RUN_STARTED, EventKind.SUMMARY})
"""Kinds that say how a run's metrics are summarised (``leyline.summaries``): a store reads them whole."""


class KindPlan:
    """One event kind's payload type, compiled: how to decode it, where its numbers are, its marker."""

    __slots__ = ("kind", "decode", "root", "has_round", "marker", "rows", "usual", "declares")

    def __init__(self, kind: Kind, cls: type[msgspec.Struct]) -> None:
        self.kind = kind.value
        self.marker: Callable[..., Marker | None] | None = marker_maker(kind)
        self.root = root = Shape(cls, self.kind)
        own_names = kind is EventKind.METRICS  # each value is the series of its own name: ``found_in`` reads it
        self.declares = kind in DECLARING_KINDS
        self.decode: Callable[[bytes], Any] = msgspec.json.Decoder(
            cls if self.marker or own_names or self.declares else root.lean).decode
        """The payload's JSON → what its points are made of (a marker's label and a declaration need the whole
        payload)."""
        self.has_round = "round" in cls.__struct_fields__
        walked = own_names or self.kind in NO_POINTS_KINDS
        self.rows = _rows(root, self.has_round) if root.compiled and not walked else None
        """``payload`` → (the labels of its structs, the flat values of all of them in one tuple, its round):
        what a store appends per event (one object an event: a writer that keeps thousands makes the
        garbage collector run no more than it must)."""
        self.usual = self.rows is not None and not root.other_names and self.marker is None and not self.declares
        """Events of the kind are all flat values (of the payload and of the structs in it), never a marker."""


def _rows(root: Shape, has_round: bool) -> Callable[[Any], tuple[tuple, tuple, Any]]:
    """``payload`` → (labels, values, its ``round``), as Python code written for the type: attribute reads in
    a tuple display cost a fraction of ``attrgetter`` calls and loops over fields."""
    def attrs(obj: str, names: tuple[str, ...]) -> str:
        assert all(n.isidentifier() and not keyword.iskeyword(n) for n in names)
        return "".join(f"{obj}.{n}, " for n in names)

    rnd = "p.round" if has_round else "None"
    lines = ["def rows(p):"]
    empty = []
    for j, (field, many, _) in enumerate(root.structs):
        assert field.isidentifier() and not keyword.iskeyword(field)
        lines.append(f"    s{j} = p.{field}")
        empty.append(f"not s{j}" if many else f"s{j} is None")
    own, flat = f"({attrs('p', root.label_names)})", f"({attrs('p', root.flat_fields)})"
    ends = "".join(f"{j}, " for j in range(len(root.structs)))  # after each field's items: no two shapes alike
    lines.append(f"    if {' and '.join(empty) or 'True'}:")
    lines.append(f"        return ({own}, {ends}), {flat}, {rnd}")
    lines.append(f"    labels, values = [{own}], list({flat})")
    for j, (_field, many, sub) in enumerate(root.structs):
        lines.append(f"    if s{j}{'' if many else ' is not None'}:")
        lines.append(f"        for i in {f's{j}' if many else f'(s{j},)'}:")
        lines.append(f"            labels.append(({attrs('i', sub.label_names)}))")
        lines.append(f"            values += ({attrs('i', sub.flat_fields)})")
        lines.append(f"    labels.append({j})")
    lines.append(f"    return tuple(labels), tuple(values), {rnd}")
    namespace: dict[str, Any] = {}
    exec("\n".join(lines), namespace)  # noqa: S102 - the code is made of a struct type's field names
    return namespace["rows"]


@functools.cache
def _plans() -> dict[str, KindPlan]:
    return {kind.value: KindPlan(kind, cls) for kind, cls in PAYLOAD_TYPES.items()}


def plan_of(kind: str) -> KindPlan:
    """The compiled plan of ``kind`` (an event kind's value; raises ``KeyError`` for an unknown one)."""
    return _plans()[kind]


class Envelope(msgspec.Struct, gc=False):
    """What a series point needs of a stored event's envelope (its payload still raw)."""

    kind: str
    payload: msgspec.Raw
    ts: float
    rank: int = 0
    step: int = 0
    epoch: int = 0
    env: int | None = None


envelopes: Callable[[bytes], list[Envelope]] = msgspec.json.Decoder(list[Envelope]).decode
"""A JSON array of stored events, as ``Envelope``s (raises ``msgspec.DecodeError``): not validated again
(they were validated when they were stored); each payload is decoded by its kind's plan (``KindPlan.decode``)
as it is used, so a writer does not hold thousands of payloads at once (the garbage collector's work
grows with what a thread holds)."""
