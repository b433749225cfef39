"""The console script: listening line, port 0, refusal to listen openly without a token, a bad --db in
one line, limit flags, shutdown."""

import asyncio
import os
import signal
import subprocess

import httpx
import pytest
from websockets.asyncio.client import connect

from nissa_server.cli import build_parser, settings_from_args
from tests.support import IngestClient, events_for, start_server_process, stop_process, ws_url
from tests.support.damage import corrupt_database
from tests.support.server import script_path

pytestmark = pytest.mark.single_backend


def test_port_zero_prints_one_listening_line_and_serves(server_process):
    proc, url = server_process
    assert url.startswith("http://127.0.0.1:") and not url.endswith(":0")
    assert httpx.get(f"{url}/healthz", timeout=30).json()["status"] == "ok"


def test_sigterm_shuts_down_cleanly(tmp_path):
    proc, url = start_server_process(tmp_path / "n.db")
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=30) == 0
    assert proc.stdout.read() == ""  # nothing but the one listening line on stdout
    stop_process(proc)


def test_restart_keeps_runs(tmp_path):
    proc, url = start_server_process(tmp_path / "n.db")
    try:
        assert httpx.get(f"{url}/runs", timeout=30).json() == []
    finally:
        assert stop_process(proc) == 0
    assert (tmp_path / "n.db").exists()


@pytest.mark.parametrize("host", ["0.0.0.0", "192.0.2.1"])
def test_refuses_non_loopback_without_token(tmp_path, host):
    out = subprocess.run([script_path("nissa-server"), "--host", host, "--port", "0", "--db", str(tmp_path / "n.db")],
                         capture_output=True, text=True, timeout=60, env={"PATH": os.environ["PATH"]})
    assert out.returncode == 2
    assert "refusing to listen" in out.stderr and "--token" in out.stderr
    assert out.stdout == ""


async def test_shutdown_with_open_connections_commits_and_exits(tmp_path):
    proc, url = start_server_process(tmp_path / "n.db")
    async with IngestClient(url, "open-at-exit") as client, connect(ws_url(url, "/ws/watch")):
        await client.send(events_for("open-at-exit", 100))
        await client.wait_ack(100)
        proc.send_signal(signal.SIGTERM)
        assert await asyncio.to_thread(proc.wait, 30) == 0
    stop_process(proc)
    proc, url = start_server_process(tmp_path / "n.db")
    try:
        run = httpx.get(f"{url}/runs/open-at-exit", timeout=30).json()
        assert run["last_seq"] == {"0": 100}
    finally:
        stop_process(proc)


def _serve(db_path) -> subprocess.CompletedProcess:
    return subprocess.run([script_path("nissa-server"), "--port", "0", "--db", str(db_path)], capture_output=True,
                          text=True, timeout=60, env={"PATH": os.environ["PATH"]})


@pytest.mark.parametrize("db, expected", [
    ("postgresql://nobody:secret@127.0.0.1:1/none", "nissa-server: error: --db: cannot connect to "
                                                    "postgresql://nobody:***@127.0.0.1:1/none: "),
    ("mysql://db.lab/nissa", "nissa-server: error: --db: mysql:// is not supported"),
])
def test_a_database_url_that_cannot_serve_is_one_line_naming_the_flag(db, expected):
    out = _serve(db)
    assert out.returncode == 2 and out.stdout == "" and "secret" not in out.stderr
    assert len(out.stderr.splitlines()) == 1 and out.stderr.startswith(expected), out.stderr


@pytest.mark.parametrize("damage", ["corrupt", "not a database", "a directory", "held by a running server"])
def test_an_unusable_db_is_one_line_naming_the_flag(tmp_path, damage):
    path = tmp_path / "n.db"
    running = None
    if damage == "corrupt":
        corrupt_database(path)
    elif damage == "not a database":
        path.write_text("x" * 4096)
    elif damage == "a directory":
        path.mkdir()
    else:
        running, _ = start_server_process(path)
    try:
        out = _serve(path)
    finally:
        if running is not None:
            stop_process(running)
    assert out.returncode == 2 and out.stdout == ""
    assert len(out.stderr.splitlines()) == 1 and out.stderr.startswith("nissa-server: error: --db: "), out.stderr


def test_limit_flags_reach_the_settings_and_show_their_defaults():
    parser = build_parser()
    args = parser.parse_args(["--header-timeout", "3", "--max-connections", "50", "--max-watchers", "7",
                              "--ingest-idle-timeout", "9", "--ws-ping-interval", "4", "--ws-ping-timeout", "5",
                              "--watcher-max-pending", "1000", "--watcher-max-bytes", "65536"])
    settings = settings_from_args(args)
    assert (settings.limits.header_timeout_s, settings.limits.max_connections, settings.limits.max_watchers,
            settings.limits.ingest_idle_s, settings.limits.ws_ping_interval_s, settings.limits.ws_ping_timeout_s,
            settings.watcher_max_pending, settings.watcher_max_pending_bytes) == (3, 50, 7, 9, 4, 5, 1000, 65536)
    text = " ".join(parser.format_help().split())
    for flag, default in (("--header-timeout", "10.0"), ("--max-connections", "1000"), ("--max-watchers", "100"),
                          ("--ingest-idle-timeout", "60.0"), ("--watcher-max-bytes", "16777216")):
        assert flag in text and f"(default {default}" in text.split(flag, 2)[-1][:200], flag


@pytest.mark.parametrize("flags, expected", [
    (["--port", "-1"], "argument --port: must be a port in 0..65535"),
    (["--lost-after", "0"], "argument --lost-after: must be a number of seconds > 0, got '0'"),
    (["--stacks-answer", "nan"], "argument --stacks-answer: must be a number of seconds > 0, got 'nan'"),
    (["--header-timeout", "inf"], "argument --header-timeout: must be a number of seconds > 0"),
    (["--max-watchers", "0"], "argument --max-watchers: must be a whole number >= 1, got '0'"),
])
def test_a_bad_flag_value_is_refused_naming_the_flag(capsys, flags, expected):
    with pytest.raises(SystemExit) as exit_:
        build_parser().parse_args(flags)
    assert exit_.value.code == 2 and f"nissa-server: error: {expected}" in capsys.readouterr().err


def test_an_artifact_dir_that_cannot_be_made_is_one_line(tmp_path):
    (tmp_path / "a-file").write_text("")
    out = subprocess.run([script_path("nissa-server"), "--port", "0", "--db", str(tmp_path / "n.db"),
                          "--artifact-dir", str(tmp_path / "a-file" / "artifacts")], capture_output=True, text=True,
                         timeout=60)
    assert out.returncode == 2 and out.stdout == ""
    assert out.stderr == (f"nissa-server: error: --artifact-dir: cannot create {tmp_path}/a-file/artifacts: "
                          f"Not a directory\n")
