"""What the integrations share: another library's metric names and values as a run takes them."""

from __future__ import annotations

import numbers
import re
from collections.abc import Iterable, Mapping
from typing import Any

from leyline.metrics import MAX_METRICS

_BAD = re.compile(r"[^A-Za-z0-9_./:-]")


def metric_name(name: str) -> str:
    """A metric name of another library as a Nissa one (characters it does not take become ``_``)."""
    cleaned = _BAD.sub("_", str(name))[:128]
    return cleaned if re.match(r"[A-Za-z_]", cleaned) else f"_{cleaned}"[:128]


def scalars(values: Mapping[str, Any] | Iterable[tuple[str, Any]]) -> dict[str, Any]:
    """The scalar values among ``values`` (numbers, NumPy's, one-element tensors), under Nissa names; text,
    lists and the like are left out. At most as many as one ``metrics`` event carries."""
    items = values.items() if isinstance(values, Mapping) else values
    out: dict[str, Any] = {}
    for key, value in items:
        if len(out) >= MAX_METRICS:
            break
        if isinstance(value, bool):
            continue
        if isinstance(value, numbers.Real) or (hasattr(value, "numel") and value.numel() == 1):
            out[metric_name(key)] = value
    return out

