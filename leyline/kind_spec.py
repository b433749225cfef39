"""A row of the kinds table (``leyline.kinds``): how the hub and the store treat a kind, and how a table is made of
families of rows. Its own module so that each family of kinds declares its rows where its payloads live (Esper's in
``leyline.esper.kinds``)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from leyline.enums import Kind, Severity
from leyline.payloads import Payload

Marking = tuple[str, Callable[[Any], "str | None"]]
"""How an event of a kind marks a run's charts: the mark's kind (``fossilized``) and its label from the payload
(None: no mark). The payload may be the lean struct a store decodes (``leyline.series_columns``): read fields only."""


@dataclass(frozen=True)
class KindSpec:
    """One row of the table: how the hub and the store treat a kind."""

    payload: type[Payload]
    critical: bool
    """Never dropped by the hub (False: a metric, dropped under overload and counted)."""
    indexed: bool = False
    """The store indexes it by kind (rare kinds only)."""
    severity: Severity = Severity.INFO
    """The severity an event of the kind gets unless its sender says otherwise."""
    server_only: bool = False
    """Only the server writes it; a trainer that sends one is refused at ingest."""
    internal: bool = True
    """Its series are of the run's machinery, kept apart from the loop's own measures (False: a measure)."""
    marker: Marking | None = None
    """What happened to the run, worth a mark on its charts (``leyline.series.marker_of``); None: no mark."""


def table(*families: tuple[KindSpec, ...]) -> dict[Kind, KindSpec]:
    """Each kind of these families (each the rows of one or more enums of ``Kind``) → its row. Raises ValueError
    where a kind has two rows, where two kinds share a name (on the wire a kind is its name) or where a kind of an
    enum a family speaks has none."""
    rows: dict[str, KindSpec] = {}
    for spec in (spec for family in families for spec in family):
        name = spec.payload.KIND.value
        if name in rows:
            raise ValueError(f"kind {name!r} has two rows: {rows[name].payload.__name__} and {spec.payload.__name__}")
        rows[name] = spec
    for enum in {type(spec.payload.KIND) for spec in rows.values()}:
        missing = [kind.value for kind in enum if kind.value not in rows or rows[kind.value].payload.KIND is not kind]
        if missing:
            raise ValueError(f"{enum.__name__} has kinds with no row: {', '.join(missing)}")
    return {spec.payload.KIND: spec for spec in rows.values()}
