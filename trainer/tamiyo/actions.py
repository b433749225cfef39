"""The factored action space: heads in ``HEAD_NAMES`` order, their values, and which heads each op uses."""

from __future__ import annotations

import enum
from dataclasses import dataclass

import torch

from leyline.esper import HEAD_NAMES
from trainer.kasmina.alpha import ALPHA_CURVES
from trainer.kasmina.blueprints import BLUEPRINT_NAMES
from trainer.kasmina.slot import BLEND_STYLES


class Op(enum.IntEnum):
    WAIT = 0
    GERMINATE = 1
    SET_ALPHA_TARGET = 2
    PRUNE = 3
    FOSSILIZE = 4
    ADVANCE = 5


N_OPS = len(Op)
TEMPOS: tuple[int, ...] = (3, 5, 8)
ALPHA_TARGETS: tuple[float, ...] = (0.5, 0.7, 1.0)
ALPHA_SPEEDS: tuple[int, ...] = (0, 3, 5, 8)
HEAD_INDEX: dict[str, int] = {name: i for i, name in enumerate(HEAD_NAMES)}

# Heads each op reads besides ``op`` itself; only these get credit in the PPO loss.
_OP_USES: dict[Op, tuple[str, ...]] = {
    Op.WAIT: (),
    Op.GERMINATE: ("slot", "blueprint", "style", "tempo"),
    Op.SET_ALPHA_TARGET: ("slot", "alpha_target", "alpha_speed", "alpha_curve"),
    Op.PRUNE: ("slot", "alpha_speed", "alpha_curve"),
    Op.FOSSILIZE: ("slot",),
    Op.ADVANCE: ("slot",),
}


def _causal_table() -> torch.Tensor:
    table = torch.zeros(N_OPS, len(HEAD_NAMES), dtype=torch.bool)
    for op, heads in _OP_USES.items():
        table[op, HEAD_INDEX["op"]] = True
        for head in heads:
            table[op, HEAD_INDEX[head]] = True
    return table


CAUSAL_HEADS = _causal_table()
"""``CAUSAL_HEADS[op, h]``: head h is used by op (row per op, column per ``HEAD_NAMES``)."""
_CAUSAL_ROWS: list[list[bool]] = CAUSAL_HEADS.tolist()  # the same, as plain Python for per-action lookups


def head_sizes(n_slots: int) -> tuple[int, ...]:
    """Number of choices per head, in ``HEAD_NAMES`` order."""
    sizes = {"op": N_OPS, "slot": n_slots, "blueprint": len(BLUEPRINT_NAMES), "style": len(BLEND_STYLES),
             "tempo": len(TEMPOS), "alpha_target": len(ALPHA_TARGETS), "alpha_speed": len(ALPHA_SPEEDS),
             "alpha_curve": len(ALPHA_CURVES)}
    return tuple(sizes[name] for name in HEAD_NAMES)


@dataclass(frozen=True)
class Action:
    """One env's decoded action (plain Python values, read from the epoch's single transfer)."""

    op: Op
    slot: int
    blueprint: str
    style: str
    tempo: int
    alpha_target: float
    alpha_speed: int
    alpha_curve: str

    @classmethod
    def from_row(cls, row: list[int]) -> Action:
        """Decode one row of head indices (``HEAD_NAMES`` order)."""
        h = dict(zip(HEAD_NAMES, row, strict=True))
        return cls(Op(h["op"]), h["slot"], BLUEPRINT_NAMES[h["blueprint"]], BLEND_STYLES[h["style"]],
                   TEMPOS[h["tempo"]], ALPHA_TARGETS[h["alpha_target"]], ALPHA_SPEEDS[h["alpha_speed"]],
                   ALPHA_CURVES[h["alpha_curve"]])

    @staticmethod
    def row(op: Op, slot: int = 0, blueprint: str = BLUEPRINT_NAMES[0], style: str = BLEND_STYLES[0],
            tempo: int = TEMPOS[0], alpha_target: float = ALPHA_TARGETS[-1], alpha_speed: int = 0,
            alpha_curve: str = ALPHA_CURVES[0]) -> list[int]:
        """Encode an action as head indices; heads the op does not use get index 0."""
        values = {"op": int(op), "slot": slot, "blueprint": BLUEPRINT_NAMES.index(blueprint),
                  "style": BLEND_STYLES.index(style), "tempo": TEMPOS.index(tempo),
                  "alpha_target": ALPHA_TARGETS.index(alpha_target),
                  "alpha_speed": ALPHA_SPEEDS.index(alpha_speed), "alpha_curve": ALPHA_CURVES.index(alpha_curve)}
        used = _CAUSAL_ROWS[int(op)]
        return [values[name] if used[i] else 0 for i, name in enumerate(HEAD_NAMES)]

    def describe(self, slot_ids: tuple[str, ...]) -> str:
        if self.op is Op.WAIT:
            return "WAIT"
        where = slot_ids[self.slot]
        if self.op is Op.GERMINATE:
            return f"GERMINATE {self.blueprint}@{where} {self.style} tempo {self.tempo}"
        if self.op is Op.SET_ALPHA_TARGET:
            return f"SET_ALPHA_TARGET {where} {self.alpha_target} in {self.alpha_speed} {self.alpha_curve}"
        if self.op is Op.PRUNE:
            return f"PRUNE {where} in {self.alpha_speed}"
        return f"{self.op.name} {where}"
