"""A row of the kinds table (``leyline.kinds``): how the hub and the store treat a kind. Its own module so that
each family of kinds declares its rows where its payloads live (Esper's in ``leyline.esper.kinds``)."""

from __future__ import annotations

from dataclasses import dataclass

from leyline.enums import Severity
from leyline.payloads import Payload


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
