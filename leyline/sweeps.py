"""Sweeps: a spec (what to search, how, for which metric), and what the server says of a sweep and its trials.

A sweep is a spec (``nissa sweep create SPEC.toml``), an object on the server (``POST /sweeps``) and agents
(``nissa sweep agent``) that lease its trials and run each as an ordinary run of the sweep's ``command``. The
spec decodes with ``msgspec.convert`` from TOML or JSON: a refusal names the key (``$.pbt.quantile``) and the
rule. Every bound here is what the server also holds a request to.
"""

from __future__ import annotations

import math
from typing import Annotated, Literal

import msgspec

from leyline.codec import in_words
from leyline.metrics import MetricName
from leyline.payloads import MAX_STEP, RunName
from leyline.summaries import Project
from leyline.text import NO_CONTROL_PATTERN

MAX_TRIALS = 1000
MAX_PARALLEL = 64
MAX_PARAMETERS = 32
MAX_VALUES = 64
MAX_ARGV = 64
MAX_ARG_CHARS = 512
MAX_CHOICE_CHARS = 128
MAX_STEPS = MAX_STEP

Method = Literal["grid", "random", "tpe", "pbt"]
Goal = Literal["minimize", "maximize"]
TrialStatus = Literal["queued", "running", "finished", "stopped", "pruned", "lost", "failed"]
SweepStatus = Literal["running", "finished", "stopped"]
ParamName = Annotated[str, msgspec.Meta(min_length=1, max_length=64, pattern=r"^[A-Za-z_][A-Za-z0-9_.]*$(?!\n)")]
Arg = Annotated[str, msgspec.Meta(max_length=MAX_ARG_CHARS, pattern=NO_CONTROL_PATTERN)]
"""An argument of the trial's program: refused with a control character, which U+FFFD in its place would change."""
Choice = float | int | Annotated[str, msgspec.Meta(max_length=MAX_CHOICE_CHARS, pattern=NO_CONTROL_PATTERN)] | bool
Value = float | int | str | bool
"""A trial's value of one parameter."""
SweepId = Annotated[str, msgspec.Meta(min_length=1, max_length=64, pattern=r"^[a-z0-9][a-z0-9-]*$(?!\n)")]
Steps = Annotated[int, msgspec.Meta(ge=1, le=MAX_STEPS)]
Fraction = Annotated[float, msgspec.Meta(gt=0.0, le=0.5)]
Probability = Annotated[float, msgspec.Meta(ge=0.0, le=1.0)]

FINISHED_TRIALS: frozenset[str] = frozenset({"finished", "stopped", "pruned", "lost", "failed"})
"""Trial statuses that are over (a trial ``lost`` of a grid or random sweep is queued again as a new trial)."""


class Parameter(msgspec.Struct, forbid_unknown_fields=True, omit_defaults=True):
    """One searched value: a range (``min``, ``max``, ``log``; ``type = "int"`` for whole numbers) or a list of
    ``values``."""

    min: int | float | None = None
    max: int | float | None = None
    log: bool = False
    values: Annotated[list[Choice], msgspec.Meta(min_length=1, max_length=MAX_VALUES)] | None = None
    type: Literal["float", "int"] | None = None
    """``int`` draws whole numbers; default: ``int`` when both bounds are written as integers."""

    def __post_init__(self) -> None:
        if self.values is not None:
            if self.min is not None or self.max is not None or self.log:
                raise ValueError("a parameter has either 'values' or 'min' and 'max', not both")
            if any(isinstance(v, float) and not math.isfinite(v) for v in self.values):
                raise ValueError("'values' must be finite numbers, strings or booleans")
            return
        if self.min is None or self.max is None:
            raise ValueError("a parameter needs 'min' and 'max' (a range) or 'values' (a list)")
        if not (math.isfinite(self.min) and math.isfinite(self.max)):
            raise ValueError("'min' and 'max' must be finite numbers")
        if self.min >= self.max:
            raise ValueError(f"'min' ({self.min}) must be below 'max' ({self.max})")
        if self.log and self.min <= 0:
            raise ValueError("a 'log' range needs 'min' > 0")
        if self.is_int and (self.min != int(self.min) or self.max != int(self.max)):
            raise ValueError("an 'int' parameter needs whole 'min' and 'max'")

    @property
    def is_int(self) -> bool:
        if self.type is not None:
            return self.type == "int"
        return isinstance(self.min, int) and isinstance(self.max, int)

    def clip(self, value: float) -> Value:
        """``value`` brought inside the range (rounded for an ``int`` parameter)."""
        assert self.min is not None and self.max is not None
        inside = min(max(value, self.min), self.max)
        return int(round(inside)) if self.is_int else float(inside)


class MetricGoal(msgspec.Struct, forbid_unknown_fields=True):
    """The metric a sweep ranks its trials by (as a trial's run logs it) and which way is better."""

    name: MetricName
    goal: Goal = "minimize"

    def better(self, a: float, b: float) -> bool:
        """``a`` is strictly better than ``b``."""
        return a < b if self.goal == "minimize" else a > b


class PbtSettings(msgspec.Struct, forbid_unknown_fields=True):
    """Population-based training in the trials' live processes."""

    interval: Steps = 10
    """Every ``interval`` steps of a trial, it is ranked in the population: in the bottom ``quantile`` it copies
    a trial of the top ``quantile`` (weights and values), then perturbs or resamples the values."""
    quantile: Fraction = 0.25
    perturb: tuple[float, float] = (0.8, 1.2)
    """Factors a copied numeric value is multiplied by (one of the two, at random)."""
    resample: Probability = 0.25
    """Chance that a value is drawn anew from its range instead of perturbed."""

    def __post_init__(self) -> None:
        if not all(math.isfinite(f) and 0 < f <= 100 for f in self.perturb):
            raise ValueError("'perturb' factors must be finite numbers in (0, 100]")


class EarlyStop(msgspec.Struct, forbid_unknown_fields=True):
    """Stop trials that do worse than their peers at the same step (Optuna's pruners)."""

    kind: Literal["asha", "median"] = "asha"
    min_steps: Steps = 1
    """No trial is stopped before this step."""
    reduction: Annotated[int, msgspec.Meta(ge=2, le=100)] = 3
    """ASHA's reduction factor: one in ``reduction`` trials goes on at each rung."""


class SweepSpec(msgspec.Struct, forbid_unknown_fields=True, omit_defaults=True):
    """A sweep as written in its TOML file (``POST /sweeps`` takes the same as JSON)."""

    name: Annotated[RunName, msgspec.Meta(min_length=1, pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]*$(?!\n)")]
    method: Method
    metric: MetricGoal
    command: Annotated[list[Arg], msgspec.Meta(min_length=1, max_length=MAX_ARGV)]
    """The trial's program as an argument list (no shell); its values reach it through ``nissa.init``."""
    parameters: Annotated[dict[ParamName, Parameter], msgspec.Meta(min_length=1, max_length=MAX_PARAMETERS)]
    project: Project = ""
    """Its trials' project (a run's, as ``PATCH /runs/{id}`` sets it)."""
    trials: Annotated[int, msgspec.Meta(ge=1, le=MAX_TRIALS)] = 10
    """How many trials in all (for ``pbt``: the population, trained side by side)."""
    parallel: Annotated[int, msgspec.Meta(ge=1, le=MAX_PARALLEL)] = 1
    """Trials running at once across every agent (``pbt``: at least ``trials``)."""
    pbt: PbtSettings | None = None
    early_stop: EarlyStop | None = None
    seed: Annotated[int, msgspec.Meta(ge=0, le=2**32 - 1)] = 0

    def __post_init__(self) -> None:
        if not self.command[0]:
            raise ValueError("'command' must be a list of arguments, the first the program")
        if self.method == "grid" and any(p.values is None for p in self.parameters.values()):
            names = [k for k, p in self.parameters.items() if p.values is None]
            raise ValueError(f"method 'grid' needs 'values' for every parameter (no list: {', '.join(names)})")
        if self.method == "pbt":
            if self.early_stop is not None:
                raise ValueError("method 'pbt' replaces its worst trials itself: it takes no 'early_stop'")
            if self.trials < 2:
                raise ValueError("method 'pbt' needs a population of at least 2 'trials'")
            if self.parallel < self.trials:
                raise ValueError(f"method 'pbt' trains its population side by side: 'parallel' ({self.parallel}) "
                                 f"must be at least 'trials' ({self.trials})")
        elif self.pbt is not None:
            raise ValueError(f"a '[pbt]' table belongs to method 'pbt', not {self.method!r}")

    @property
    def pbt_settings(self) -> PbtSettings:
        return self.pbt if self.pbt is not None else PbtSettings()

    @property
    def grid_size(self) -> int:
        """Points of the grid (``grid``), each run once."""
        size = 1
        for p in self.parameters.values():
            size *= len(p.values or ())
        return size

    @property
    def budget(self) -> int:
        """Trials the sweep runs in all (``grid``: at most its points)."""
        return min(self.trials, self.grid_size) if self.method == "grid" else self.trials


def decode_spec(data: object) -> SweepSpec:
    """A spec from decoded TOML or JSON; ``ValueError`` naming the key and the rule."""
    try:
        return msgspec.convert(data, SweepSpec, strict=True)
    except msgspec.ValidationError as err:
        raise ValueError(_named(in_words(err), data)) from None


def _named(message: str, data: object) -> str:
    """msgspec's message with ``$.parameters[...]`` made ``$.parameters.<the parameter at fault>``."""
    where = "`$.parameters[...]"
    params = data.get("parameters") if isinstance(data, dict) else None
    if where not in message or not isinstance(params, dict):
        return message
    for name, value in params.items():
        try:
            msgspec.convert(value, Parameter, strict=True)
        except msgspec.ValidationError:
            return message.replace(where, f"`$.parameters.{name}")
    return message


class Exploit(msgspec.Struct, kw_only=True, omit_defaults=True):
    """One exploit of a PBT trial: at ``step`` it copied ``source``'s weights and values, then explored."""

    step: int
    source_trial: int
    source_run_id: str
    before: dict[str, Value]
    after: dict[str, Value]
    at: float
    """When it was decided (unix seconds)."""
    status: Literal["pending", "applied", "failed"] = "pending"
    exploit_ms: float | None = None
    """From the source's checkpoint asked to the weights restored in the trial."""
    message: str = ""


class Trial(msgspec.Struct, kw_only=True, omit_defaults=True):
    """One trial of a sweep: an ordinary run with the trial's values as its config."""

    trial_id: int
    status: TrialStatus
    params: dict[str, Value]
    """The values now (PBT changes them as it explores)."""
    run_id: str | None = None
    metric: float | None = None
    """The metric's latest value as the run logged it."""
    best: float | None = None
    step: int | None = None
    """The step of ``metric``."""
    agent: str | None = None
    message: str = ""
    lineage: list[Exploit] = []


class SweepInfo(msgspec.Struct, kw_only=True):
    """``GET /sweeps/{sweep_id}``: the sweep, its trials and (PBT) their lineage."""

    sweep_id: str
    name: str
    project: str
    status: SweepStatus
    method: Method
    metric: MetricGoal
    spec: SweepSpec
    created_at: float
    trials: list[Trial] = []
    best_trial: int | None = None
    message: str = ""


class SweepCreated(msgspec.Struct, kw_only=True):
    """``POST /sweeps``' answer."""

    sweep_id: str
    status: SweepStatus


class Lease(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    """``POST /sweeps/{id}/lease``: an agent with room for ``slots`` more trials, and those it still runs."""

    agent: Annotated[str, msgspec.Meta(min_length=1, max_length=200, pattern=r"^[A-Za-z0-9._:@-]+$(?!\n)")]
    slots: Annotated[int, msgspec.Meta(ge=0, le=MAX_PARALLEL)] = 0
    running: Annotated[list[int], msgspec.Meta(max_length=MAX_PARALLEL)] = []
    """Trials this agent's processes still run: their leases are renewed."""
    exited: Annotated[dict[Annotated[str, msgspec.Meta(pattern=r"^[0-9]{1,9}$")], int],
                      msgspec.Meta(max_length=MAX_PARALLEL)] = {}
    """Trials whose process ended since the last lease, with the exit code (keys: trial ids)."""


class LeasedTrial(msgspec.Struct, kw_only=True):
    """A trial handed to an agent: run it as ``run_id`` with ``params``."""

    trial_id: int
    run_id: str
    params: dict[str, Value]


class LeaseGranted(msgspec.Struct, kw_only=True):
    """What an agent is to run now; ``done``: the sweep needs no more of this agent, it may exit once its
    processes have."""

    trials: list[LeasedTrial] = []
    stop: list[int] = []
    """Trials this agent runs that the sweep ended (stopped, pruned, lost): end their processes."""
    lease_s: float = 30.0
    done: bool = False
    method: Method = "random"
    command: list[str] = []
    """The sweep's command, run once per trial."""
    name: str = ""
    project: str = ""


def trial_run_id(sweep_id: str, trial_id: int) -> str:
    """A trial's run id, fixed when it is leased (``<sweep id>-t<trial>``)."""
    return f"{sweep_id}-t{trial_id}"
