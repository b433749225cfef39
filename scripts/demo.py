"""A short live run you can watch: nissa-server, esper-train and esper-watch together.

Starts the server on a free loopback port, starts a training run that streams to it, and opens the
console on that run in this terminal. Quit the console with `q`; the trainer and the server are
stopped with it. Without a terminal (CI, a pipe) it waits for the run to finish and prints a summary:
every seed fossilized or pruned, with the contribution it was judged on.

The run uses heuristic Tamiyo unless told otherwise (``-- --policy ppo``): it grows seeds from the
first round, where PPO learns to over tens of rounds (the README's "Growth, measured").
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import pathlib
import re
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterator

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # for bench.processes: the one way the benchmarks, scripts and tests stop a process
from bench.processes import stop_process  # noqa: E402

LISTENING = re.compile(r"listening on (http://\S+)")


def _script(name: str) -> str:
    found = shutil.which(name, path=os.path.dirname(sys.executable)) or shutil.which(name)
    if not found:
        sys.exit(f"demo: {name} is not installed; run `make install` first")
    return found


def _state_env(work: pathlib.Path) -> dict[str, str]:
    """The environment of the demo's processes: what they keep between runs (the console's log) goes under the
    demo's folder, not the user's home, unless ``XDG_STATE_HOME`` says where."""
    env = dict(os.environ)
    env.setdefault("XDG_STATE_HOME", str(work / "state"))
    return env


def _start_server(db: pathlib.Path, env: dict[str, str]) -> tuple[subprocess.Popen, str]:
    proc = subprocess.Popen(
        [_script("nissa-server"), "--host", "127.0.0.1", "--port", "0", "--db", str(db)],
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=env,
    )
    deadline = time.monotonic() + 30
    assert proc.stdout is not None
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        if not line and proc.poll() is not None:
            sys.exit("demo: nissa-server exited before it was listening")
        match = LISTENING.search(line)
        if match:
            return proc, match.group(1)
    proc.kill()
    sys.exit("demo: nissa-server did not start within 30 s")


def screenshot_args(prog: str, doc: str) -> tuple[argparse.Namespace, str]:
    """A screenshot script's arguments (``--steps``, ``--out``) and the system's chromium, or exit saying so."""
    parser = argparse.ArgumentParser(prog=prog, description=doc.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--out", default=str(ROOT / "docs" / "screenshots"))
    args = parser.parse_args()
    return args, chromium_or_exit(prog)


def chromium_or_exit(prog: str) -> str:
    """The system's chromium (Playwright drives it), or exit saying how to install it."""
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if chromium is None:
        sys.exit(f"{prog}: no chromium (apt-get install chromium)")
    return chromium


@contextlib.contextmanager
def scratch_server() -> Iterator[tuple[pathlib.Path, dict[str, str], str]]:
    """A scratch folder, the environment of the processes run in it, and a nissa-server over a database there,
    stopped (and the folder removed) at the end: ``(work, env, url)``."""
    with tempfile.TemporaryDirectory() as tmp:
        work = pathlib.Path(tmp)
        env = _state_env(work)
        server, url = _start_server(work / "nissa.db", env)
        try:
            yield work, env, url
        finally:
            stop_process(server)


def _get(url: str) -> object:
    with urllib.request.urlopen(url, timeout=10) as resp:
        return json.load(resp)


def _summary(url: str, run_id: str) -> None:
    run = _get(f"{url}/runs/{run_id}")
    print(f"run {run_id} ({run.get('name', '')}): {run['status']}")  # type: ignore[union-attr]
    for kind, verb in (("seed_fossilized", "fossilized"), ("seed_pruned", "pruned")):
        for event in _get(f"{url}/runs/{run_id}/events?after_seq=0&kind={kind}&limit=1000"):  # type: ignore[union-attr]
            p = event["payload"]
            share = f", +{100 * p['params'] / p['host_params']:.1f}% params" if p.get("host_params") else ""
            contribution = "not measured" if p.get("contribution") is None else f"{100 * p['contribution']:+.1f} pp"
            why = f" ({p['reason']})" if p.get("reason") else ""
            print(f"  epoch {event['epoch']} env {event['env']}: {p['blueprint']} {verb} in {p['slot']}{why}, "
                  f"contribution {contribution}{share}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dir", default=str(ROOT / "runs" / "demo"), help="where the db and run logs go")
    parser.add_argument("--rounds", type=int, default=60, help="rounds of the demo run (default 60)")
    parser.add_argument("train_args", nargs="*", help="extra esper-train flags (after --)")
    args = parser.parse_args()
    work = pathlib.Path(args.dir)
    work.mkdir(parents=True, exist_ok=True)
    env = _state_env(work)
    server, url = _start_server(work / "nissa.db", env)
    print(f"demo: nissa-server at {url}", flush=True)
    run_id = time.strftime("demo-%Y%m%d-%H%M%S")
    trainer = subprocess.Popen(
        [_script("esper-train"), "--server", url, "--log-dir", str(work), "--run-name", "demo",
         "--run-id", run_id, "--rounds", str(args.rounds),
         *([] if "--policy" in args.train_args else ["--policy", "heuristic"]), *args.train_args],
        stdout=subprocess.PIPE if not sys.stdin.isatty() else subprocess.DEVNULL,
        stderr=subprocess.STDOUT if not sys.stdin.isatty() else subprocess.DEVNULL,
        text=True, env=env,
    )
    try:
        if sys.stdin.isatty() and sys.stdout.isatty():
            subprocess.run([_script("esper-watch"), "--server", url, "--run", run_id], env=env)
        else:
            out, _ = trainer.communicate(timeout=600)
            print(out, end="")
            _summary(url, run_id)
    finally:
        stop_process(trainer)
        stop_process(server)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
