"""``nissa import``: TensorBoard event files written by ``torch.utils.tensorboard`` and a CSV file become runs
on a real server (each store), with their scalars, histograms, hparams and text; a second import of the same
source changes nothing, and a source that changed is refused rather than made a second history."""

from __future__ import annotations

import math

import httpx
import pytest
import torch

from leyline import EventKind
from nissa.cli_import import main
from tests.e2e.api import trainer_events

pytest.importorskip("tensorboard")


def _write_tensorboard(logdir) -> None:
    from torch.utils.tensorboard import SummaryWriter

    for name, scale in (("exp_a", 1.0), ("exp_b", 2.0)):
        writer = SummaryWriter(str(logdir / name))
        for step in range(0, 50, 10):
            writer.add_scalar("train/loss", scale / (step + 1), step)
            writer.add_scalar("lr", 0.1, step)
            writer.add_histogram("weights", torch.linspace(-scale, scale, 101), step)
        writer.add_scalar("train/loss", math.nan, 50)
        writer.add_text("notes", f"run {name}", 50)
        writer.close()
    with SummaryWriter(str(logdir / "sweep")) as writer:
        writer.add_hparams({"lr": 0.01, "opt": "adam"}, {"hparam/acc": 0.75}, run_name="trial")


def _runs(url: str) -> dict[str, dict]:
    return {r["name"]: r for r in httpx.get(f"{url}/runs").json()}


def test_tensorboard_logs_become_runs_once(tmp_path, server_url, capsys):
    _write_tensorboard(tmp_path / "tb")
    argv = ["import", "tensorboard", str(tmp_path / "tb"), "--server", server_url, "--log-dir", str(tmp_path / "imp"),
            "--project", "vision"]
    assert main(argv) == 0
    *progress, summary = capsys.readouterr().err.splitlines()
    assert summary == "imported 3 runs, 35 values"  # 2 × (5 steps × 2 scalars and a histogram, a NaN, a text), 1
    assert [line.split(" -> ")[0] for line in progress] == ["[1/3] exp_a", "[2/3] exp_b", "[3/3] sweep/trial"]
    assert [line.rsplit(": ", 1)[1] for line in progress] == ["12 points, server holds 14/14"] * 2 + [
        "1 point, server holds 3/3"]
    runs = _runs(server_url)
    assert {"exp_a", "exp_b", "sweep/trial"} <= set(runs)
    assert {runs[n]["project"] for n in ("exp_a", "exp_b", "sweep/trial")} == {"vision"}
    a = runs["exp_a"]["run_id"]
    events = trainer_events(server_url, a)
    assert events[0].kind is EventKind.RUN_STARTED and events[-1].kind is EventKind.RUN_FINISHED
    assert events[-1].payload.status == "completed"
    loss = httpx.get(f"{server_url}/runs/{a}/series/train/loss").json()["series"][0]
    assert loss["x"] == [0, 10, 20, 30, 40, 50] and loss["y"][0] == 1.0 and loss["y"][-1] is None  # NaN kept
    assert [e.ts for e in events[1:3]] == sorted(e.ts for e in events[1:3]) and events[1].ts > 1.6e9  # its wall time
    hist = httpx.get(f"{server_url}/runs/{a}/histograms/weights").json()["histograms"]
    assert [h["step"] for h in hist] == [0, 10, 20, 30, 40] and hist[0]["count"] == 101
    assert hist[0]["max"] == pytest.approx(1.0, abs=0.1) and hist[0]["min"] == pytest.approx(-1.0, abs=0.1)
    (text,) = [e for e in events if e.kind is EventKind.TEXT]
    assert (text.step, text.payload.text) == (50, "run exp_a")
    sweep = trainer_events(server_url, runs["sweep/trial"]["run_id"])
    assert {k: sweep[0].payload.config[k] for k in ("lr", "opt")} == {"lr": 0.01, "opt": "adam"}

    stored = {name: len(trainer_events(server_url, r["run_id"])) for name, r in _runs(server_url).items()}
    logs = sorted((tmp_path / "imp").glob("*/events.jsonl"))
    before = [p.read_bytes() for p in logs]
    assert main(argv) == 0  # again: the same ids and seqs, nothing new
    assert {name: len(trainer_events(server_url, r["run_id"])) for name, r in _runs(server_url).items()} == stored
    assert [p.read_bytes() for p in logs] == before and len(_runs(server_url)) == len(stored)

    from torch.utils.tensorboard import SummaryWriter

    with SummaryWriter(str(tmp_path / "tb" / "exp_a")) as writer:  # the directory changed since
        writer.add_scalar("train/loss", 0.01, 60)
    capsys.readouterr()
    assert main(argv) == 1
    assert "gives another run log than the one imported before" in capsys.readouterr().err


def test_a_csv_file_becomes_a_run_per_run_column_value(tmp_path, server_url):
    path = tmp_path / "export.csv"
    path.write_text("run,step,loss,acc,note\nbase,0,1.0,0.1,x\nbase,10,0.5,,y\nwide,0,2.0,0.2,\nwide,10,1.5,0.3,\n")
    argv = ["import", "csv", str(path), "--server", server_url, "--log-dir", str(tmp_path / "imp")]
    assert main(argv) == 0 and main(argv) == 0
    runs = _runs(server_url)
    assert set(runs) == {"base", "wide"}
    loss = httpx.get(f"{server_url}/runs/{runs['base']['run_id']}/series/loss").json()["series"][0]
    acc = httpx.get(f"{server_url}/runs/{runs['base']['run_id']}/series/acc").json()["series"][0]
    assert (loss["x"], loss["y"], acc["x"]) == ([0, 10], [1.0, 0.5], [0])  # an empty cell is no point
    assert len(trainer_events(server_url, runs["wide"]["run_id"])) == 4


def test_bad_sources_are_one_line(tmp_path, capsys):
    assert main(["import", "tensorboard", str(tmp_path / "nowhere")]) == 2
    assert "not a directory" in capsys.readouterr().err
    (tmp_path / "empty").mkdir()
    assert main(["import", "tensorboard", str(tmp_path / "empty")]) == 1
    assert "no event files under" in capsys.readouterr().err
    (tmp_path / "x.csv").write_text("step\n1\n")
    assert main(["import", "csv", str(tmp_path / "x.csv")]) == 2
    assert "no metric columns" in capsys.readouterr().err


def test_a_progress_bar_on_a_terminal(tmp_path, server_url, monkeypatch):
    """On a terminal, the lines per run are written above a progress bar (reading, then uploading)."""
    import fcntl
    import os
    import struct
    import termios
    import threading

    _write_tensorboard(tmp_path / "tb")
    master, slave = os.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 100, 0, 0))  # a terminal's 100 columns
    seen = bytearray()

    def drain() -> None:
        while chunk := _read(master):
            seen.extend(chunk)

    reader = threading.Thread(target=drain, daemon=True)
    reader.start()
    with os.fdopen(slave, "w", buffering=1) as tty:
        monkeypatch.setattr("sys.stderr", tty)
        argv = ["import", "tensorboard", str(tmp_path / "tb"), "--server", server_url, "--log-dir",
                str(tmp_path / "imp")]
        assert main(argv) == 0
    reader.join(10)
    os.close(master)
    text = seen.decode(errors="replace")
    assert "reading" in text and "uploading" in text and "3/3" in text and "100%" in text  # the bars
    assert "[3/3] sweep/trial -> " in text and "[1/3] exp_a -> " in text


def _read(fd: int) -> bytes:
    import os

    try:
        return os.read(fd, 4096)
    except OSError:  # the terminal's other end closed
        return b""
