"""The README's tour, run as a user would after ``make demo`` / ``make test``: every command line of its
``bash`` blocks, in a fresh directory, through bash, with the virtual environment activated the way the
tour says. Placeholders come from the tour's own run (``<run_id>``) and its answers (``<command_id>``);
the fixed ports 8765 and 8766 are rewritten to free ones. A command line this test cannot run fails it,
so a new command in the tour needs a runner here.

Cost: the tour's ``esper-train`` run cut to three rounds (about 20 s on two cores), which must fossilize
a seed, and three consoles in a pseudo-terminal; the other commands run while it trains.
"""

from __future__ import annotations

import json
import pathlib
import re
import shlex
import sys

import httpx
import pytest

from .api import run_known, wait_for
from .procs import free_port
from .tour import Shell

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(600)]

ROOT = pathlib.Path(__file__).resolve().parents[2]
AFTER_THE_RUN = ("esper-train upload", "esper-watch --replay")  # the tour's commands for a run that ended
TOUR_ROUNDS = 3


def tour_commands(readme: str) -> list[str]:
    """The command lines of the bash blocks of the README's Tour section, continuation lines joined."""
    section = readme.split("\n## Tour\n", 1)[1].split("\n## ", 1)[0]
    commands = []
    for block in re.findall(r"```bash\n(.*?)```", section, re.S):
        for line in re.sub(r"\\\n", " ", block).splitlines():
            line = line.strip()
            if line and not line.startswith("#"):
                commands.append(line)
    return commands


def test_the_tour_finds_every_command():
    commands = tour_commands((ROOT / "README.md").read_text())
    programs = {line.split()[0] for line in commands}
    assert programs == {"source", "nissa-server", "esper-train", "esper-watch", "curl", "for", "nissa", "python"}, \
        programs
    assert any(line.startswith("esper-train upload") for line in commands)


@pytest.mark.skipif(sys.prefix == sys.base_prefix, reason="the tour activates a virtual environment")
def test_every_command_of_the_tour_works_as_written(tmp_path):
    commands = tour_commands((ROOT / "README.md").read_text())
    shell = Shell(tmp_path, venv=pathlib.Path(sys.prefix), ports={"8765": free_port(), "8766": free_port()})
    tour = Tour(shell)
    try:
        for line in commands:
            (tour.later.append if line.startswith(AFTER_THE_RUN) else tour.run)(line)
        tour.finish_the_run()
        for line in tour.later:
            tour.run(line)
    finally:
        shell.close()
    assert sorted(tour.done) == sorted(commands)
    server_log = shell.log("nissa-server")
    assert "Traceback" not in server_log and " ERROR " not in server_log, server_log
    assert "unknown command" not in server_log, server_log


class Tour:
    """Runs one tour command line at a time, each by what it is; the background ones stay up."""

    def __init__(self, shell: Shell) -> None:
        self.shell = shell
        self.url = f"http://127.0.0.1:{shell.ports['8765']}"
        self.later: list[str] = []
        self.done: list[str] = []
        self.trainer = None

    def run(self, line: str) -> None:
        words = line.split()
        if words[0] == "source":
            self.shell.activate(line)
        elif words[0] == "nissa-server":
            self.shell.start(line, "nissa-server", ready=lambda out: "listening on" in out)
        elif line.startswith("esper-train upload"):
            out = self.shell.run(line)
            assert "complete" in out and "INCOMPLETE" not in out, out
        elif words[0] == "esper-train":
            self._train(line)
        elif line.startswith("esper-watch --web"):
            port = self.shell.ports["8766"]
            self.shell.start(line, "esper-watch-web", ready=lambda out: f":{port}" in out)
            page = httpx.get(f"http://127.0.0.1:{port}/", timeout=60)  # its line comes once the socket listens
            assert page.status_code == 200 and "esper-watch" in page.text
            self.shell.stop("esper-watch-web")
        elif words[0] == "esper-watch":
            compared = re.search(r"--compare <(\S+) run_id>", line)
            marker = ("REPLAY" if "--replay" in words
                      else self.shell.values[f"<{compared.group(1)} run_id>"] if compared
                      else self.shell.values["<run_id>"])
            self.shell.console(line, marker)
        elif words[0] == "curl":
            self._curl(line)
        elif words[0] == "for":
            self._sweep(line)
        elif words[0] in ("nissa", "python"):  # the sweep's best run, from the shell and from nissa.Api
            installed = (pathlib.Path(sys.prefix) / "bin" / "nissa").exists()  # an environment from before the command
            out = self.shell.run(line if installed or words[0] != "nissa" else f"python -m {line}")
            best = out.splitlines()[1].split()[1] if words[0] == "nissa" else out.strip()
            assert best == "lr0.1", out
        else:
            raise AssertionError(f"no runner for the tour's command {line!r}: add one to this test")
        self.done.append(line)

    def _train(self, line: str) -> None:
        name = re.search(r"--run-name (\S+)", line).group(1)
        if name != "try1":
            self._side_run(line, name)
            return
        assert "--policy heuristic" in line and "--rounds" in line, line  # the tour's run grows seeds at once
        # The tour's run lasts minutes, for a reader to steer; this one as many rounds as the commands
        # need (a later --rounds wins, the flag the tour explains).
        line = f"{line} --rounds {TOUR_ROUNDS}"
        self.trainer = self.shell.start(line, "esper-train", ready=lambda out: "run id: " in out)
        run_id = re.search(r"run id: (\S+)", self.shell.output("esper-train")).group(1)
        assert run_id.startswith("try1-"), run_id
        self.shell.values["<run_id>"] = run_id
        wait_for(lambda: run_known(self.url, run_id), 60, "the server to know the run")

    def _side_run(self, line: str, name: str) -> None:
        """A run of "Runs side by side", trained to its end (cut to two rounds); ``<NAME run_id>`` is its id."""
        out = self.shell.run(f"{line} --rounds 2", timeout=300)
        run_id = re.search(r"run id: (\S+)", out).group(1)
        assert run_id.startswith(f"{name}-"), run_id
        self.shell.values[f"<{name} run_id>"] = run_id

    def _sweep(self, line: str) -> None:
        """The sweep: three runs of the plain loop, one group, each to its end."""
        examples = self.shell.cwd / "examples"
        if not examples.exists():
            examples.symlink_to(ROOT / "examples")  # the tour runs from the repository's root
        self.shell.run(f"bash -c {shlex.quote(line)}", timeout=600)
        runs = httpx.get(f"{self.url}/runs", params={"q": "group:lr-sweep"}, timeout=10).json()
        assert sorted(r["name"] for r in runs) == ["lr0.001", "lr0.01", "lr0.1"], runs

        def summarised() -> bool:  # the server's series pass (a second apart) has summarised each
            found = httpx.get(f"{self.url}/runs", params={"q": "group:lr-sweep val_loss.best>=0"}, timeout=10).json()
            return len(found) == 3
        wait_for(summarised, 30, "the sweep's summaries")

    def _curl(self, line: str) -> None:
        out = self.shell.run(line)
        if "/metrics" in line:
            assert "nissa_events_ingested_total" in out, out[:500]
            return
        body = json.loads(out)
        if '"target": "update"' in line and '"phase"' not in line:
            # As the tour says: its run is heuristic (``_train``), with no PPO update, and the server says so.
            assert "no phase 'update'" in body.get("detail", ""), body
            return
        assert not (isinstance(body, dict) and "detail" in body), f"{line}: {body}"
        if "/escalate" in line:
            assert body["status"] == "queued", body
            self.shell.values["<command_id>"] = body["command_id"]
        elif line.endswith("/runs"):
            assert self.shell.values["<run_id>"] in [r["run_id"] for r in body]
        elif "/commands/" in line:
            assert body["command_id"] == self.shell.values["<command_id>"] and body["status"], body

    def finish_the_run(self) -> None:
        assert self.trainer is not None, "the tour never started its run"
        code = self.trainer.wait(timeout=480)
        assert code == 0, self.shell.output("esper-train")
        run_id = self.shell.values["<run_id>"]
        run = httpx.get(f"{self.url}/runs/{run_id}", timeout=10).json()
        assert run["status"] == "finished", run
        grown = httpx.get(f"{self.url}/runs/{run_id}/events", params={"after_seq": 0, "kind": "seed_fossilized"},
                          timeout=10).json()
        assert grown and all(e["payload"]["contribution"] is not None for e in grown), grown
