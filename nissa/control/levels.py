"""Telemetry levels: a base level, and temporary DEBUG windows that close by themselves.

A window is a set of claims, one per command. A claim holds until the end of epoch
``until_epoch`` (it counts the epoch in progress when it was applied as the first of its
``epochs``) and, when asked, until the end of the first PPO update that begins after it was
applied: a window that closed before the update would see nothing of the policy. New claims
extend the window; they never stack levels. The level goes back to the base when the last
claim is satisfied, and each claim's owner is told when its own part is done.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass

from leyline import TelemetryLevel, TelemetryLevelChanged
from leyline.payloads import Scalar

logger = logging.getLogger(__name__)

WINDOW_LEVEL = TelemetryLevel.DEBUG


@dataclass
class Claim:
    """One request for a DEBUG window; ``done`` is called with its result once it is satisfied."""

    key: str
    until_epoch: int | None
    through_update: bool
    opened_epoch: int
    opened_step: int
    done: Callable[[dict[str, Scalar]], None]
    update_began: bool = False
    update_covered: bool = False

    def satisfied(self, epoch_ended: int) -> bool:
        epochs_ok = self.until_epoch is None or epoch_ended >= self.until_epoch
        return epochs_ok and (not self.through_update or self.update_covered)


class LevelController:
    """The effective telemetry level, and the DEBUG windows that raise it for a while."""

    def __init__(self, base: TelemetryLevel, emit: Callable[[TelemetryLevelChanged], None]) -> None:
        self._base = base
        self._emit = emit
        self._claims: dict[str, Claim] = {}
        self._last_epoch_ended = 0
        self._step = 0

    @property
    def level(self) -> TelemetryLevel:
        """The level collectors should measure at now."""
        return WINDOW_LEVEL if self._claims and WINDOW_LEVEL.rank > self._base.rank else self._base

    @property
    def base(self) -> TelemetryLevel:
        return self._base

    @property
    def until_epoch(self) -> int | None:
        """Last epoch the window covers for sure (None: it waits only on an update, or is closed)."""
        ends = [c.until_epoch for c in self._claims.values() if c.until_epoch is not None]
        return max(ends) if ends else None

    def open_windows(self) -> list[dict[str, object]]:
        """What is left of each open window: ``epochs`` past the last epoch ended (None: none asked) and
        whether it still waits on an update (for a checkpoint; a resumed run opens them again)."""
        return [{"key": c.key, "through_update": c.through_update and not c.update_covered,
                 "epochs": None if c.until_epoch is None else max(c.until_epoch - self._last_epoch_ended, 0)}
                for c in self._claims.values()]

    def set_base(self, level: TelemetryLevel, reason: str = "set") -> None:
        before = self.level
        self._base = level
        self._announce(before, reason, None)

    def open_window(self, key: str, *, step: int, epoch: int, epochs: int | None, through_update: bool,
                    done: Callable[[dict[str, Scalar]], None], reason: str = "") -> None:
        """Raise the level to DEBUG for ``epochs`` epochs (counting ``epoch``) and/or the next update."""
        if epochs is None and not through_update:
            raise ValueError("a window needs epochs or through_update")
        if epochs is not None and epochs < 1:
            raise ValueError(f"epochs must be >= 1, got {epochs}")
        before = self.level
        extending = bool(self._claims)
        until = epoch + epochs - 1 if epochs is not None else None
        self._step = step
        self._claims[key] = Claim(key=key, until_epoch=until, through_update=through_update,
                                  opened_epoch=epoch, opened_step=step, done=done)
        if extending and self.level is before:
            self._announce(before, "window extended", key, force=True)
        else:
            self._announce(before, reason or "escalation", key)

    def step(self, step: int) -> None:
        self._step = step

    def epoch_end(self, epoch: int) -> None:
        self._last_epoch_ended = epoch
        self._settle("window closed")

    def update_begin(self) -> None:
        for claim in self._claims.values():
            claim.update_began = True

    def update_end(self) -> None:
        for claim in self._claims.values():
            if claim.update_began:
                claim.update_covered = True
        self._settle("window closed after the update")

    def close_all(self, reason: str) -> list[Claim]:
        """Close every window now (the run ends); returns the claims that were still open."""
        before = self.level
        open_claims = list(self._claims.values())
        self._claims.clear()
        self._announce(before, reason, None)
        return open_claims

    def _settle(self, reason: str) -> None:
        ready = [c for c in self._claims.values() if c.satisfied(self._last_epoch_ended)]
        if not ready:
            return
        before = self.level
        for claim in ready:
            del self._claims[claim.key]
        self._announce(before, reason, ready[-1].key)
        for claim in ready:
            claim.done({"opened_epoch": claim.opened_epoch, "closed_epoch": self._last_epoch_ended,
                        "opened_step": claim.opened_step, "closed_step": self._step,
                        "covered_update": claim.update_covered})

    def _announce(self, before: TelemetryLevel, reason: str, key: str | None, force: bool = False) -> None:
        after = self.level
        if after is before and not force:
            return
        logger.info("telemetry level %s -> %s (%s)", before.value, after.value, reason)
        self._emit(TelemetryLevelChanged(level=after, previous=before, reason=reason,
                                         until_epoch=self.until_epoch, command_id=key))
