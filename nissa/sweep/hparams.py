"""New hyperparameter values applied to a torch optimizer: the one line a plain loop's ``on_hparams`` needs
(imports nothing heavy: it only sets the optimizer's param groups)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

OPTIMIZER_KEYS = ("lr", "momentum", "weight_decay", "dampening", "eps")


def apply_hparams(optimizer: Any, values: Mapping[str, Any]) -> dict[str, Any]:
    """Set ``lr``, ``momentum``, ``weight_decay`` (also ``dampening``, ``eps``) and ``beta1``/``beta2`` of every
    param group of a torch optimizer from ``values`` where the group has them; returns what it set. The one line
    a plain loop needs: ``run.on_hparams(lambda v: nissa.sweep.apply_hparams(opt, v))``."""
    applied: dict[str, Any] = {}
    for group in optimizer.param_groups:
        for key in OPTIMIZER_KEYS:
            if key in values and key in group:
                group[key] = applied[key] = float(values[key])
        if "betas" in group and ("beta1" in values or "beta2" in values):
            b1, b2 = group["betas"]
            group["betas"] = (float(values.get("beta1", b1)), float(values.get("beta2", b2)))
            applied.update({k: float(values[k]) for k in ("beta1", "beta2") if k in values})
    return applied
