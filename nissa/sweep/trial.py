"""This process as a sweep's trial: what its agent put in ``$NISSA_SWEEP_TRIAL`` (``nissa.env``), and what
``nissa.init`` takes from it: the run id the server leased, the trial's values over the loop's own config,
the sweep's project and group, and the sweep's id as a tag."""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, TypeVar

import msgspec

from leyline.sweeps import Method, Value
from nissa import env

if TYPE_CHECKING:
    from nissa.settings import Settings


class TrialSettings(msgspec.Struct, forbid_unknown_fields=True):
    sweep_id: str
    trial_id: int
    run_id: str
    params: dict[str, Value]
    project: str = ""
    group: str = ""
    method: Method = "random"


S = TypeVar("S", bound=msgspec.Struct)


def from_variable(text: str | None, kind: type[S], variable: str) -> S | None:
    """What an agent or a probe put in ``variable`` (its value ``text``; None: unset). Malformed: a ``ValueError``
    naming the variable."""
    if text is None:
        return None
    try:
        return msgspec.json.decode(text, type=kind)
    except msgspec.DecodeError as err:
        raise ValueError(f"${variable} is not what nissa sets there: {err}") from None


def current() -> TrialSettings | None:
    """The trial this process runs (None: it is no sweep's trial). A malformed variable is a ``ValueError``."""
    return from_variable(env.sweep_trial(), TrialSettings, env.SWEEP_TRIAL)


def applied(settings: Settings) -> Settings:
    """``settings`` as a trial runs them: the run id its agent leased, its name, the sweep's project and group,
    the sweep's id among its tags, its config with the trial's values over the loop's defaults (unchanged
    outside a sweep)."""
    trial = current()
    if trial is None:
        return settings
    return dataclasses.replace(
        settings, run_id=trial.run_id, run_name=f"{trial.group or trial.sweep_id}-t{trial.trial_id}",
        config={**dict(settings.config or {}), **trial.params}, project=trial.project, group=trial.group,
        tags=[*(settings.tags or ()), trial.sweep_id])


class Steering(msgspec.Struct, forbid_unknown_fields=True):
    """Which of a sweep's hooks a loop set (``Run.steering``): what a ``pbt`` sweep needs of it. ``nissa sweep
    create``'s probe reads it back from the probed process as JSON."""

    on_checkpoint: bool
    on_restore: bool
    on_hparams: bool


PBT_HOOKS = (("on_checkpoint", "saves a top trial's weights to share them"),
             ("on_restore", "loads them into a bottom trial"),
             ("on_hparams", "takes the values copied with them, perturbed"))
"""The hooks a ``pbt`` sweep's trial needs, and what each does for it."""


def pbt_lacks(steering: Steering) -> str | None:
    """Why a loop that set ``steering`` cannot be a ``pbt`` sweep's trial, in words (None: it can): the one rule
    of ``nissa sweep create``'s probe and of a trial's own start."""
    absent = [f"run.{name}" for name, _ in PBT_HOOKS if not getattr(steering, name)]
    if not absent:
        return None
    return (f"it sets no {' and no '.join(absent)}, which a pbt sweep needs: it copies weights between its trials "
            f"in their live processes ({'; '.join(f'run.{name} {does}' for name, does in PBT_HOOKS)}); grid, "
            "random and tpe sweeps, early stopping included, need none of them")


def missing_hooks(steering: Steering) -> str | None:
    """Why this process cannot be its sweep's trial (None: it can, or it is no ``pbt`` sweep's trial)."""
    trial = current()
    if trial is None or trial.method != "pbt" or (why := pbt_lacks(steering)) is None:
        return None
    return f"this loop is a trial of pbt sweep {trial.sweep_id}: {why}"
