"""What an alert says about a run that stops talking: rules on a loop's own metrics, a lost run's alerts left
as last seen (not "resolved", not fired twice when the run comes back), an ended run's closed quietly."""

from __future__ import annotations

import msgspec

from leyline import EventKind, Metrics, RunFinished, make_event
from leyline.samples import SAMPLE_PAYLOADS
from nissa_server.alerts.engine import AlertEngine, Snapshot
from nissa_server.alerts.rules import parse_rules
from nissa_server.alerts.series_rules import Latest
from tests.support import IngestClient, running_server, wait_status
from tests.support.webhook import webhook_receiver

HIGH = {"name": "val high", "when": "threshold", "series": "val_loss", "above": 1.0}


def _engine(*rules: dict) -> AlertEngine:
    return AlertEngine(parse_rules({"rules": list(rules)}), silent_after_s=15.0)


def _snapshot(run_status: str, value: float | None) -> Snapshot:
    firing = [("a1", 7, "val high", "val_loss{rank=0}", None, None, 100.0, run_status)]
    series = [] if value is None else [Latest(7, "r", "r", "val_loss", "val_loss{rank=0}", value, 100.0)]
    return Snapshot(ranks=[], runs=[], anomalies=[], firing=firing, last_id=0, series=series)


def test_an_alert_that_named_the_stored_key_still_resolves_once_alerts_name_the_runs_keys():
    firing = [("a1", 7, "val high", "val_loss{rank=0}", None, None, 100.0, "live")]  # fired by an older version
    series = [Latest(7, "r", "r", "val_loss", "val_loss{rank=0}", 0.4, 100.0, shown="val_loss")]
    settled = _engine(HIGH).evaluate(Snapshot(ranks=[], runs=[], anomalies=[], firing=firing, last_id=0,
                                              series=series), now=310.0)
    assert [(a, why) for a, _, why in settled.resolved] == [("a1", "val_loss{rank=0} = 0.4")]
    assert settled.firing == []


def test_a_rule_may_name_a_loops_own_metric():
    rule = parse_rules({"rules": [HIGH]}).rules[0]
    assert rule.series == "val_loss"


def test_a_lost_runs_alert_stays_as_last_seen_and_an_ended_runs_is_closed_not_resolved():
    engine = _engine(HIGH)
    lost = engine.evaluate(_snapshot("lost", None), now=200.0)
    assert (lost.resolved, lost.ended, lost.firing) == ([], [], [])
    back = engine.evaluate(_snapshot("live", 1.7), now=300.0)  # the run came back, still over: still the same alert
    assert back.resolved == [] and [f.subject for f in back.firing] == ["val_loss{rank=0}"]
    settled = engine.evaluate(_snapshot("live", 0.4), now=310.0)
    assert [(a, why) for a, _, why in settled.resolved] == [("a1", "val_loss{rank=0} = 0.4")]
    finished = engine.evaluate(_snapshot("finished", None), now=400.0)
    assert finished.resolved == [] and [(a, why) for a, _, why in finished.ended] == [("a1", "the run is finished")]


async def test_a_trainer_lost_and_back_gets_one_firing_and_one_resolved_notice(tmp_path):
    """SIGSTOP, then SIGCONT: the run goes lost and comes back while a loop's ``val_loss`` is over its rule."""
    gone = {"name": "gone", "when": "status", "status": ["lost"]}
    with webhook_receiver() as hook, running_server(
            tmp_path, lost_after_s=0.5, maintenance_interval_s=0.1,
            alert_rules=parse_rules({"destinations": {"hook": {"urls": [hook.url]}}, "rules": [HIGH, gone]})) as url:
        seq = 0

        async def send(trainer: IngestClient, payload) -> None:
            nonlocal seq
            seq += 1
            await trainer.send([make_event(payload, run_id="loop", seq=seq, ts=1.7e9 + seq, step=seq)])
            await trainer.wait_ack(seq)

        async with IngestClient(url, "loop") as trainer:
            await send(trainer, SAMPLE_PAYLOADS[EventKind.RUN_STARTED])
            await send(trainer, Metrics(values={"val_loss": 1.5}))
            hook.wait(lambda got: len(got) >= 1, timeout=30)
        await wait_status(url, "loop", "lost")
        hook.wait(lambda got: any(b["title"].startswith("[nissa] gone:") for b in got), timeout=30)
        async with IngestClient(url, "loop") as trainer:  # it resumes where it was
            await send(trainer, Metrics(values={"val_loss": 1.6}))
            await wait_status(url, "loop", "live")
            await send(trainer, Metrics(values={"val_loss": 0.5}))
            hook.wait(lambda got: any(b["title"].startswith("[nissa] resolved: val high") for b in got), timeout=30)
            await send(trainer, RunFinished(status="completed", duration_s=1.0))
    titles = [b["title"] for _, b in hook.posts if "val high" in b["title"]]
    assert titles == ["[nissa] val high: demo: val_loss", "[nissa] resolved: val high: demo: val_loss"]
    assert hook.posts[0][1]["message"].startswith("val_loss = 1.5, above 1")


def _cli_rules(*flags: str):
    from nissa_server import cli

    return cli.settings_from_args(cli.build_parser().parse_args(["--db", "n.db", *flags])).alert_rules


def test_the_builtin_rules_apply_unless_turned_off_or_replaced_by_name(tmp_path):
    rules = _cli_rules()
    assert [(r.name, r.when, r.builtin) for r in rules.rules] == [("hung", "hang", True),
                                                                    ("run in trouble", "status", True)]
    assert rules.targets(rules.rules[0]) == [] and rules.rules[1].statuses == ("lost", "failed", "degraded")
    assert _cli_rules("--no-default-alerts").rules == ()
    own = tmp_path / "alerts.toml"
    own.write_text('[destinations.ops]\nurls = ["json://127.0.0.1:9/x"]\n\n'
                   '[[rules]]\nname = "hung"\nwhen = "hang"\nafter_s = 60\n')
    replaced = _cli_rules("--alerts", str(own))
    assert [(r.name, r.after_s if r.when == "hang" else None, r.builtin) for r in replaced.rules] == [
        ("hung", 60.0, False), ("run in trouble", None, True)]
    assert [d.name for d in replaced.targets(replaced.rules[0])] == ["ops"] and not replaced.targets(replaced.rules[1])
    assert [r.name for r in _cli_rules("--alerts", str(own), "--no-default-alerts").rules] == ["hung"]


async def test_a_server_with_no_alerts_file_says_a_run_is_lost_in_alerts_and_in_the_console(tmp_path):
    import httpx

    from leyline import decode_event
    from tests.support import ingest_events, start_server_process, stop_process
    from tui.alerts import AlertTracker

    proc, url = start_server_process(tmp_path / "n.db", extra_args=("--lost-after", "1"))
    try:
        await ingest_events(url, [make_event(SAMPLE_PAYLOADS[EventKind.RUN_STARTED], run_id="quiet", seq=1,
                                             ts=1.7e9, step=0)])
        await wait_status(url, "quiet", "lost")
        async with httpx.AsyncClient(base_url=url, timeout=30) as http:
            rules = (await http.get("/alerts/rules")).json()
            assert rules["source"] == "built-in rules" and rules["destinations"] == []
            assert [(r["name"], r.get("builtin")) for r in rules["rules"]] == [("hung", True), ("run in trouble", True)]

            async def alerted() -> list:
                return (await http.get("/alerts", params={"status": "firing"})).json()

            from tests.support import async_wait_for
            await async_wait_for(alerted, timeout=30, message="the lost run's alert")
            (alert,) = await alerted()
            assert (alert["rule"], alert["run_id"], alert["subject"]) == ("run in trouble", "quiet", "lost")
            assert alert["deliveries"] == []
            events = (await http.get("/runs/quiet/events", params={"kind": "alert", "rank": -1})).content
    finally:
        stop_process(proc)
    tracker = AlertTracker()
    for body in msgspec.json.decode(events, type=list[msgspec.Raw]):
        tracker.apply(decode_event(bytes(body)))
    assert tracker.banner().startswith("ALERT run in trouble: run demo is lost")
