"""This process as a sweep's trial: what its agent put in ``$NISSA_SWEEP_TRIAL`` (``nissa.env``), and what
``nissa.init`` takes from it: the run id the server leased, the trial's values over the loop's own config,
the sweep's project and group, and the sweep's id as a tag."""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING

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


def current() -> TrialSettings | None:
    """The trial this process runs (None: it is no sweep's trial). A malformed variable is a ``ValueError``."""
    text = env.sweep_trial()
    if text is None:
        return None
    try:
        return msgspec.json.decode(text, type=TrialSettings)
    except msgspec.DecodeError as err:
        raise ValueError(f"${env.SWEEP_TRIAL} is not a sweep trial's settings: {err}") from None


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


def missing_hooks(*, checkpoint: bool, restore: bool) -> str | None:
    """Why this process cannot be its sweep's trial (None: it can): a ``pbt`` trial shares its weights
    (``on_checkpoint``) and loads another's (``on_restore``); other methods need neither."""
    trial = current()
    if trial is None or trial.method != "pbt" or (checkpoint and restore):
        return None
    absent = [name for name, has in (("run.on_checkpoint", checkpoint), ("run.on_restore", restore)) if not has]
    return (f"this loop is a trial of pbt sweep {trial.sweep_id}, which copies weights between trials: it needs "
            f"{' and '.join(absent)} (grid, random and tpe sweeps need neither)")
