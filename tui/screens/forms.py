"""Small modal screens: the escalation form, the confirmation of a stop, and the key help."""

from __future__ import annotations

from rich.table import Table
from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.screen import ModalScreen
from textual.validation import Integer
from textual.widgets import Button, Checkbox, Input, Label, Static

from leyline import CommandAction, DebugRequest, ProfileRequest
from leyline.calls import UPDATE_PHASE
from leyline.commands import MAX_DEBUG_EPOCHS, MAX_PROFILE_BATCHES
from leyline.steering import stop_effect
from tui.safe_text import run_text

_FORM_CSS = """
EscalateForm, HelpScreen, ConfirmStop { align: center middle; }
EscalateForm > Vertical, HelpScreen > Vertical, ConfirmStop > Vertical {
    width: 64; height: auto; padding: 1 2; border: thick $accent; background: $surface;
}
EscalateForm Horizontal { height: auto; margin-top: 1; }
EscalateForm Button { margin-right: 2; }
EscalateForm #error { color: $error; height: auto; }
EscalateForm Checkbox { margin-top: 1; }
ConfirmStop Label { width: 100%; }
ConfirmStop Horizontal { height: auto; margin-top: 1; }
ConfirmStop Button { margin-right: 2; }
"""

THROUGH_UPDATE = "through the next PPO update"
PROFILE_UPDATE = "the next PPO update instead of batches"


RECORDING = (("record_shapes", "record input shapes"), ("with_stack", "record Python stacks (costly)"),
             ("profile_memory", "record memory (allocations)"))


class EscalateForm(ModalScreen[DebugRequest | ProfileRequest | None]):
    """Ask how long a debug (epochs) or profile (batches) window should be; dismisses with the request for
    the run ``run_id`` (the contract's own struct, sent as it is) or None.

    A debug window may instead (or also) last through the next PPO update; then the epochs may be
    left empty, as ``POST /escalate`` accepts ``through_update`` alone. A profile window may
    record the next PPO update instead (``"target": "update"``); then the batches are ignored.
    """

    DEFAULT_CSS = _FORM_CSS
    BINDINGS = [Binding("escape", "cancel", "cancel")]

    def __init__(self, run_id: str, action: CommandAction, default: int, *, phases: list[str] | None = None,
                 esper: bool = True) -> None:
        """``phases``: those the run declared (None: it did not say); ``esper``: its ``update`` is a PPO update."""
        super().__init__()
        self.run_id = run_id
        self.action = action
        self.default = default
        self.esper = esper
        self.phases = _profiled(phases, esper)
        self.unit, self.maximum = (
            ("epochs", MAX_DEBUG_EPOCHS) if action is CommandAction.DEBUG else ("batches", MAX_PROFILE_BATCHES)
        )

    @property
    def is_debug(self) -> bool:
        return self.action is CommandAction.DEBUG

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Label(f"[b]{self.action.value} window[/b]: how many {self.unit}? (1..{self.maximum})")
            yield Input(str(self.default), type="integer", id="amount",
                        validators=[Integer(minimum=1, maximum=self.maximum)])
            if self.is_debug and self.esper:  # a loop of its own has no PPO update to wait for
                yield Checkbox(THROUGH_UPDATE, id="through_update")
            for i, (phase, label) in enumerate(() if self.is_debug else self.phases):
                yield Checkbox(label, id="through_update" if phase is None else f"phase-{i}", classes="phase")
            if not self.is_debug:  # off by default: a window stays cheap unless asked for more
                for key, what in RECORDING:
                    yield Checkbox(what, id=key)
            yield Static("", id="error")
            with Horizontal():
                yield Button("Request", variant="primary", id="ok")
                yield Button("Cancel", id="cancel")

    def on_mount(self) -> None:
        self.query_one("#amount", Input).focus()

    def _ticked(self) -> bool:
        return any(box.value for box in self.query("#through_update, .phase").results(Checkbox))

    def _phase(self) -> str | None:
        boxes = list(self.query(".phase").results(Checkbox))
        return next((phase for box, (phase, _) in zip(boxes, self.phases, strict=True) if box.value), None)

    @on(Checkbox.Changed, "#through_update, .phase")
    def through_update_changed(self, event: Checkbox.Changed) -> None:
        if event.value:  # one phase at a time: ticking one unticks the others
            for box in self.query(".phase").results(Checkbox):
                if box is not event.checkbox:
                    box.value = False
        # With a box ticked an empty length is a valid answer: the window ends with the update (or phase).
        self.query_one("#amount", Input).valid_empty = self._ticked()
        self.query_one("#error", Static).update("")

    def _profile(self, batches: int | None) -> ProfileRequest:
        def ticked(key: str) -> bool:
            return self.query_one(f"#{key}", Checkbox).value

        update = batches is None
        return ProfileRequest(run_id=self.run_id, batches=batches, target="update" if update else None,
                              phase=self._phase() if update else None, record_shapes=ticked("record_shapes"),
                              with_stack=ticked("with_stack"), profile_memory=ticked("profile_memory"))

    def _submit(self) -> None:
        if not self.is_debug and self._ticked():
            self.dismiss(self._profile(None))
            return
        box = self.query_one("#amount", Input)
        value = box.value.strip()
        result = box.validate(value)
        if result is not None and not result.is_valid:
            why = "; ".join(result.failure_descriptions)
            if self.is_debug and not value:
                why = f"give 1..{self.maximum} epochs" + (f", or tick '{THROUGH_UPDATE}'" if self.esper else "")
            self.query_one("#error", Static).update(run_text(why, one_line=False))
            return
        amount = int(value) if value else None
        self.dismiss(DebugRequest(run_id=self.run_id, epochs=amount, through_update=self._ticked())
                     if self.is_debug else self._profile(amount))

    @on(Input.Submitted, "#amount")
    def submitted(self) -> None:
        self._submit()

    @on(Button.Pressed, "#ok")
    def ok(self) -> None:
        self._submit()

    @on(Button.Pressed, "#cancel")
    def action_cancel(self) -> None:
        self.dismiss(None)


def _profiled(phases: list[str] | None, esper: bool) -> tuple[tuple[str | None, Text], ...]:
    """(phase, label) of what a profile window may record instead of batches: the run's own phases, each by its
    name (None: the update, "the next PPO update" only on an Esper run); a run that said none: Esper's update."""
    if phases is None:
        return ((None, Text(PROFILE_UPDATE)),) if esper else ()
    out: list[tuple[str | None, Text]] = []
    for phase in phases:
        if phase == UPDATE_PHASE:
            label = Text(PROFILE_UPDATE) if esper else Text("the next 'update' phase instead of batches")
            out.append((None, label))
        else:
            out.append((phase, Text.assemble("the next '", run_text(phase), "' phase instead of batches")))
    return tuple(out)


HELP = (
    ("r", "run picker: choose a run (enter opens it; a finished run opens as a replay)"),
    ("s", "run picker: sort by a column chosen by name (again: reversed), on the server (or click a header)"),
    ("/", "run picker: filter with the server's language: project:P tag:T config.lr>=0.01 val_loss.best<0.4"),
    ("b m", "run picker: metric columns show the best or the last value; choose the metric columns"),
    ("u", "run picker: rows of groups (by group, project, a config key; mean ± SD); enter opens one, g charts it"),
    ("space c =", "run picker: select runs; overlay the selected runs' charts; diff the selected runs' configs"),
    ("e [ ]", "run picker: edit the run's group, tags and notes; previous / next page of runs"),
    ("S", "run picker: the sweeps; enter opens one: its trials and lineage, g its curves, x stops the trial under "
          "the cursor, X the sweep (each asking first)"),
    ("g", "charts: +/- zoom, ← → pan, 0 whole run, s smooth, b best-so-far, x x axis, l label, a add a series"),
    ("d", "debug window: telemetry goes to DEBUG for a few epochs, then back by itself"),
    ("D", "debug window of a length you choose (an Esper run: or through the next PPO update)"),
    ("p", "profile window: choose how many batches to profile, or the next of the run's phases (an Esper run: "
          "its PPO update), and shapes, stacks, memory"),
    ("t", "stacks: every thread's Python stack from every rank, now (even while training is stuck)"),
    ("a", "the run's alerts (a red banner says when one fires; a hung rank is marked in the ranks panel)"),
    ("c", "checkpoint the run at the end of the round in progress (its path and size when written)"),
    ("S", "stop the run, asking first: it ends 'stopped' (Esper: finishes the epoch, checkpoints; "
          "esper-train --resume)"),
    ("n", "next panel of the right column: PPO health, gradients, commands, profile (a short terminal)"),
    ("x", "call a command of the run's own (a loop on the nissa client: set_lr value=0.01)"),
    ("/", "filter the event log: words, !word, kind:ppo, sev:warning, env:2; esc clears"),
    ("← →", "replay: one event back / forward"),
    ("[ ]", "replay: one epoch back / forward"),
    ("home end", "replay: first / last event; space plays and pauses; click the bar to scrub"),
    ("?", "this help"),
    ("q", "quit"),
)


class ConfirmStop(ModalScreen[bool]):
    """Ask before stopping a run; dismisses with True only on an explicit yes."""

    DEFAULT_CSS = _FORM_CSS
    BINDINGS = [Binding("escape,n", "answer(False)", "no"), Binding("y", "answer(True)", "yes")]

    def __init__(self, run_id: str, *, esper: bool = True, what: str = "", effect: str = "") -> None:
        """``esper``: an Esper run (it checkpoints and resumes); else a loop of its own, which stops its own way.
        ``what``: something else to stop (``sweep lr-3f2a1c``), ``effect`` then its consequence."""
        super().__init__()
        self.run_id = run_id
        self.esper = esper
        self.what = what or f"run {run_id}"
        self.effect = effect or stop_effect(esper)

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Label(run_text(f"Stop {self.what}?", style="bold"))
            yield Label(run_text(self.effect, one_line=False))
            with Horizontal():
                yield Button(run_text(f"Stop the {self.what.split()[0]} (y)"), variant="error", id="yes")
                yield Button("Keep it running (n)", id="no")

    @on(Button.Pressed)
    def pressed(self, event: Button.Pressed) -> None:
        self.dismiss(event.button.id == "yes")

    def action_answer(self, yes: bool) -> None:
        self.dismiss(yes)


class HelpScreen(ModalScreen[None]):
    """Every key, one line each."""

    DEFAULT_CSS = _FORM_CSS + ("HelpScreen > Vertical { width: 96%; max-width: 124; max-height: 100%; "
                               "overflow-y: auto; }")
    BINDINGS = [Binding("escape,q,question_mark", "dismiss", "close")]

    def compose(self) -> ComposeResult:
        table = Table.grid(padding=(0, 2))
        table.add_column(style="bold cyan", no_wrap=True)
        table.add_column()
        for key, what in HELP:
            table.add_row(key, what)
        with Vertical():
            yield Label("[b]esper-watch keys[/b] (the mouse works too)")
            yield Static(table)
