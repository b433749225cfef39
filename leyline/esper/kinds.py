"""Esper's family of kinds (``EsperKind``) and its rows of the kinds table (``leyline.kinds`` registers them beside
the core's): its seeds, the epoch report over them, the PPO update and the policy's LSTM. Every one is a measure of
Esper's loop, none internal; a seed fossilized or pruned marks the run's charts."""

from __future__ import annotations

from typing import Any, TypeAlias

from leyline.enums import Severity
from leyline.esper.enums import EsperKind
from leyline.esper.policy import LSTMHealth, PPOUpdate
from leyline.esper.seeds import (
    EpochCompleted,
    SeedFossilized,
    SeedGateEvaluated,
    SeedGerminated,
    SeedPruned,
    SeedStageChanged,
)
from leyline.kind_spec import KindSpec

EsperPayload: TypeAlias = (
    EpochCompleted | SeedGerminated | SeedStageChanged | SeedGateEvaluated | SeedFossilized | SeedPruned | PPOUpdate
    | LSTMHealth
)
"""Esper's payload types, written out for the checker (``leyline.kinds.AnyPayload`` includes them)."""


def _seed_mark(p: Any) -> str:
    return f"{p.slot} {p.blueprint}"


ESPER_KINDS: tuple[KindSpec, ...] = (
    KindSpec(EpochCompleted, critical=False, internal=False),
    KindSpec(SeedGerminated, critical=True, indexed=True, internal=False),
    KindSpec(SeedStageChanged, critical=True, indexed=True, internal=False),
    KindSpec(SeedGateEvaluated, critical=True, indexed=True, internal=False),
    KindSpec(SeedFossilized, critical=True, indexed=True, internal=False, marker=("fossilized", _seed_mark)),
    KindSpec(SeedPruned, critical=True, indexed=True, internal=False, marker=("pruned", _seed_mark)),
    KindSpec(PPOUpdate, critical=False, internal=False),
    KindSpec(LSTMHealth, critical=False, severity=Severity.DEBUG, internal=False),
)
"""Esper's own kinds."""

__all__ = ["ESPER_KINDS", "EsperKind", "EsperPayload"]
