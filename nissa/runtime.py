"""A run's runtime: the NissaHub plus run control, seen by a loop that counts its own steps as ``LoopHooks``.

``build_runtime`` wires a hub, a level controller and a command processor with the
``debug`` handler, and a ``profile`` handler that refuses until profiling is plugged in
(``runtime.commands.register(ProfileRequest, handler)``).

In a run of several ranks (``ranks.distributed``) commands wait for the ranks to agree on them
(``nissa.control.agreement``): at the first step and at the end of every epoch the runtime takes
what its processor holds to the exchange, applies what the ranks agreed on at that step, and tells
the observers of each round (the straggler check) every rank's step time.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol

from leyline import AnyPayload, Command, DebugRequest, ProfileRequest, RunFinished, Severity, TelemetryLevel
from nissa.control import PROFILE_UNAVAILABLE, CommandProcessor, DebugHandler, LevelController, UnavailableHandler
from nissa.control.agreement import Agreement, ControlRound, DisagreedStep, StepTimer
from nissa.hub import DeliveryReport, HubConfig, NissaHub
from ranks import RankError, Ranks

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class RuntimeConfig:
    """What a run's runtime needs: its hub and its starting telemetry level."""

    hub: HubConfig
    """Log, server and delivery settings of the run's hub."""
    level: TelemetryLevel = TelemetryLevel.NORMAL
    """Telemetry level outside DEBUG windows."""
    ranks: Ranks = field(default_factory=Ranks.single)
    """The run's ranks (alone: rank 0 of 1)."""
    agree: bool = True
    """With several ranks, apply commands only where the ranks agreed on them (off: each rank applies
    what it receives at its own next step; for measuring what agreement costs, never for real runs)."""
    env_base: int = 0
    """Added to the env index of every event: rank r's envs are numbered from ``r * n_envs``, so that a
    run's env ids are unique across its ranks."""


class LoopHooks(Protocol):
    """What a loop that counts its own steps and epochs reports to its run (``Run.hooks``), instead of calling
    ``run.step()``: Esper's rounds of environments. Every method is cheap and never raises, but for one case: in a
    run of several ranks the ranks meet at the first step boundary and at every ``epoch_end``, and a rank that
    died makes that meeting raise (``ranks.RankError``). A run's hooks also open a debug window from inside the
    run (``escalate``, auto-escalation); a loop's null hooks need not."""

    @property
    def level(self) -> TelemetryLevel:
        """The telemetry level now (DEBUG inside a debug window)."""
        ...

    @property
    def epoch(self) -> int:
        """The epoch last reported."""
        ...

    def emit(self, payload: AnyPayload, *, env: int | None = None, severity: Severity | None = None) -> None:
        """Send one event, stamped with the step and epoch last reported; never blocks."""
        ...

    def step_boundary(self, step: int, epoch: int) -> None:
        """Between two steps: the only place commands apply."""
        ...

    def epoch_end(self, epoch: int) -> None:
        """``epoch`` ended."""
        ...

    def update_begin(self, round_: int) -> None:
        """An update phase (a profile window of target ``update`` records it) begins."""
        ...

    def update_end(self, round_: int) -> None:
        """That update ended."""
        ...


class Runtime:
    """``LoopHooks`` over a hub: stamps step and epoch, applies commands at step boundaries."""

    def __init__(self, hub: NissaHub, level: TelemetryLevel, ranks: Ranks | None = None, *, agree: bool = True,
                 env_base: int = 0) -> None:
        self.hub = hub
        self.ranks = ranks or Ranks.single()
        self._step = 0
        self._epoch = 0
        self._env_base = env_base
        self.levels = LevelController(level, self.emit)
        agreed = agree and self.ranks.distributed
        self.agreement = Agreement(self.ranks) if agreed else None
        self.step_timer = StepTimer()
        """This rank's mean time between step boundaries, sent in each exchange (the straggler check reads it)."""
        self._round_observers: list[Callable[[ControlRound], None]] = []
        self._first_step: list[Callable[[], None]] = []
        self.commands = CommandProcessor(self.emit, hub.poll_commands, agreed=agreed)
        self.commands.register(DebugRequest, DebugHandler(self.levels))
        self.commands.register(ProfileRequest, UnavailableHandler(PROFILE_UNAVAILABLE))

    @property
    def run_id(self) -> str:
        return self.hub.config.run_id

    @property
    def level(self) -> TelemetryLevel:
        return self.levels.level

    @property
    def step(self) -> int:
        return self._step

    @property
    def epoch(self) -> int:
        return self._epoch

    def emit(self, payload: AnyPayload, *, env: int | None = None, severity: Severity | None = None) -> None:
        if env is not None:
            env += self._env_base
        self.hub.emit(payload, step=self._step, epoch=self._epoch, env=env, severity=severity)

    def step_boundary(self, step: int, epoch: int) -> None:
        if self._first_step:
            observers, self._first_step = self._first_step, []
            for observer in observers:
                observer()
        self._step = step
        self._epoch = epoch
        self.step_timer.tick()
        self.hub.mark_position(step, epoch)
        if self.agreement is not None and self.agreement.rounds == 0:
            self._agree(step, epoch)  # the run's first step: what was asked before it (--profile) applies
        self.commands.step_boundary(step, epoch)

    def epoch_end(self, epoch: int) -> None:
        self._epoch = epoch
        self.commands.epoch_end(epoch)
        if self.agreement is not None:
            self._agree(self._step, epoch + 1)  # applied as of the next epoch: a debug window counts it first

    def on_first_step(self, observer: Callable[[], None]) -> None:
        """Call ``observer`` at the run's first step boundary, before anything of that step (by then a loop has set
        its hooks: a sweep's probe reads them there)."""
        self._first_step.append(observer)

    def on_round(self, observer: Callable[[ControlRound], None]) -> None:
        """Call ``observer`` with every round the ranks agree on (never, alone)."""
        self._round_observers.append(observer)

    def _agree(self, step: int, epoch: int) -> None:
        """Meet the other ranks; raises ``RankError`` if one is gone (the run cannot go on without it)."""
        assert self.agreement is not None
        agreed = self.agreement.exchange(step, self.commands.take_held(), self.step_timer.take())
        self.commands.apply_agreed(agreed.commands, step, epoch)
        for observer in self._round_observers:
            observer(agreed)

    def settle_collectives(self) -> None:
        """Let the ranks' exchange in flight finish (``Agreement.settle``); nothing alone."""
        if self.agreement is not None:
            self.agreement.settle()

    def _drain(self) -> list[Command]:
        """Read the ranks' last exchange, still in flight: its commands came too late to apply."""
        assert self.agreement is not None
        try:
            return self.agreement.drain()
        except (RankError, DisagreedStep) as err:
            logger.warning("the ranks' last exchange failed: %s", err)
            return []

    def update_begin(self, round_: int) -> None:
        self.commands.update_begin(round_)

    def update_end(self, round_: int) -> None:
        self.commands.update_end(round_)

    def control_state(self) -> dict[str, object]:
        """The telemetry level and the open DEBUG windows, for a checkpoint."""
        return {"level": self.levels.base.value, "windows": self.levels.open_windows()}

    def resume_at(self, step: int, epoch: int, control: dict[str, object], announce: AnyPayload) -> None:
        """Go on from a checkpoint: its position (``announce``, the ``run_resumed`` event, stamped with it),
        its telemetry level, and its windows opened again for what was left of them (new commands: the
        old ones died with the process that held them)."""
        self._step, self._epoch = step, epoch
        self.hub.mark_position(step, epoch)
        self.emit(announce)
        level = TelemetryLevel(str(control["level"]))
        if level is not self.levels.base:
            self.levels.set_base(level, reason="resumed")
        if not self.ranks.is_main:  # rank 0 reopens the windows; the ranks' agreement brings them here
            return
        windows = control["windows"]
        if not isinstance(windows, list):
            raise TypeError(f"resume: the control state's windows must be a list, got {type(windows).__name__}")
        for window in windows:
            epochs = window["epochs"] or None
            if epochs is not None or window["through_update"]:
                self.escalate(epochs=epochs, through_update=bool(window["through_update"]),
                              reason=f"resumed: window {window['key']}")

    def escalate(self, *, epochs: int | None = None, through_update: bool = False, reason: str = "auto") -> str:
        """Open a DEBUG window from inside the run (auto-escalation), through the command path: a
        ``DebugRequest``, checked as the server checks one (``ValueError`` says why not)."""
        return self.commands.issue(DebugRequest(run_id=self.run_id, epochs=epochs, through_update=through_update,
                                                reason=reason))

    def finish(self, summary: RunFinished, timeout: float = 10.0) -> DeliveryReport:
        """End the run: close open windows, emit ``run_finished`` last, close the hub within ``timeout``."""
        late = self._drain() if self.agreement is not None else []
        self.commands.run_end(summary.status, unapplied=late)
        self.hub.flush(min(1.0, timeout / 4), delivered=False)  # drop reports and health land before run_finished
        self.emit(summary, severity=Severity.ERROR if summary.status == "failed" else None)
        return self.hub.close(timeout)


def build_runtime(config: RuntimeConfig) -> Runtime:
    """A started hub with run control wired to it."""
    return Runtime(NissaHub(config.hub).start(), config.level, config.ranks, agree=config.agree,
                   env_base=config.env_base)
