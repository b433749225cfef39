"""The run view of a plain loop's run (the nissa client, no Esper kinds) in its own words, through a real
server: its header says step, epoch (when it has its own), steps/s and its headline metrics, never Esper's
rounds or env-epochs; its profile form offers its own phases, its debug form no PPO update; its stop
confirmation fits at 100x30 and speaks of any loop, not of esper-train."""

from __future__ import annotations

from textual.containers import Vertical
from textual.geometry import Region
from textual.widgets import Checkbox, Label

import nissa
from leyline import CommandAction
from tests.support.server import running_server
from tests.tui.live_console import console, until
from tui.screens.forms import ConfirmStop, EscalateForm
from tui.screens.run_view import RunViewScreen
from tui.widgets.header import RunHeader


async def open_run(pilot, app, run_id: str) -> RunViewScreen:
    await until(pilot, lambda: run_id in getattr(app.screen, "runs", {}), "run listed")
    await pilot.press("enter")
    return await until(pilot, lambda: isinstance(app.screen, RunViewScreen) and app.screen, "run view")


async def test_a_plain_runs_header_speaks_its_own_language(tmp_path):
    with running_server(tmp_path) as url:
        run = nissa.init(server=url, run_name="plain", log_dir=tmp_path / "runs", steps_per_epoch=2,
                         summary={"val_acc": "max"}, system_metrics=False)
        try:
            for i in range(4):
                run.step()
                run.log({"loss": 1.0 / (i + 1), "lr": 0.1, "val_acc": 0.5 + i / 10})
            run.runtime.hub.flush(10)
            app = console(url)
            async with app.run_test(size=(100, 30)) as pilot:
                view = await open_run(pilot, app, run.run_id)
                header = view.query_one(RunHeader)
                await until(pilot, lambda: "val_acc 0.8" in str(header.render()), "its headline metrics")
                text = str(header.render())
                assert "step 3   epoch 1   " in text  # steps 0 to 3, the loop's own and "steps/s" in text
                # Its summary's metric first, then the first it logged, each its last value.
                assert "val_acc 0.8   loss 0.25   lr 0.1" in text
                assert "round" not in text and "env-epochs/s" not in text and "telemetry" not in text
        finally:
            run.finish()


def drawn(widget) -> str:
    """What a widget draws at its size now: text cut by its size is not there."""
    return "\n".join(strip.text for strip in widget.render_lines(Region(0, 0, *widget.size)))


async def test_a_plain_runs_profile_form_lists_its_phases_and_the_stop_dialog_fits(tmp_path):
    with running_server(tmp_path) as url:
        run = nissa.init(server=url, run_name="plain", log_dir=tmp_path / "runs", phases=["validate"],
                         system_metrics=False)
        try:
            run.step()
            run.log({"loss": 0.5})
            run.runtime.hub.flush(10)
            app = console(url)
            async with app.run_test(size=(100, 30)) as pilot:
                view = await open_run(pilot, app, run.run_id)
                await until(pilot, lambda: view.state.phases == ["validate"], "its phases")
                await pilot.press("p")
                form = await until(pilot, lambda: isinstance(app.screen, EscalateForm) and app.screen, "form")
                labels = [str(box.label) for box in form.query(".phase").results(Checkbox)]
                assert labels == ["the next 'validate' phase instead of batches"]
                assert not any("PPO" in str(box.label) for box in form.query(Checkbox).results(Checkbox))
                await pilot.click(".phase")
                await until(pilot, lambda: form.query_one(".phase", Checkbox).value, "box ticked")
                await pilot.click("#ok")
                await until(pilot, lambda: any(c.action is CommandAction.PROFILE for c in view.state.commands.values()),
                            "the profile window over its phase requested")
                await until(pilot, lambda: app.screen is view, "back")

                await pilot.press("S")
                dialog = await until(pilot, lambda: isinstance(app.screen, ConfirmStop) and app.screen, "dialog")
                await pilot.pause()
                box = dialog.query_one(Vertical).content_region
                for widget in dialog.query("Label, Button"):  # each whole within the dialog: no text cut
                    assert box.contains_region(widget.region), (widget, widget.region, box)
                text = " ".join(" ".join(drawn(label) for label in dialog.query(Label).results(Label)).split())
                assert "the run ends 'stopped'." in text and "esper-train" not in text, text
                await pilot.press("n")
                await until(pilot, lambda: app.screen is view, "back")

                await pilot.press("D")  # a debug window: of epochs; no PPO update to wait for
                form = await until(pilot, lambda: isinstance(app.screen, EscalateForm) and app.screen, "debug form")
                await pilot.pause()
                texts = [drawn(w) for w in form.query("Label, Checkbox")]
                assert texts and not any("PPO" in t for t in texts), texts
                await pilot.press("escape")
        finally:
            run.finish()


async def test_a_loop_without_epochs_is_spoken_of_in_steps_its_debug_window_too(tmp_path):
    # Every step ends an epoch (nissa.init's default): the header said "epoch 2812" and `d` "3 epochs", 3 steps.
    with running_server(tmp_path) as url:
        run = nissa.init(server=url, run_name="steps", log_dir=tmp_path / "runs", system_metrics=False)
        try:
            for i in range(6):
                run.step()
                run.log({"loss": 1.0 / (i + 1)})
            run.runtime.hub.flush(10)
            app = console(url)
            async with app.run_test(size=(100, 30)) as pilot:
                view = await open_run(pilot, app, run.run_id)
                header = view.query_one(RunHeader)
                await until(pilot, lambda: "step 5   " in str(header.render()), "its last step")
                assert "epoch" not in str(header.render()), str(header.render())
                notes: list[str] = []
                app.notify = lambda message, **kw: notes.append(str(message))  # type: ignore[method-assign]
                await pilot.press("d")
                await until(pilot, lambda: any("requested" in n for n in notes), "the window requested")
                assert "debug window of 3 steps requested" in notes[0] and "epoch" not in notes[0], notes
                for _ in range(3):  # the run reaches the boundaries where the window opens
                    run.step()
                    run.log({"loss": 0.1})
                run.runtime.hub.flush(10)
                await until(pilot, lambda: "DEBUG until" in str(header.render()), "the window open")
                text = str(header.render())
                assert "DEBUG until step " in text and "epoch" not in text, text
        finally:
            run.finish()
