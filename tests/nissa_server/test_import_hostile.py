"""``nissa import tensorboard`` survives what it reads: event files crafted with the ``tensorboard`` package's own
writer and protos, holding every kind of bad value (non-finite or misshapen histograms, a vector or a string
scalar, a negative step, a wall time that is NaN, infinite or 0, hparams that do not parse) beside good ones; a
symlink loop and links out of the log directory; a directory name holding escape sequences. Each bad value is
skipped, counted and named in the summary line; the good ones arrive; no run is imported twice; the terminal is
sent no escape sequence. A histogram's buckets are split across the bins they overlap (where values land)."""

from __future__ import annotations

import math
import os
import pathlib

import httpx
import numpy as np
import pytest

from leyline import EventKind, decode_event
from leyline.payloads_histogram import quantiles
from nissa.cli_import import main
from nissa.importer.tensorboard import read_run
from tests.e2e.api import trainer_events

pytest.importorskip("tensorboard")
WALL = 1.7e9


def _value(tag: str, plugin: str, array: object, content: bytes = b"") -> object:
    from tensorboard.compat.proto import summary_pb2
    from tensorboard.util import tensor_util

    metadata = summary_pb2.SummaryMetadata(plugin_data=summary_pb2.SummaryMetadata.PluginData(
        plugin_name=plugin, content=content))
    return summary_pb2.Summary.Value(tag=tag, metadata=metadata, tensor=tensor_util.make_tensor_proto(array))


def _write(directory: pathlib.Path, values: list[tuple[int, float, object]]) -> None:
    """An event file in ``directory`` with one event per (step, wall time, summary value)."""
    from tensorboard.compat.proto import event_pb2, summary_pb2
    from tensorboard.summary.writer.event_file_writer import EventFileWriter

    directory.mkdir(parents=True, exist_ok=True)
    writer = EventFileWriter(str(directory))
    for step, wall, value in values:
        writer.add_event(event_pb2.Event(step=step, wall_time=wall, summary=summary_pb2.Summary(value=[value])))
    writer.close()


def _good(step: int) -> tuple[int, float, object]:
    return step, WALL + step, _value("loss", "scalars", np.array(1.0 / (step + 1), dtype=np.float32))


BAD = [
    (10, WALL, _value("weights", "histograms", np.array([[math.nan, 1.0, 3.0], [1.0, 2.0, 1.0]]))),
    (11, WALL, _value("weights", "histograms", np.array([[-math.inf, 1.0, 3.0]]))),
    (12, WALL, _value("weights", "histograms", np.array([1.0, 2.0, 3.0]))),
    (13, WALL, _value("weights", "histograms", np.array([[0.0, 1.0, -4.0]]))),
    (14, WALL, _value("loss", "scalars", np.array([1.0, 2.0], dtype=np.float32))),
    (15, WALL, _value("loss", "scalars", np.array(b"one point two"))),
    (-5, WALL, _value("loss", "scalars", np.array(0.5, dtype=np.float32))),
    (2**53 + 1, WALL, _value("loss", "scalars", np.array(0.5, dtype=np.float32))),
    (16, math.nan, _value("loss", "scalars", np.array(0.5, dtype=np.float32))),
    (17, math.inf, _value("weights", "histograms", np.array([[0.0, 1.0, 3.0]]))),
    (18, 0.0, _value("loss", "scalars", np.array(0.5, dtype=np.float32))),
    (19, WALL, _value("hp", "hparams", np.array(0.0), content=b"\xff\xff not a proto")),
]
REASONS = {"histogram edges not finite": 2, "histogram of shape [3], not [left, right, count] buckets": 1,
           "histogram count negative or not finite": 1, "scalar of shape [2], not one number": 1,
           "scalar that is not a number": 1, "step negative or past 2^53": 2, "wall time not finite": 2,
           "wall time before 2000 or in the future": 1, "hparams that do not parse": 1}


@pytest.mark.single_backend  # one store is enough: what is sent is what ingest takes on either
def test_bad_values_are_skipped_counted_and_named_and_the_rest_arrives(tmp_path, server_url, capsys):
    _write(tmp_path / "tb" / "exp", [_good(0), *BAD, _good(1), _good(2)])
    argv = ["import", "tensorboard", str(tmp_path / "tb"), "--server", server_url, "--log-dir", str(tmp_path / "imp")]
    assert main(argv) == 0
    err = capsys.readouterr().err
    assert "Traceback" not in err, err
    *progress, summary = err.splitlines()
    assert progress[0].endswith("server holds 5/5"), err  # started, 3 points, finished
    head, skipped = summary.split("; skipped ", 1)
    assert head == "imported 1 run, 3 values" and skipped.startswith(f"{sum(REASONS.values())}: "), summary
    for why, n in REASONS.items():
        assert f"{why} ×{n} (first: exp " in skipped, (why, summary)
    assert "(first: exp weights at step 10)" in skipped and "(first: exp loss at step -5)" in skipped
    run_id = httpx.get(f"{server_url}/runs").json()[0]["run_id"]
    loss = httpx.get(f"{server_url}/runs/{run_id}/series/loss").json()["series"][0]
    assert loss["x"] == [0, 1, 2]
    assert main(argv) == 0, "the same log again: nothing refused, nothing new"
    assert len(trainer_events(server_url, run_id)) == 5


@pytest.mark.single_backend  # no server
def test_links_are_followed_only_inside_the_log_directory_and_each_directory_once(tmp_path, capsys):
    tb, elsewhere = tmp_path / "tb", tmp_path / "elsewhere"
    _write(tb / "a", [_good(0)])
    _write(tb / "a" / "b", [_good(0)])
    _write(elsewhere / "secret", [_good(0)])
    os.symlink("..", tb / "a" / "up")  # a loop: up/a/up/a/… walked 41 directories, 13 runs twice
    os.symlink(tb / "a", tb / "alias")  # inside: the same directory by another name, read once
    os.symlink(elsewhere, tb / "out")  # a directory out of the log directory
    os.symlink(next((elsewhere / "secret").iterdir()), tb / "a" / "b" / "events.out.tfevents.1.link")
    assert main(["import", "tensorboard", str(tb), "--log-dir", str(tmp_path / "imp")]) == 0
    *progress, summary = capsys.readouterr().err.splitlines()
    assert [line.split(" -> ")[0] for line in progress] == ["[1/2] a", "[2/2] a/b"]
    assert summary == "imported 2 runs, 2 values"
    logs = sorted(p.parent.name.rsplit("-", 1)[0] for p in (tmp_path / "imp").glob("*/events.jsonl"))
    assert logs == ["a", "a-b"]


@pytest.mark.single_backend  # no server
def test_names_reach_the_terminal_as_text(tmp_path, capsys):
    evil = "evil\x1b]0;pwned\x07\x1b[2J\u202egnp"
    _write(tmp_path / "tb" / evil, [_good(0), (1, math.nan, _value("x", "scalars", np.array(1.0)))])
    assert main(["import", "tensorboard", str(tmp_path / "tb"), "--log-dir", str(tmp_path / "imp")]) == 0
    err = capsys.readouterr().err
    assert not any(c in err for c in ("\x1b", "\x07", "\u202e")), repr(err)
    assert "evil\ufffd]0;pwned\ufffd\ufffd[2J\ufffdgnp" in err  # the run's name, as the server stores it
    (log,) = (tmp_path / "imp").glob("*/events.jsonl")
    assert b"\\u001b" not in log.read_bytes() and "\x1b" not in log.read_text()


@pytest.mark.single_backend  # no server
def test_a_buckets_count_is_split_across_the_bins_it_overlaps(tmp_path):
    # 10 values in [0, 1) and 30 in [1, 4): over 64 bins of 1/16 from 0 to 4, the first bucket spreads over bins
    # 0-15 and the second over 16-63; the median is 2.0 (the 20th of 40: 10 more of 30 into [1, 4)). The bucket's
    # centre put all 10 in bin 8 and all 30 in bin 40 (a median of 2.5).
    _write(tmp_path / "tb", [(0, WALL, _value("w", "histograms", np.array([[0.0, 1.0, 10.0], [1.0, 4.0, 30.0]])))])
    (point,) = read_run(tmp_path / "tb", "tb").points
    (d,) = point[0].histograms
    assert (d.min, d.max, d.count, len(d.bins)) == (0.0, 4.0, 40, 64)
    assert sum(d.bins[:16]) == 10 and sum(d.bins[16:]) == 30 and max(d.bins) == 1, d.bins
    median = quantiles(d, (0.5,))
    assert median is not None and median[0] == pytest.approx(2.0, abs=1 / 16)
    _write(tmp_path / "const", [(0, WALL, _value("c", "histograms", np.array([[3.0, 3.0, 5.0]])))])
    (point,) = read_run(tmp_path / "const", "const").points
    (c,) = point[0].histograms
    assert (c.min, c.max, c.count, c.bins[0], sum(c.bins)) == (3.0, 3.0, 5, 5, 5), "a constant: one bin"


@pytest.mark.single_backend  # no store
def test_a_csv_step_past_int64_is_skipped_not_a_refused_log(tmp_path, capsys):
    path = tmp_path / "export.csv"
    path.write_text("step,wall_time,loss\n0,1700000000,1.0\n1e30,1700000001,0.5\n2,nan,0.25\n")
    assert main(["import", "csv", str(path), "--log-dir", str(tmp_path / "imp")]) == 0
    summary = capsys.readouterr().err.splitlines()[-1]
    assert summary.startswith("imported 1 run, 2 values; skipped 1: step negative or past 2^53 ×1"), summary
    (log,) = (tmp_path / "imp").glob("*/events.jsonl")
    kinds = [decode_event(line).kind for line in log.read_bytes().splitlines()]
    assert kinds == [EventKind.RUN_STARTED, EventKind.METRICS, EventKind.METRICS, EventKind.RUN_FINISHED]
