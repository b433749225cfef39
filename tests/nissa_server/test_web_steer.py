"""Steering a real plain loop (examples/plain_loop.py on ``nissa.init``, a subprocess) from its web page in
Chromium: each built-in action and the loop's own command sent from its form and seen completed on the page, a
body the schema refuses kept from the server, the server's own 422 shown as it said it, a profile window's table
(the console's figures) and a stacks answer opened from their entries, a stop through its confirmation; and the
same page on a server with a token: refused in words without it, steering with it; an Esper run's panels, the
console's."""

from __future__ import annotations

import json
import pathlib
import subprocess
import sys
import time

import httpx
import msgspec
import pytest

from leyline import (
    CommandAction,
    CommandStatus,
    CommandStatusChanged,
    ProfileCompleted,
    RunFinished,
    TelemetryLevel,
    TelemetryLevelChanged,
    decode_events,
)
from leyline.esper import EpochCompleted, SeedGerminated, SeedStage, SlotSnapshot
from leyline.esper.panels import PPO_FIGURES
from leyline.panels import ops_table
from leyline.steering import STOP_LOOP
from nissa_server.alerts.rules import AlertRules, with_builtin
from tests.support.waiting import wait_for
from tests.support.web import Feed, open_page
from tui.state import RunState
from tui.views import ppo_view

pytestmark = [pytest.mark.single_backend, pytest.mark.timeout(300)]  # a browser and a loop: 87 s seen, busy
EXAMPLE = pathlib.Path(__file__).resolve().parents[2] / "examples" / "plain_loop.py"
TOKEN = "s3cret-steer"
HOSTILE = '<img src=x onerror="document.title=1"><b>bold</b>'



def _loop(url, tmp_path, token=None):
    """The example loop, steps slow enough that it lives through the test (a stop ends it)."""
    args = [sys.executable, str(EXAMPLE), "--server", url, "--steps", "1000000", "--step-delay", "0.02",
            "--validate-every", "5", "--log-dir", str(tmp_path / "runs"), *(["--token", token] if token else [])]
    proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    line = proc.stdout.readline()
    assert line.startswith("run id: "), (line, proc.stderr.read() if proc.poll() is not None else "")
    return proc, line.removeprefix("run id: ").strip()


def _declared(url, run_id, token=None):
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    return wait_for(lambda: httpx.get(f"{url}/runs/{run_id}", headers=headers, timeout=10).json().get("commands"),
                    60, message="the run's declared commands")


def _send(page, form, **fields):
    for name, value in fields.items():
        field = page.locator(f'{form} [name="{name}"]')
        if isinstance(value, bool):
            field.set_checked(value)
        elif field.evaluate("e => e.tagName") == "SELECT":
            field.select_option(value)
        else:
            field.fill(str(value))
    page.click(f'{form} button[type="submit"]')


def _done(page, action, status="completed", timeout=60_000):
    row = f'#commands tr[data-action="{action}"][data-status="{status}"]'
    try:
        page.wait_for_selector(row, timeout=timeout)
    except Exception:  # noqa: BLE001 - say what the page showed instead
        raise AssertionError(page.locator("#commands").inner_text()) from None
    return page.locator(row).first


def test_a_plain_loop_steered_from_its_page(browser, server_url, tmp_path):
    proc, run_id = _loop(server_url, tmp_path)
    try:
        _declared(server_url, run_id)
        page, outside, errors = open_page(browser, server_url)
        page.goto(f"{server_url}/ui#run={run_id}")
        page.wait_for_selector('#steer[data-ready="1"]')
        for action in ("debug", "profile", "checkpoint", "stop", "stacks"):
            assert page.locator(f'form[data-action="{action}"] button[type="submit"]').is_enabled()
        # A loop of its own has no PPO update to debug through; its one phase is what a profile may target.
        assert page.locator('form[data-action="debug"] [name="through_update"]').count() == 0
        phases = page.locator('form[data-action="profile"] [name="phase"] option').all_text_contents()
        assert phases == ["—", "validate"]
        assert page.locator('form[data-command="set_lr"] [name="value"]').count() == 1

        # What the schema refuses never leaves the page, and says why.
        _send(page, 'form[data-action="debug"]')
        assert "needs one of: N epochs" in page.locator('form[data-action="debug"] .refusal').text_content()
        # What only the server knows (the run has no phase 'update') comes back in its own words.
        _send(page, 'form[data-action="profile"]', target="update")
        refusal = page.locator('form[data-action="profile"] .refusal')
        page.wait_for_function("e => e.textContent.includes('422')", arg=refusal.element_handle())
        assert "this run has no phase 'update' (its phases: validate)" in refusal.text_content()
        assert httpx.get(f"{server_url}/runs/{run_id}/commands").json() == []

        _send(page, 'form[data-action="debug"]', epochs=2)
        _send(page, 'form[data-action="profile"]', target="", batches=2)
        _send(page, 'form[data-action="stacks"]')
        _send(page, 'form[data-command="set_lr"]', value=0.01)
        _send(page, 'form[data-action="checkpoint"]')
        assert "lr=0.01" in _done(page, "call").locator("td.result").text_content()
        checkpoint = _done(page, "checkpoint").locator("td.result").text_content()
        assert ".pt, " in checkpoint and "KiB" in checkpoint, checkpoint
        debug = _done(page, "debug")
        assert "applied @ step" in debug.locator("td.path").text_content()
        # The debug window's per-layer series, charted from its entry.
        layers = "debug_layer_stats.layers.grad_norm"
        wait_for(lambda: layers in {s["name"] for s in httpx.get(f"{server_url}/runs/{run_id}/series").json()}, 60,
                 message="the debug window's series")
        debug.locator("button.open-result").click()
        page.wait_for_selector(f'.chart[data-title="{layers}"][data-state="ready"]')
        assert layers in page.locator('#results [data-result="debug"]').text_content()

        # The profile window's table is the console's (leyline.panels.ops_table of the same event).
        _done(page, "profile").locator("button.open-result").click()
        page.wait_for_selector('#results [data-result="profile"] table.ops tbody tr')
        events = decode_events(httpx.get(f"{server_url}/runs/{run_id}/events?kind=profile_completed").content)
        expected = ops_table(next(e.payload for e in events if isinstance(e.payload, ProfileCompleted)).top_ops)
        shown = page.locator("#results table.ops").evaluate(
            "t => [...t.rows].map(r => [...r.cells].map(c => c.textContent))")
        assert shown == [expected.columns, *expected.rows]
        assert "open_trace_in_ui" in page.locator("#results code.open-with").text_content()

        # Every thread of the loop's one rank, the frame each is blocked in first.
        _done(page, "stacks").locator("button.open-result").click()
        rank = page.locator('#results [data-result="stacks"] .rank[data-rank="0"]')
        rank.wait_for()
        assert rank.locator("details.thread").count() >= 2
        assert any("File " in b for b in rank.locator("code.blocked").all_text_contents())
        assert "MainThread" in rank.text_content()
        artifact = rank.locator("a.artifact").get_attribute("href")  # the file, as the server keeps it
        assert artifact.startswith(f"/runs/{run_id}/artifacts/stacks")
        wait_for(lambda: httpx.get(server_url + artifact).status_code == 200, 60, message="the stacks artifact")
        assert "MainThread" in httpx.get(server_url + artifact).text

        # Stop asks first, saying what stopping does to this run; keeping it running sends nothing.
        page.click('form[data-action="stop"] button[type="submit"]')
        dialog = page.locator("dialog#stop-confirm")
        assert STOP_LOOP in dialog.text_content()
        dialog.locator('[data-answer="no"]').click()
        assert page.locator("dialog#stop-confirm").count() == 0
        assert not [c for c in httpx.get(f"{server_url}/runs/{run_id}/commands").json() if c["action"] == "stop"]
        page.click('form[data-action="stop"] button[type="submit"]')
        page.locator('dialog#stop-confirm [data-answer="yes"]').click()
        _done(page, "stop")
        assert proc.wait(timeout=120) == 0
        assert not outside and not errors, (outside, errors)
        page.close()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_a_server_with_a_token_steers_only_with_it(browser, tmp_path):
    from tests.support.server import running_server

    with running_server(tmp_path, token=TOKEN) as url:
        proc, run_id = _loop(url, tmp_path, TOKEN)
        try:
            _declared(url, run_id, TOKEN)
            page, outside, errors = open_page(browser, url)
            page.goto(f"{url}/ui#run={run_id}")
            page.wait_for_selector('#steer[data-ready="1"]')
            note = page.locator("#steer-note")
            assert "steers only with its token" in note.text_content()
            assert page.locator('form[data-action="checkpoint"] button[type="submit"]').is_disabled()
            page.fill("#token", "not-the-token")
            page.click("#auth button")
            page.wait_for_function("() => document.querySelector('#steer-note')?.textContent"
                                   ".includes('not this server')")
            assert page.locator('form[data-action="checkpoint"] button[type="submit"]').is_disabled()
            page.fill("#token", TOKEN)
            page.click("#auth button")
            page.wait_for_selector('#steer[data-ready="1"] form[data-action="checkpoint"] '
                                   'button[type="submit"]:enabled')
            assert page.locator("#steer-note").is_hidden()
            # The token stays in this tab's sessionStorage and goes in a header: never in a URL or a cookie.
            assert page.evaluate("sessionStorage.getItem('nissa-token')") == TOKEN
            assert page.context.cookies() == [] and TOKEN not in page.url
            _send(page, 'form[data-action="checkpoint"]')
            _done(page, "checkpoint")
            # A token that stops being the server's is refused in words, the page still watching.
            page.evaluate("sessionStorage.setItem('nissa-token', 'not-the-token')")
            _send(page, 'form[data-action="stacks"]')
            refusal = page.locator('form[data-action="stacks"] .refusal')
            page.wait_for_function("e => e.textContent.includes('401')", arg=refusal.element_handle())
            assert "missing or wrong bearer token" in refusal.text_content()
            assert "watches until it has the server's token" in refusal.text_content()
            assert not outside and not errors, (outside, errors)
            page.close()
        finally:
            proc.kill()
            proc.wait()


def test_an_esper_runs_panels_are_the_consoles(browser, server_url):
    seeds = [SlotSnapshot(slot="r0c0", stage=SeedStage.BLENDING, seed_id="s7", blueprint="conv", alpha=0.5,
                          contribution=0.021), SlotSnapshot(slot="r0c1")]
    with Feed(server_url, "esper-page") as feed:
        feed.start({"policy": "ppo", "telemetry_level": "normal"})
        feed.epochs(0, 6)
        feed.send([(SeedGerminated(slot="r0c0", seed_id="s7", blueprint="conv", params=90), 6, 1),
                   (SeedGerminated(slot="r0c1", seed_id="s8", blueprint=HOSTILE, params=9), 6, 1),
                   (CommandStatusChanged(command_id="auto-kl-1", action=CommandAction.DEBUG,
                                         status=CommandStatus.APPLIED, applied_step=64), 4, None),
                   (EpochCompleted(accuracy=0.61, val_loss=0.9, reward=0.2, action="WAIT", seeds=seeds), 6, 1),
                   (TelemetryLevelChanged(level=TelemetryLevel.DEBUG, previous=TelemetryLevel.NORMAL,
                                          until_epoch=9), 6, None)])
        events = decode_events(httpx.get(f"{server_url}/runs/esper-page/events").content)
        page, outside, errors = open_page(browser, server_url)
        page.goto(f"{server_url}/ui#run=esper-page")
        page.wait_for_selector('#esper[data-ready="1"]')
        # Esper's update is there to debug through and to profile; it declared no phases of its own.
        assert page.locator('form[data-action="debug"] [name="through_update"]').count() == 1
        assert page.locator('form[data-action="profile"] [name="target"]').count() == 1
        assert page.locator('form[data-action="profile"] [name="phase"]').count() == 0
        # The env grid: each env's accuracy, and the seed in each slot with its stage.
        page.wait_for_selector('#env-grid tr[data-env="1"] td[data-stage="BLENDING"]')
        assert "61.0%" in page.locator('#env-grid tr[data-env="1"]').text_content()
        assert page.locator("#env-grid tbody tr").count() == 2
        # The seed log says each decision as the console does (one definition), with its contribution.
        console = RunState("esper-page")
        console.apply_all(events)
        shown = page.locator("#seed-log tbody tr td:nth-child(5)").all_text_contents()
        assert shown == [t.what for t in reversed(console.timeline)] and "fossilized conv" in shown[-1]
        # PPO health: the console's figures, by the console's names; the level and its window.
        names = page.locator("#ppo-health td:first-child").all_text_contents()
        assert [s.name for s in ppo_view(console).series] == names[:len(PPO_FIGURES)]
        assert page.locator("#esper-level").text_content() == "telemetry DEBUG · until epoch 9"
        assert f"germinated {HOSTILE} (9 params)" in shown  # what a run wrote is text, never markup
        assert page.locator("#esper img, #esper b").count() == 0

        # The window the anomaly detector opened is in the run's commands; its mark on a chart opens its entry.
        auto = page.locator('#commands tr[data-command-id="auto-kl-1"]')
        assert "anomaly detector" in auto.text_content() and "applied @ step 64" in auto.text_content()
        page.wait_for_selector('.chart[data-title="accuracy"][data-state="ready"]')
        page.locator('.chart[data-title="accuracy"] canvas').scroll_into_view_if_needed()
        # The run's markers come by a read of their own, which may end after the chart is ready.
        page.wait_for_function('() => nissa.view.markers.some((m) => m.command_id === "auto-kl-1")')
        x, y = page.evaluate("""() => {
            const u = nissa.view.charts.find((c) => c.title === "accuracy").plot;
            const m = nissa.view.markers.find((m) => m.command_id === "auto-kl-1");
            const box = u.over.getBoundingClientRect();
            return [box.left + u.valToPos(m.step, "x"), box.top + box.height / 2];
        }""")
        page.mouse.move(x, y)
        page.mouse.click(x, y)
        page.wait_for_selector('#commands tr.picked[data-command-id="auto-kl-1"]')
        assert not outside and not errors, (outside, errors)
        page.close()


def test_runs_in_trouble_are_flagged_and_their_alerts_shown(browser, tmp_path):
    from tests.support.server import running_server

    now = time.time()  # the server's alert rules look at runs that ended lately
    with (running_server(tmp_path, alert_rules=with_builtin(AlertRules()), maintenance_interval_s=0.2) as server_url,
          Feed(server_url, "calm", ts=now) as calm, Feed(server_url, "troubled", ts=now) as troubled):
        calm.epochs(0, 2)
        troubled.epochs(0, 2)
        troubled.send([(RunFinished(status="failed", duration_s=3.0, error="CUDA error: out of memory"), 2, None)])
        page, outside, errors = open_page(browser, server_url)
        page.goto(f"{server_url}/ui")
        page.wait_for_selector('#runs tr.trouble[data-run-id="troubled"] span.trouble')
        assert "run in trouble" in page.locator('#runs tr[data-run-id="troubled"] span.trouble').text_content()
        assert page.locator('#runs tr[data-run-id="calm"].trouble').count() == 0
        page.click('#runs tr[data-run-id="troubled"] a')
        page.wait_for_selector("#run-alerts .alert")
        assert "run in trouble firing" in page.locator("#run-alerts").text_content()
        assert page.locator("#steer-forms form").count() == 0  # a finished run: nothing to steer
        assert "nothing to steer" in page.locator("#steer-note").text_content()
        assert not outside and not errors, (outside, errors)
        page.close()


BODIES = [
    {"action": "debug"}, {"action": "debug", "epochs": 3}, {"action": "debug", "epochs": 0},
    {"action": "debug", "epochs": 1001}, {"action": "debug", "through_update": True},
    {"action": "debug", "epochs": 2, "target": "update"},
    {"action": "profile", "batches": 5}, {"action": "profile", "target": "update"},
    {"action": "profile", "target": "update", "phase": "validate"},
    {"action": "profile", "target": "update", "batches": 2},
    {"action": "profile", "batches": 2, "phase": "validate"}, {"action": "profile", "batches": 501},
    {"action": "profile", "batches": 1, "record_shapes": True, "with_stack": True},
    {"action": "profile", "target": "update", "phase": "Validate"},
    {"action": "checkpoint"}, {"action": "checkpoint", "epochs": 1}, {"action": "stop", "reason": "x" * 501},
    {"action": "stop", "reason": "enough"}, {"action": "stacks"},
    {"action": "call", "name": "set_lr", "args": {"value": 0.1}}, {"action": "call", "name": "Set-LR"},
    {"action": "call"}, {"action": "debug", "epochs": 2, "run_id": "-x"},
    {"action": "hparams", "values": {"lr": 0.01, "opt.name": "adam"}}, {"action": "hparams", "values": {}},
    {"action": "hparams", "values": {"9lr": 1}}, {"action": "hparams", "values": {"lr": [1]}},
    {"action": "hparams", "values": {f"k{i}": i for i in range(65)}}, {"action": "hparams"},
    {"action": "restore", "source_run_id": "r-0", "artifact": "ckpt.pt"}, {"action": "restore", "source_run_id": "r-0"},
    {"action": "restore", "source_run_id": "r-0", "artifact": "../ckpt.pt", "values": {"lr": 1}},
]


def test_the_page_refuses_what_the_server_refuses(browser, server_url):
    """The page's checks are the schema's: for every body, refused on the page exactly where the server's decoder
    refuses it (the page sends nothing the schema refuses, and holds back nothing the server takes)."""
    from nissa_server.routes.commands import DECODER

    page, outside, errors = open_page(browser, server_url)
    page.goto(f"{server_url}/ui")
    page.wait_for_selector("#runs[data-ready]")
    bodies = [{"run_id": "r-1", **b} for b in BODIES]
    on_page = page.evaluate("""async (bodies) => {
        await commandSchema();
        return bodies.map((b) => schemaRefusal(componentOf(b.action), b));
    }""", bodies)
    for body, why in zip(bodies, on_page, strict=True):
        try:
            DECODER.decode(json.dumps(body))
            server = None
        except msgspec.ValidationError as err:
            server = str(err)
        assert (why is None) == (server is None), (body, why, server)
    assert sum(why is not None for why in on_page) >= 10
    # A map's field (hparams' values) is written as the console takes it.
    assert page.evaluate("namedValues('lr=0.01 opt.name=adam warm=true')") == {"lr": 0.01, "opt.name": "adam",
                                                                                "warm": True}
    assert not outside and not errors, (outside, errors)
    page.close()
