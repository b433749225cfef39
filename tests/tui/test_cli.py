"""The esper-watch command line: flag errors, a replay without a server, and --web in a browser."""

from __future__ import annotations

import os
import re
import shutil
import socket
import subprocess
import sys

import httpx

from tests.support.server import stop_process
from tests.support.waiting import wait_for
from tui.app import EsperWatch
from tui.cli import main, run_app
from tui.config import WatchConfig


def test_bad_flags_name_the_flag(capsys, tmp_path):
    assert main(["--server", "localhost:8765"]) == 2
    assert "--server must be an http(s) URL" in capsys.readouterr().err
    assert main(["--replay", str(tmp_path / "missing.jsonl")]) == 2
    assert "--replay" in capsys.readouterr().err
    assert main(["--server", "http://127.0.0.1:1", "--debug-epochs", "0"]) == 2
    assert "--debug-epochs" in capsys.readouterr().err
    assert main(["--web", "--web-host", "0.0.0.0"]) == 2
    assert "--allow-remote" in capsys.readouterr().err
    assert main(["--web", "--web-port", "99999"]) == 2
    assert "--web-port must be in 1..65535" in capsys.readouterr().err
    assert main(["--server", "http://127.0.0.1:1", "--charts"]) == 2
    assert "--charts needs --run RUN or --replay FILE" in capsys.readouterr().err
    assert main(["--server", "http://127.0.0.1:1", "--compare", "run-a"]) == 2
    assert "--compare needs two or more different runs" in capsys.readouterr().err
    assert main(["--server", "http://127.0.0.1:1", "--compare", "a,b", "--run", "a"]) == 2
    assert "--compare" in capsys.readouterr().err
    assert main(["--server", "http://127.0.0.1:1", "--run", "../x"]) == 2
    assert "esper-watch: --run: '../x' is not a run id" in capsys.readouterr().err
    assert main(["--server", "http://127.0.0.1:1", "--compare", "a,b/c"]) == 2
    assert "esper-watch: --compare: 'b/c' is not a run id" in capsys.readouterr().err
    assert main(["--server", "http://127.0.0.1:1", "--refresh-hz", "0"]) == 2
    assert "esper-watch: --refresh-hz must be in 0.5..60, got 0" in capsys.readouterr().err
    assert main(["--replay", str(tmp_path)]) == 2
    assert f"--replay {tmp_path} is a directory; a run log is {tmp_path / 'events.jsonl'}" in capsys.readouterr().err


def test_an_unusable_log_file_or_replay_is_one_line(capsys, tmp_path):
    run_log = tmp_path / "events.jsonl"
    run_log.write_text("not a run log\n")
    assert main(["--replay", str(run_log), "--log-file", str(tmp_path / "w.log")]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"esper-watch: --replay {run_log}: no event") and err.count("\n") == 1
    assert main(["--replay", str(run_log), "--log-file", "/proc/esper-nope/w.log"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("esper-watch: --log-file /proc/esper-nope/w.log: cannot write") and "Traceback" not in err


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_web_on_a_taken_port_says_so_in_one_line():
    script = shutil.which("esper-watch", path=os.path.dirname(sys.executable))
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        done = subprocess.run([script, "--web", "--web-port", str(port)], capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert f"--web-host/--web-port: cannot listen on 127.0.0.1:{port}" in done.stderr.splitlines()[-1]
    assert "serving on" not in done.stderr  # said only once it listens: here it never did


def test_web_serves_the_console_over_http(tmp_path):
    script = shutil.which("esper-watch", path=os.path.dirname(sys.executable))
    assert script, "esper-watch is not installed"
    port = _free_port()
    err = tmp_path / "stderr"
    with err.open("wb") as sink:
        proc = subprocess.Popen([script, "--web", "--web-port", str(port), "--server", "http://127.0.0.1:9",
                                 "--token", "hidden-token"], stdout=subprocess.DEVNULL, stderr=sink, cwd=tmp_path)
    try:
        def announced() -> bool:
            assert proc.poll() is None, err.read_text()
            return f"esper-watch: serving on http://127.0.0.1:{port}" in err.read_text()

        wait_for(announced, timeout=30, message="esper-watch --web's line")
        # The line comes once the socket listens: a browser opened on it is let in, at once and not on a retry.
        response = httpx.get(f"http://127.0.0.1:{port}/", timeout=10)
        assert response.status_code == 200
        html = response.text
        assert "esper-watch" in html and "textual" in html.lower()
        assert "hidden-token" not in html  # the token reaches the app by environment, never the page
        # Nothing from outside (no web font from a CDN): the console works offline, and leaks no visit.
        own = f"http://127.0.0.1:{port}/"
        outside = [u for u in re.findall(r"https?://[^\s\"'<>)]+", html)
                   if not u.startswith(own) and u != "http://www.w3.org/2000/svg"]  # an XML namespace, not a load
        assert outside == [], outside
        font = re.search(r'url\("([^"]+RobotoMono-VariableFont_wght.ttf)"\)', html)
        assert font and httpx.get(font.group(1), timeout=10).status_code == 200
    finally:
        stop_process(proc, 10)


class _Breaks(EsperWatch):
    """A console whose first screen fails: what an error the console did not catch looks like."""

    async def on_mount(self) -> None:
        raise RuntimeError("a screen failed")


def test_a_console_that_stops_on_an_error_exits_nonzero_and_names_its_log(capsys, tmp_path):
    app = _Breaks(WatchConfig(client=None, replay_file=tmp_path / "events.jsonl"))
    code = run_app(app, tmp_path / "esper-watch.log", headless=True)
    assert code != 0
    err = capsys.readouterr().err
    assert f"stopped on an error (exit code {code}); its log: {tmp_path / 'esper-watch.log'}" in err
