"""Stacks on demand against a real nissa-server: the hub's thread answers while the training thread is
blocked (an Esper runtime's and a plain loop's ``nissa.init`` run), with every thread's stack in the command's
result and as an artifact; the watchdog writes the
stacks of a process whose only running thread holds the GIL."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import threading

import httpx

from nissa.diagnostics import answer_stacks
from nissa.hub import HubConfig
from nissa.runtime import RuntimeConfig, build_runtime
from tests.support.server import running_server
from tests.support.waiting import wait_for


def blocked_in_a_collective(release: threading.Event) -> None:
    release.wait(60)


def test_stacks_are_answered_while_the_training_thread_is_blocked(tmp_path):
    with running_server(tmp_path) as url:
        runtime = build_runtime(RuntimeConfig(hub=HubConfig(run_id="stuck", log_dir=tmp_path / "runs", server=url)))
        answer_stacks(runtime)
        runtime.step_boundary(7, 1)
        runtime.hub.flush(timeout=30)
        release = threading.Event()
        training = threading.Thread(target=blocked_in_a_collective, args=(release,), name="training")
        training.start()
        try:
            resp = httpx.post(f"{url}/escalate", json={"run_id": "stuck", "action": "stacks"}, timeout=10)
            assert resp.status_code == 202, resp.text
            command_id = resp.json()["command_id"]
            record = wait_for(lambda: (r := httpx.get(f"{url}/commands/{command_id}").json())["status"] == "completed"
                              and r, timeout=30, message="the stacks command completed")
            assert runtime.hub.poll_commands() == []  # never queued for the training thread
        finally:
            release.set()
            training.join()
        result = record["result"]
        assert record["applied_step"] == 7 and result["rank"] == 0 and result["threads"] >= 3
        assert 'Thread' in result["stacks"] and '"training"' in result["stacks"]
        assert "blocked_in_a_collective" in result["stacks"] and "release.wait(60)" in result["stacks"]
        name = result["artifact"]
        wait_for(lambda: any(a["name"] == name for a in httpx.get(f"{url}/runs/stuck/artifacts").json()),
                 timeout=30, message="the stacks artifact uploaded")
        body = httpx.get(f"{url}/runs/stuck/artifacts/{name}").text
        assert "blocked_in_a_collective" in body
        runtime.hub.close(timeout=10)


def test_a_plain_loop_run_answers_stacks_too(tmp_path):
    import nissa

    with running_server(tmp_path) as url:
        run = nissa.init(server=url, run_name="plain", log_dir=tmp_path / "runs")
        run.step()
        run.runtime.hub.flush(timeout=30)
        resp = httpx.post(f"{url}/escalate", json={"run_id": run.run_id, "action": "stacks"}, timeout=10)
        assert resp.status_code == 202, resp.text
        command_id = resp.json()["command_id"]
        record = wait_for(lambda: (r := httpx.get(f"{url}/commands/{command_id}").json())["status"] == "completed"
                          and r, timeout=30, message="the stacks command completed")  # no step in between
        assert "test_a_plain_loop_run_answers_stacks_too" in record["result"]["stacks"]
        name = record["result"]["artifact"]
        wait_for(lambda: any(a["name"] == name for a in httpx.get(f"{url}/runs/{run.run_id}/artifacts").json()),
                 timeout=30, message="the stacks artifact uploaded")
        assert run.finish().complete


def test_an_esper_run_built_anywhere_answers_stacks(tmp_path):
    # build_run is what the CLI, the tests and the benchmarks share: stacks were wired in the CLI only.
    from trainer.build import build_run, open_run
    from trainer.simic.config import TrainConfig

    with running_server(tmp_path) as url:
        config = TrainConfig(device="cpu", log_every=0)
        run = build_run(config, open_run(config, run_id="built", log_dir=tmp_path / "runs", server=url,
                                         system_metrics=False))
        run.hooks.step_boundary(3, 0)
        run.run.runtime.hub.flush(timeout=30)
        command_id = httpx.post(f"{url}/escalate", json={"run_id": "built", "action": "stacks"},
                                timeout=10).json()["command_id"]
        record = wait_for(lambda: (r := httpx.get(f"{url}/commands/{command_id}").json())["status"] == "completed"
                          and r, timeout=30, message="the stacks command completed")
        assert "test_an_esper_run_built_anywhere_answers_stacks" in record["result"]["stacks"]
        run.run.abandon()  # no run_finished: the run never started


def test_the_watchdog_writes_every_threads_stack_when_the_gil_is_held(tmp_path):
    # A regular expression that backtracks for seconds holds the GIL all along: no Python thread runs.
    program = textwrap.dedent(f"""
        import pathlib, re, threading
        from nissa.diagnostics import StackWatchdog
        dog = StackWatchdog(pathlib.Path({str(tmp_path)!r}), 0, 0.3).start()
        side = threading.Thread(target=threading.Event().wait, args=(30,), name="side", daemon=True)
        side.start()
        def holding_the_gil():
            n = 22
            while not dog.path.stat().st_size:
                re.match(r"(a+)+$", "a" * n + "b")
                n += 1
        holding_the_gil()
        dog.stop()
        print(dog.path)
    """)
    out = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, timeout=60, check=True)
    text = open(out.stdout.strip()).read()
    assert "Timeout" in text and "holding_the_gil" in text
    assert text.count("Thread 0x") >= 2  # every thread's, the waiting one's too


def test_a_watchdog_that_never_fired_leaves_no_file(tmp_path):
    from nissa.diagnostics import StackWatchdog

    dog = StackWatchdog(tmp_path, 0, 120.0).start()  # no busy machine stalls this process for that long
    dog.stop()
    assert not dog.path.exists()


def test_upload_sends_the_stack_files_a_run_left_in_its_directory(tmp_path):
    from leyline import RunStarted
    from nissa.hub import NissaHub
    from nissa.hub.traces import STACKS_DIR, stacks_name
    from nissa.hub.upload import upload_run

    hub = NissaHub(HubConfig(run_id="offline", log_dir=tmp_path / "runs")).start()  # no server: log only
    hub.emit(RunStarted(name="offline", config={}), step=0, epoch=0)
    hub.close(timeout=10)
    run_dir = tmp_path / "runs" / "offline"
    dump = run_dir / STACKS_DIR / stacks_name("watchdog", 0)
    dump.parent.mkdir()
    dump.write_text('Timeout (0:05:00)!\nThread 0x1 (most recent call first):\n  File "x.py", line 1 in stuck\n')
    (run_dir / STACKS_DIR / stacks_name("watchdog", 3)).write_text("")  # empty (and another rank's): not sent
    with running_server(tmp_path) as url:
        (result,) = upload_run(run_dir, url)
        assert result.complete and result.traces is not None and result.traces.sent == 1
        (artifact,) = httpx.get(f"{url}/runs/offline/artifacts").json()
        assert artifact["name"] == dump.name
        assert httpx.get(f"{url}/runs/offline/artifacts/{dump.name}").text == dump.read_text()
