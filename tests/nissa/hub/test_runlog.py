"""The run log: reading any seq back through the sparse index, recovery, and a late upload's view."""

from __future__ import annotations

import pathlib
import random

import pytest

from leyline import Heartbeat, encode_event, make_event
from nissa.hub.runlog import INDEX_STRIDE, LogCorrupt, LogFile, LogReader, RunLog


def _lines(start: int, n: int, run_id: str = "r") -> list[bytes]:
    return [encode_event(make_event(Heartbeat(uptime_s=float(s)), run_id=run_id, seq=s, ts=1.0))
            for s in range(start, start + n)]


def _seqs(lines: list[bytes]) -> list[int]:
    return [int(line.split(b'"seq":')[1].split(b",")[0]) for line in lines]


def test_reader_finds_every_seq_across_index_strides(tmp_path):
    log = RunLog(tmp_path / "events.jsonl")
    total = INDEX_STRIDE * 3 + 15
    done = 0
    for size in (1, INDEX_STRIDE - 1, 2, INDEX_STRIDE * 2, 13):
        log.append(_lines(done + 1, size))
        done += size
    assert done == total and log.last_seq == total
    reader = LogReader(log.path, log.index)
    rng = random.Random(0)
    for start in [1, INDEX_STRIDE, INDEX_STRIDE + 1, total] + [rng.randint(1, total) for _ in range(50)]:
        got = reader.read(start, log.committed, max_events=40, max_bytes=1 << 20)
        assert _seqs(got) == list(range(start, min(total, start + 39) + 1))
    assert reader.read(total + 1, log.committed, 10, 1 << 20) == []
    reader.close()
    log.close()


def test_reader_stops_at_the_committed_mark_and_at_the_byte_limit(tmp_path):
    log = RunLog(tmp_path / "events.jsonl")
    log.append(_lines(1, 10))
    committed = log.committed
    log.append(_lines(11, 10))
    reader = LogReader(log.path, log.index)
    assert _seqs(reader.read(1, committed, 100, 1 << 20)) == list(range(1, 11))
    assert _seqs(reader.read(11, log.committed, 100, 1)) == [11]
    log.close()


def test_recovery_truncates_a_partial_line_and_continues(tmp_path):
    path = tmp_path / "events.jsonl"
    path.write_bytes(b"\n".join(_lines(1, 5)) + b"\n" + _lines(6, 1)[0][:20])
    log = RunLog(path)
    assert log.last_seq == 5
    log.append(_lines(6, 2))
    assert _seqs(path.read_bytes().splitlines()) == list(range(1, 8))


def test_a_foreign_file_is_refused(tmp_path):
    path = tmp_path / "events.jsonl"
    path.write_bytes(b"\n".join(_lines(3, 2)) + b"\n")  # starts at seq 3: not a whole log
    with pytest.raises(LogCorrupt):
        LogFile(path)
    path.write_bytes(b"hello\n")
    with pytest.raises(LogCorrupt):
        RunLog(path)


def test_logfile_reports_run_rank_and_length(tmp_path):
    path = tmp_path / "events.jsonl"
    path.write_bytes(b"\n".join(_lines(1, 300, run_id="run-x")) + b"\n")
    log = LogFile(path)
    assert (log.run_id, log.rank, log.committed[0]) == ("run-x", 0, 300)


def test_a_log_that_links_out_of_its_run_directory_is_not_followed(tmp_path):
    outside = tmp_path / "elsewhere.jsonl"
    outside.write_bytes(b"\n".join(_lines(1, 3)) + b"\n")  # a whole log, but another directory's
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    for target in (outside, pathlib.Path("/dev/zero")):
        link = run_dir / "events.jsonl"
        link.unlink(missing_ok=True)
        link.symlink_to(target)
        with pytest.raises(LogCorrupt, match="not followed"):
            LogFile(link)
        with pytest.raises(LogCorrupt, match="not followed"):
            RunLog(link)
    assert outside.read_bytes().count(b"\n") == 3  # nothing appended through the link
    inside = run_dir / "events.rank0.real"
    inside.write_bytes(outside.read_bytes())
    (run_dir / "events.jsonl").unlink()
    (run_dir / "events.jsonl").symlink_to(inside.name)  # a link within the directory is the directory's file
    assert LogFile(run_dir / "events.jsonl").committed[0] == 3
