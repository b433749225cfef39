"""What a viewer says before it steers a run, one text for the console and the web page (served with the page:
``GET /ui/steer.json``)."""

from __future__ import annotations

import msgspec

from leyline.calls import UPDATE_PHASE
from leyline.commands import TRAINER_COMMAND_PREFIXES

STOP_ESPER = ("It finishes the epoch in progress, writes a checkpoint and ends 'stopped'; "
              "esper-train --resume goes on from there.")
STOP_LOOP = ("At its next step the run is asked to stop (its on_stop function, if it has one, is called); "
             "the loop ends at its own pace and the run ends 'stopped'.")


def stop_effect(esper: bool) -> str:
    """What stopping does to a run: an Esper run checkpoints and can resume; a loop of its own stops its own way."""
    return STOP_ESPER if esper else STOP_LOOP


class SteerDefinitions(msgspec.Struct, kw_only=True, frozen=True):
    """The texts and names a page steering a run needs beside the commands' schema (``/openapi.json``)."""

    stop_esper: str = STOP_ESPER
    stop_loop: str = STOP_LOOP
    update_phase: str = UPDATE_PHASE
    """The phase a profile window of target ``update`` records when it names none (Esper's PPO update)."""
    trainer_prefixes: tuple[str, ...] = TRAINER_COMMAND_PREFIXES
    """Ids of commands a run gave itself (auto-escalation, ``--profile``): no one sent them."""
