"""``nissa sweep create`` probes a ``pbt`` spec's command before it creates the sweep: a real server, the real
command, tiny loops written here. A loop that cannot be a PBT trial is refused with the reason and nothing is
created (no sweep, no run); grid, random and tpe specs are not probed; a command that crashes, or reaches no step,
is refused saying what happened."""

from __future__ import annotations

import json
import pathlib
import subprocess
import sys
import time
from collections.abc import Iterator

import httpx
import pytest

from tests.e2e.procs import ServerProcess, _env, script

pytestmark = pytest.mark.timeout(300)  # each probe is a process that imports torch: slow on a busy machine
ROOT = pathlib.Path(__file__).resolve().parents[2]

TINY_LOOP = """\
import pathlib, sys
import nissa

restore, log_dir, marker = sys.argv[1] == "restore", sys.argv[2], pathlib.Path(sys.argv[3])
run = nissa.init(run_name="tiny", config={"lr": 0.1}, log_dir=log_dir, system_metrics=False)
run.on_hparams(lambda values: None)
run.on_checkpoint(lambda step: None)
if restore:
    run.on_restore(lambda path: None)
try:
    with run:
        for _ in range(3):
            with run.step():
                run.log({"val_loss": 1.0})
finally:  # a probe ends the process at the first step: this never runs there
    marker.write_text("the loop's finally ran")
"""


@pytest.fixture
def server(tmp_path: pathlib.Path) -> Iterator[ServerProcess]:
    proc = ServerProcess(tmp_path / "db" / "nissa.db").start()
    try:
        yield proc
    finally:
        proc.stop()


def _spec(tmp_path: pathlib.Path, method: str, command: list[str]) -> pathlib.Path:
    extra = "trials = 2\nparallel = 2\n" if method == "pbt" else "trials = 2\n"
    path = tmp_path / f"{method}-{len(list(tmp_path.glob('*.toml')))}.toml"
    path.write_text(f'name = "probe"\nmethod = "{method}"\ncommand = {json.dumps(command)}\n{extra}'
                    '[metric]\nname = "val_loss"\n[parameters.lr]\nmin = 0.001\nmax = 0.3\nlog = true\n')
    return path


def _create(server: ServerProcess, spec: pathlib.Path, *flags: str) -> subprocess.CompletedProcess:
    return subprocess.run([script("nissa"), "sweep", "create", str(spec), "--server", server.url, *flags],
                          capture_output=True, text=True, timeout=240, env=_env(), cwd=ROOT)


def _listed(server: ServerProcess, what: str) -> list:
    reply = httpx.get(f"{server.url}/{what}", timeout=30)
    reply.raise_for_status()
    return reply.json()


def _tiny(tmp_path: pathlib.Path, hooks: str) -> tuple[list[str], pathlib.Path, pathlib.Path]:
    """The tiny loop's command, the log dir it names and the file its ``finally`` writes."""
    loop = tmp_path / "tiny_loop.py"
    loop.write_text(TINY_LOOP)
    log_dir, marker = tmp_path / f"runs-{hooks}", tmp_path / f"finally-{hooks}"
    return [sys.executable, str(loop), hooks, str(log_dir), str(marker)], log_dir, marker


def test_a_pbt_spec_over_a_loop_without_on_restore_is_refused_and_its_random_spec_created(server, tmp_path):
    command, log_dir, marker = _tiny(tmp_path, "no-restore")
    refused = _create(server, _spec(tmp_path, "pbt", command))
    assert refused.returncode == 1, refused.stderr
    reason = refused.stderr
    assert "it sets no run.on_restore, which a pbt sweep needs" in reason, reason
    assert "run.on_restore loads them into a bottom trial" in reason, reason
    assert "grid, random and tpe sweeps, early stopping included, need none of them" in reason, reason
    assert "no run.on_checkpoint" not in reason and "no run.on_hparams" not in reason, reason  # the loop sets them
    assert "nothing was created" in reason and refused.stdout == "", refused
    assert _listed(server, "sweeps") == [] and _listed(server, "runs") == []
    # The probe's run logged nowhere the loop said, and the loop's finally never ran: the process just ended.
    assert not log_dir.exists() and not marker.exists()

    created = _create(server, _spec(tmp_path, "random", command))
    assert created.returncode == 0, created.stderr
    assert "probing" not in created.stderr, created.stderr  # random specs are not probed
    assert [s["sweep_id"] for s in _listed(server, "sweeps")] == [created.stdout.split()[-1]]
    assert not log_dir.exists() and not marker.exists()


def test_a_pbt_spec_over_a_loop_with_every_hook_is_created(server, tmp_path):
    log_dir = tmp_path / "example-runs"
    example = [sys.executable, str(ROOT / "examples" / "sweep_loop.py"), "--steps", "300", "--log-dir", str(log_dir)]
    created = _create(server, _spec(tmp_path, "pbt", example))
    assert created.returncode == 0, created.stderr
    assert "probing the command" in created.stderr, created.stderr
    command, tiny_log_dir, marker = _tiny(tmp_path, "restore")
    again = _create(server, _spec(tmp_path, "pbt", command))
    assert again.returncode == 0, again.stderr
    assert len(_listed(server, "sweeps")) == 2
    assert _listed(server, "runs") == []  # the probes' runs talked to no server
    assert not log_dir.exists() and not tiny_log_dir.exists() and not marker.exists()


def test_esper_train_as_a_pbt_sweeps_command_is_refused_naming_the_hooks_it_lacks(server, tmp_path):
    # esper-train counts its own steps (run.hooks.step_boundary) and sets on_hparams, not on_checkpoint/on_restore.
    esper = [script("esper-train"), "--rounds", "6", "--log-every", "0", "--log-dir", str(tmp_path / "runs")]
    refused = _create(server, _spec(tmp_path, "pbt", esper))
    assert refused.returncode == 1, refused.stderr
    assert "it sets no run.on_checkpoint and no run.on_restore, which a pbt sweep needs" in refused.stderr
    assert _listed(server, "sweeps") == [] and _listed(server, "runs") == [] and not (tmp_path / "runs").exists()


def test_a_command_that_crashes_before_its_first_step_is_refused_with_its_status_and_stderr(server, tmp_path):
    crash = [sys.executable, "-c", "import sys; sys.stderr.write('loading data\\nno such file: \\x1b[31mdata.bin\\n');"
                                   " sys.exit(3)"]
    refused = _create(server, _spec(tmp_path, "pbt", crash))
    assert refused.returncode == 1, refused.stderr
    assert "exited with status 3 before its loop's first step boundary" in refused.stderr, refused.stderr
    assert "  | loading data\n  | no such file: \u241b[31mdata.bin" in refused.stderr, refused.stderr
    assert "\x1b" not in refused.stderr  # the command's text is shown, never acted on by the terminal
    assert _listed(server, "sweeps") == []


def test_a_command_that_never_steps_is_killed_at_the_probe_timeout_and_refused(server, tmp_path):
    pid_file = tmp_path / "grandchild.pid"
    stuck = [sys.executable, "-c", "import subprocess, sys, time; p = subprocess.Popen(['sleep', '600']); "
                                   f"open({str(pid_file)!r}, 'w').write(str(p.pid)); "
                                   "sys.stderr.write('waiting for a lock\\n'); sys.stderr.flush(); time.sleep(600)"]
    spec = _spec(tmp_path, "pbt", stuck)
    refused = _create(server, spec, "--probe-timeout", "3")
    assert refused.returncode == 1, refused.stderr
    assert "reached no step boundary within 3 s (--probe-timeout) and was killed" in refused.stderr, refused.stderr
    assert "  | waiting for a lock" in refused.stderr, refused.stderr
    assert _listed(server, "sweeps") == []
    grandchild = int(pid_file.read_text())  # what the command started was killed with it
    deadline = time.monotonic() + 30
    while _alive(grandchild) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not _alive(grandchild)

    created = _create(server, spec, "--no-probe")  # not probed: the first trial's own check stays the backstop
    assert created.returncode == 0 and "probing" not in created.stderr, created.stderr
    assert len(_listed(server, "sweeps")) == 1


def _alive(pid: int) -> bool:
    """``pid`` runs (neither gone nor a zombie waiting for its new parent to reap it)."""
    try:
        return pathlib.Path(f"/proc/{pid}/stat").read_text().rsplit(") ", 1)[-1][:1] != "Z"
    except FileNotFoundError:
        return False
