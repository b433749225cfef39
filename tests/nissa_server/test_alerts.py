"""Alerts against a real webhook receiver on 127.0.0.1: status, anomaly and hang rules fire once per
condition and run, resolve with a "resolved", retry a failed delivery, and are stored and listed."""

from __future__ import annotations

import httpx
import pytest

from leyline import AnomalyDetected, Heartbeat, RunFinished, Severity, make_event
from leyline.esper import EsperKind
from nissa_server.alerts.rules import parse_rules
from tests.support import IngestClient, async_wait_for, events_for, ingest_events, running_server
from tests.support.webhook import webhook_receiver


def _rules(url: str, *rules: dict) -> object:
    return parse_rules({"destinations": {"hook": {"urls": [url]}}, "rules": list(rules)}, "alerts.toml")


def _fast(tmp_path, rules, **kw):
    return running_server(tmp_path, alert_rules=rules, maintenance_interval_s=0.2, **kw)


def _event(run_id: str, seq: int, payload, step: int, severity: Severity | None = None):
    return make_event(payload, run_id=run_id, seq=seq, ts=1.7e9 + seq, step=step, epoch=0, severity=severity)


async def test_an_anomaly_alert_is_sent_once_retried_and_resolved(tmp_path):
    with webhook_receiver(fail_first=1) as hook, _fast(tmp_path, _rules(
            hook.url, {"name": "bad", "when": "anomaly", "min_severity": "error", "quiet_s": 1.5},
            {"name": "ended", "when": "status", "status": ["finished"], "runs": "other-*"})) as url:
        run = "anom"
        await ingest_events(url, events_for(run, 3, started=True))
        spike = AnomalyDetected(anomaly="kl_spike", detail="approx KL 0.09 > 0.0225")
        await ingest_events(url, [_event(run, 4, spike, 4, Severity.ERROR), _event(run, 5, spike, 5, Severity.ERROR),
                                  _event(run, 6, spike, 6, Severity.WARNING),
                                  _event(run, 7, RunFinished(status="completed", duration_s=1.0), 7)])
        posts = hook.wait(lambda bodies: any("resolved" in b["title"] for b in bodies), timeout=40)
        titles = [b["title"] for _, b in posts]
        assert titles == ["[nissa] bad: demo: kl_spike", "[nissa] resolved: bad: demo: kl_spike"]
        assert posts[0][1]["type"] == "warning" and "approx KL" in posts[0][1]["message"]
        assert hook.refused == 1  # the first try failed and was retried
        async with httpx.AsyncClient(base_url=url) as http:
            (alert,) = (await http.get(f"/runs/{run}/alerts")).json()
            assert (alert["rule"], alert["status"], alert["subject"]) == ("bad", "resolved", "kl_spike")
            firing = [d for d in alert["deliveries"] if d["state"] == "firing"]
            assert firing == [{"destination": "hook/0", "state": "firing", "status": "sent", "attempts": 2,
                               "last_error": "", "sent_at": firing[0]["sent_at"]}]
            assert [a["alert_id"] for a in (await http.get("/alerts", params={"status": "resolved"})).json()] == [
                alert["alert_id"]]
            assert (await http.get("/alerts", params={"status": "firing"})).json() == []
            events = (await http.get(f"/runs/{run}/events", params={"kind": "alert", "rank": -1})).json()
            assert [e["payload"]["state"] for e in events] == ["firing", "resolved"]
            metrics = (await http.get("/metrics")).text
            assert 'nissa_alerts_fired_total{condition="anomaly",rule="bad"} 1.0' in metrics
            assert 'nissa_alert_deliveries_total{destination="hook",result="retry"} 1.0' in metrics
            assert 'nissa_alerts{status="resolved"} 1.0' in metrics
            rules = (await http.get("/alerts/rules")).json()
            assert [r["name"] for r in rules["rules"]] == ["bad", "ended"] and rules["rules"][1]["runs"] == "other-*"


async def test_a_rank_that_stops_advancing_while_its_heartbeats_go_on_is_hung(tmp_path):
    with webhook_receiver() as hook, _fast(tmp_path, _rules(hook.url, {"name": "stuck", "when": "hang",
                                                                       "after_s": 1.0})) as url:
        run = "hung"
        async with IngestClient(url, run) as trainer:
            await trainer.send(events_for(run, 1, started=True))
            seq = 1
            async def beat(step: int) -> None:
                nonlocal seq
                seq += 1
                await trainer.send([_event(run, seq, Heartbeat(uptime_s=seq), step)])

            async def fired() -> list:
                await beat(5)
                return hook.posts
            await async_wait_for(fired, timeout=30, interval=0.3, message="the hang alert at the webhook")
            command = await trainer.wait_command()  # the server asked the run for its stacks
            assert command.action.value == "stacks" and command.reason.startswith("alert stuck: rank 0")
            async with httpx.AsyncClient(base_url=url) as http:
                (alert,) = (await http.get("/alerts")).json()
                assert (alert["subject"], alert["rank"], alert["step"], alert["command_id"]) == (
                    "rank 0", 0, 5, command.command_id)
                assert hook.posts[0][1]["title"] == "[nissa] stuck: demo: rank 0"
                assert f"GET /commands/{command.command_id}" in hook.posts[0][1]["message"]
            await beat(6)
            hook.wait(lambda bodies: len(bodies) == 2, timeout=30)
            assert hook.posts[1][1]["title"] == "[nissa] resolved: stuck: demo: rank 0"
            async with httpx.AsyncClient(base_url=url) as http:
                assert (await http.get("/alerts")).json()[0]["status"] == "resolved"
                events = (await http.get(f"/runs/{run}/events", params={"kind": "alert", "rank": -1})).json()
                assert [e["payload"]["message"] for e in events][1] == "resolved: rank 0 advanced to step 6"


@pytest.mark.parametrize(("spec", "message"), [
    ({"rules": [{"name": "x", "when": "hung"}]},
     "alerts.toml: rules[0] ('x'): when: must be one of status, anomaly, hang, straggler, threshold, nan, stale, "
     "got 'hung'"),
    ({"rules": [{"name": "x", "when": "hang", "after_s": -1}]},
     "alerts.toml: rules[0] ('x'): after_s: must be a number of seconds in (0, 604800]"),
    ({"rules": [{"name": "x", "when": "status", "notify": ["pager"]}]},
     "alerts.toml: rules[0] ('x'): notify: no destination 'pager' (define [destinations.pager])"),
    ({"destinations": {"d": {"urls": ["nonsense://x"]}}},
     "alerts.toml: destination 'd': urls: nonsense:// is not a notification URL apprise knows (or it is malformed)"),
    ({"rules": [{"name": "x", "when": "anomaly", "after_s": 3}]},
     "alerts.toml: rules[0] ('x'): unknown field 'after_s' for when = 'anomaly'"),
    ({"rules": [{"name": "x", "when": "threshold", "series": "epoch_completed.accuracy"}]},
     "alerts.toml: rules[0] ('x'): below/above: a threshold rule needs 'below' or 'above' (or both)"),
    ({"rules": [{"name": "x", "when": "nan", "series": " "}]},
     "alerts.toml: rules[0] ('x'): series: must name a series, such as 'val_loss' or 'epoch_completed.accuracy' "
     "(with labels to narrow it: 'epoch_completed.accuracy{env=0}')"),
    ({"rules": [{"name": "x", "when": "nan", "series": "{env=0}"}]},
     "alerts.toml: rules[0] ('x'): series: '{env=0}' has labels but no name"),
])
def test_a_bad_rules_file_is_one_line_naming_the_rule_and_field(spec, message):
    from nissa_server.alerts.rules import RulesError

    with pytest.raises(RulesError) as caught:
        parse_rules(spec, "alerts.toml")
    assert str(caught.value) == message


async def test_series_rules_fire_on_a_threshold_a_nan_and_a_series_that_went_quiet(tmp_path):
    import msgspec

    from leyline import EventKind, GradientHealth
    from leyline.esper import PPOUpdate
    from leyline.samples import SAMPLE_PAYLOADS

    epoch, ppo = SAMPLE_PAYLOADS[EsperKind.EPOCH_COMPLETED], SAMPLE_PAYLOADS[EsperKind.PPO_UPDATE]
    grads = SAMPLE_PAYLOADS[EventKind.GRADIENT_HEALTH]
    assert isinstance(ppo, PPOUpdate) and isinstance(grads, GradientHealth)
    with webhook_receiver() as hook, _fast(tmp_path, _rules(
            hook.url, {"name": "low", "when": "threshold", "series": "epoch_completed.accuracy{env=1}", "below": 0.2},
            {"name": "nan", "when": "nan", "series": "gradient_health.global_norm{scope=policy}"},
            {"name": "quiet", "when": "stale", "series": "ppo_update.approx_kl", "after_s": 1.5})) as url:
        run = "curves"
        async with IngestClient(url, run) as trainer:
            seq = 0

            async def send(payload, env: int | None = None) -> None:
                nonlocal seq
                seq += 1
                await trainer.send([make_event(payload, run_id=run, seq=seq, ts=1.7e9 + seq, step=seq, epoch=0,
                                               env=env)])
            await send(SAMPLE_PAYLOADS[EventKind.RUN_STARTED])
            await send(msgspec.structs.replace(epoch, accuracy=0.1), env=0)  # another env: not this rule's
            await send(msgspec.structs.replace(epoch, accuracy=0.1), env=1)
            await send(msgspec.structs.replace(ppo, approx_kl=0.004))
            await send(msgspec.structs.replace(grads, scope="policy"))
            # The trainer reports a non-finite norm as null (JSON has no NaN) beside its other fields.
            await send(msgspec.structs.replace(grads, scope="policy", global_norm=None, nonfinite=3))
            bodies = [b for _, b in hook.wait(lambda got: len(got) >= 3, timeout=30)]
            assert sorted(b["title"] for b in bodies) == [
                "[nissa] low: demo: epoch_completed.accuracy{env=1}",
                "[nissa] nan: demo: gradient_health.global_norm{scope=policy}",
                "[nissa] quiet: demo: ppo_update.approx_kl"]
            messages = {b["title"].split(":")[0].removeprefix("[nissa] "): b["message"].splitlines()[0] for b in bodies}
            assert messages["low"] == "epoch_completed.accuracy{env=1} = 0.1, below 0.2"
            assert messages["nan"] == ("gradient_health.global_norm{scope=policy} arrived without a value "
                                       "(NaN or infinity)")
            assert messages["quiet"].startswith("no new point of ppo_update.approx_kl for ")
            await send(msgspec.structs.replace(epoch, accuracy=0.5), env=1)
            await send(msgspec.structs.replace(ppo, approx_kl=0.01))
            await send(msgspec.structs.replace(grads, scope="policy", global_norm=0.8))
            bodies = [b for _, b in hook.wait(lambda got: len(got) >= 6, timeout=30)]
            assert sorted(b["title"] for b in bodies[3:]) == [
                "[nissa] resolved: low: demo: epoch_completed.accuracy{env=1}",
                "[nissa] resolved: nan: demo: gradient_health.global_norm{scope=policy}",
                "[nissa] resolved: quiet: demo: ppo_update.approx_kl"]


@pytest.mark.postgresql_only
async def test_two_servers_on_one_database_send_each_alert_once(tmp_path):
    import asyncio

    from tests.support.databases import database_for

    db_url = database_for(tmp_path)["db_url"]
    with webhook_receiver() as hook:
        rules = _rules(hook.url, {"name": "bad", "when": "anomaly", "min_severity": "error", "quiet_s": 1.0})
        with _fast(tmp_path, rules, db_url=db_url) as a, _fast(tmp_path, rules, db_url=db_url) as b:
            run = "shared"
            await ingest_events(a, events_for(run, 3, started=True))
            spike = AnomalyDetected(anomaly="nan_inf", detail="loss is nan")
            await ingest_events(a, [_event(run, 4, spike, 4, Severity.ERROR)])
            hook.wait(lambda bodies: len(bodies) >= 2, timeout=30)  # firing, then resolved after a quiet second
            await asyncio.sleep(1.5)  # both servers sweep and deliver several times meanwhile
            assert [body["title"] for _, body in hook.posts] == ["[nissa] bad: demo: nan_inf",
                                                                 "[nissa] resolved: bad: demo: nan_inf"]
            for url in (a, b):
                (alert,) = httpx.get(f"{url}/alerts").json()
                assert [d["status"] for d in alert["deliveries"]] == ["sent", "sent"]


@pytest.mark.single_backend
@pytest.mark.parametrize(("text", "expected"), [
    ("[[rules]]\nname = 'stuck'\nwhen = 'hang'\nafter_s = 'soon'\n",
     "nissa-server: error: --alerts: {path}: rules[0] ('stuck'): after_s: must be a number of seconds in (0, 604800]"),
    ("[[rules]\n", "nissa-server: error: --alerts: {path}: not valid TOML: "),
])
def test_nissa_server_refuses_a_bad_rules_file_in_one_line(tmp_path, text, expected):
    import subprocess

    from tests.support.server import script_path

    path = tmp_path / "alerts.toml"
    path.write_text(text)
    out = subprocess.run([script_path("nissa-server"), "--port", "0", "--db", str(tmp_path / "n.db"), "--alerts",
                          str(path)], capture_output=True, text=True, timeout=60)
    assert out.returncode == 2 and out.stdout == ""
    assert len(out.stderr.splitlines()) == 1 and out.stderr.startswith(expected.format(path=path)), out.stderr


async def test_a_status_rule_fires_on_its_runs_only_and_resolves_when_the_run_goes_on(tmp_path):
    from leyline import EventKind
    from leyline.samples import SAMPLE_PAYLOADS

    with webhook_receiver() as hook, _fast(tmp_path, _rules(
            hook.url, {"name": "ended", "when": "status", "status": ["finished"], "runs": "dem*"},
            {"name": "elsewhere", "when": "status", "status": ["finished"], "runs": "prod-*"})) as url:
        run = "ends"
        await ingest_events(url, events_for(run, 3, started=True))
        await ingest_events(url, [_event(run, 4, RunFinished(status="completed", duration_s=1.0), 4)])
        hook.wait(lambda bodies: len(bodies) >= 1, timeout=30)
        await ingest_events(url, [_event(run, 5, SAMPLE_PAYLOADS[EventKind.RUN_RESUMED], 5)])
        bodies = [b for _, b in hook.wait(lambda bodies: len(bodies) >= 2, timeout=30)]
        assert [b["title"] for b in bodies] == ["[nissa] ended: demo: finished",
                                                "[nissa] resolved: ended: demo: finished"]
        assert bodies[0]["message"].startswith("run demo is finished") and bodies[0]["type"] == "failure"


def test_rate_limits_hold_notifications_back_and_retries_back_off():
    import random

    from nissa_server.alerts.notify import MAX_BACKOFF_S, RateLimit, backoff_s

    limit = RateLimit(per_minute=2)
    assert (limit.take(100.0), limit.take(101.0)) == (0.0, 0.0)
    assert limit.take(102.0) == 160.0  # the oldest of the minute's two frees a slot at 160 s
    assert limit.take(160.5) == 0.0
    rng = random.Random(1)
    delays = [backoff_s(a, rng) for a in (1, 2, 3, 20)]
    assert 1.6 <= delays[0] <= 2.0 and 3.2 <= delays[1] <= 4.0 and 6.4 <= delays[2] <= 8.0
    assert 0.8 * MAX_BACKOFF_S <= delays[3] <= MAX_BACKOFF_S


async def test_a_rank_that_trains_slower_than_the_others_for_a_while_is_a_straggler_until_it_catches_up(tmp_path):
    from leyline import PhaseTime, PhaseTiming

    def timing(ms: float) -> PhaseTiming:
        return PhaseTiming(round=1, phases=[PhaseTime(phase="train", wall_ms=ms, cpu_ms=ms)])

    with webhook_receiver() as hook, _fast(tmp_path, _rules(
            hook.url, {"name": "slow", "when": "straggler", "after_s": 0.5, "factor": 2.0})) as url:
        run = "ranks"
        await ingest_events(url, events_for(run, 1, started=True))
        await ingest_events(url, [_event(run, 2, timing(100.0), 2)])
        async with IngestClient(url, run, rank=1) as rank1:
            await rank1.send([make_event(timing(150.0), run_id=run, seq=1, ts=1.7e9, rank=1, step=2, epoch=0)])
            await rank1.send([make_event(timing(320.0), run_id=run, seq=2, ts=1.7e9, rank=1, step=3, epoch=0)])
            (_, fired), = hook.wait(lambda bodies: len(bodies) >= 1, timeout=30)
            assert fired["title"] == "[nissa] slow: demo: rank 1"
            assert fired["message"].split(": ", 1)[1].startswith(
                "its training phase took 320 ms, 3.2× the other ranks' median 100 ms")
            await rank1.send([make_event(timing(110.0), run_id=run, seq=3, ts=1.7e9, rank=1, step=4, epoch=0)])
            bodies = [b for _, b in hook.wait(lambda bodies: len(bodies) >= 2, timeout=30)]
            assert bodies[1]["title"] == "[nissa] resolved: slow: demo: rank 1"


@pytest.mark.single_backend
async def test_an_alert_fired_under_a_series_stored_key_is_the_one_firing_under_its_shown_key(tmp_path):
    """An alert an older version opened under ``loss{rank=0}`` on a run of one rank (which now shows the series as
    ``loss``): while the condition holds, no second alert opens for it, and it resolves once."""
    import asyncio
    import sqlite3

    from leyline import Metrics
    from nissa_server.store.alerts_sql import open_key

    with webhook_receiver() as hook, _fast(tmp_path, _rules(
            hook.url, {"name": "high", "when": "threshold", "series": "loss", "above": 1.0})) as url:
        run = "upgraded"
        await ingest_events(url, events_for(run, 2, started=True) + [_event(run, 3, Metrics(values={"loss": 5.0}), 3)])
        hook.wait(lambda bodies: len(bodies) >= 1)
        with sqlite3.connect(tmp_path / "nissa.db", timeout=30) as db:  # as an older version stored it
            run_key, = db.execute("SELECT run_key FROM alerts").fetchone()
            db.execute("UPDATE alerts SET subject = ?, open_key = ?",
                       ("loss{rank=0}", open_key("high", run_key, "loss{rank=0}")))
        await ingest_events(url, [_event(run, 4, Metrics(values={"loss": 6.0}), 4)])
        await asyncio.sleep(2.0)  # ten sweeps of the rules with the condition still holding
        async with httpx.AsyncClient(base_url=url) as http:
            alerts = (await http.get(f"/runs/{run}/alerts")).json()
            assert [(a["subject"], a["status"]) for a in alerts] == [("loss{rank=0}", "firing")]
            await ingest_events(url, [_event(run, 5, Metrics(values={"loss": 0.5}), 5)])
            posts = hook.wait(lambda bodies: any("resolved" in b["title"] for b in bodies))
            assert [b["title"].split(":")[0] for _, b in posts] == ["[nissa] high", "[nissa] resolved"]
