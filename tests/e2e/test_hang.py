"""A hung rank found by itself: two gloo ranks under torchrun through a real nissa-server with a hang rule
whose alerts go to a JSON webhook on 127.0.0.1. Rank 1 is stopped with SIGSTOP mid-epoch; rank 0 goes on
until the ranks' next collective and waits there, its hub still sending heartbeats. The server reports
rank 0 hung within T and a few seconds, asks the run for its stacks (rank 0's name the collective it
waits in), and the webhook receives the alert; after SIGCONT the rank advances and the alert resolves.
The time from SIGSTOP to the webhook's receipt is printed (``sigstop_to_webhook_s=``)."""

from __future__ import annotations

import os
import signal
import subprocess
import time

import httpx
import pytest

from tests.support.webhook import Received, webhook_receiver

from .api import command, run_known, server_events, wait_for
from .procs import ServerProcess, _env, script
from .test_multirank import TINY

pytestmark = pytest.mark.e2e
T = 3.0


def test_a_stopped_rank_hangs_the_other_which_is_reported_with_its_stacks_then_resolved(tmp_path):
    with webhook_receiver() as hook:
        rules = tmp_path / "alerts.toml"
        rules.write_text(f'[destinations.hook]\nurls = ["{hook.url}"]\n\n'
                         f'[[rules]]\nname = "stuck"\nwhen = "hang"\nafter_s = {T}\n')
        server = ServerProcess(tmp_path / "nissa.db", extra_args=("--alerts", str(rules))).start()
        log_dir = tmp_path / "runs"
        out = open(tmp_path / "torchrun.out", "w+")
        proc = subprocess.Popen([script("torchrun"), "--standalone", "--nproc-per-node", "2", "-m", "trainer",
                                 "--server", server.url, "--log-dir", str(log_dir), "--run-name", "hang",
                                 "--heartbeat", "0.5", *TINY], stdout=out, stderr=subprocess.STDOUT, env=_env())
        stopped = None
        try:
            run_dir = wait_for(lambda: next(log_dir.glob("hang-*/events.rank1.jsonl"), None), 120, "both logs").parent
            run_id = run_dir.name
            wait_for(lambda: run_known(server.url, run_id), 60, "the run to reach the server")  # its log comes first
            wait_for(lambda: all(server_events(server.url, run_id, rank=r, kind="ppo_update") for r in (0, 1))
                     and not _firing(server.url, run_id), 120, "a policy update on each rank, and no alert firing")
            # Under load a rank can wait T at a collective for the other before the stop (an alert that resolves
            # when it advances): what counts is what fires for rank 0 after the stop.
            stopped = _pids(server.url, run_id)[1]
            before = len(hook.posts)
            t_stop = time.time()
            os.kill(stopped, signal.SIGSTOP)
            arrived, _ = _body(hook, before, "[nissa] stuck: hang: rank 0")
            print(f"\nsigstop_to_webhook_s={arrived - t_stop:.2f} after_s={T:g} heartbeat_s=0.5")
            # The time to the webhook is printed, not asserted (timings are noisy on shared cores): rank 0 first
            # trains to its next collective, then waits T, plus a heartbeat and a sweep; 3.65 to 4.04 s measured.
            (found,) = [a for a in _firing(server.url, run_id) if a["rank"] == 0]
            assert found["condition"] == "hang", found
            assert float(found["message"].split(" for ")[1].split(" s ")[0]) >= T, found["message"]
            stacks = wait_for(lambda: next((r for r in command(server.url, found["command_id"])["ranks"]
                                            if r["rank"] == 0 and r["status"] == "completed"), None),
                              30, "rank 0's stacks")["result"]["stacks"]
            main = stacks[stacks.index('"MainThread"'):]
            main = main[:main.index("\nThread ")] if "\nThread " in main else main
            assert "in _collective" in main and any(c in main for c in ("work.wait", "all_reduce", "all_gather")), \
                main
            print("rank 0 waits in:", " / ".join(line.strip() for line in main.splitlines()[-4:]))
            # The stacks are in the command's result; their file is uploaded after it completes, so it comes later.
            wait_for(lambda: any(a["name"].startswith("stacks-") and "-rank0-" in a["name"] for a in httpx.get(
                f"{server.url}/runs/{run_id}/artifacts", timeout=10).json()), 60, "rank 0's stacks as an artifact")
            os.kill(stopped, signal.SIGCONT)
            stopped = None
            _body(hook, before, "[nissa] resolved: stuck: hang: rank 0")
            assert httpx.get(f"{server.url}/alerts/{found['alert_id']}", timeout=10).json()["status"] == "resolved"
        finally:
            if stopped is not None:
                os.kill(stopped, signal.SIGCONT)
            if proc.poll() is None:
                proc.terminate()
                try:
                    proc.wait(timeout=60)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait(timeout=30)
            out.close()
            server.stop()


def _firing(url: str, run_id: str) -> list[dict]:
    alerts = httpx.get(f"{url}/runs/{run_id}/alerts", timeout=10).json()
    return [a for a in alerts if a["status"] == "firing"]


def _pids(url: str, run_id: str) -> dict[int, int]:
    return {r["rank"]: r["pid"] for r in httpx.get(f"{url}/runs/{run_id}", timeout=10).json()["ranks"]}


def _body(hook: Received, after: int, title: str) -> tuple[float, dict]:
    """The first webhook post past the first ``after`` whose title is ``title`` (with its arrival time)."""
    def named(posts: list[tuple[float, dict]]) -> list[tuple[float, dict]]:
        return [(t, b) for t, b in posts[after:] if b.get("title") == title]
    hook.wait(lambda _: bool(named(hook.posts)), timeout=60)
    return named(hook.posts)[0]
