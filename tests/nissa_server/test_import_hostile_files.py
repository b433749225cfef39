"""``nissa import tensorboard`` survives what it reads, past what ``test_import_hostile`` covers: a count past
2^63-1 (a bucket's, or its buckets' together), a scalar tensor whose values do not fit its shape, legacy
``HistogramProto`` values that are malformed before TensorBoard's own migration pads or drops their buckets, and
event files that are garbage or cut off. Each is skipped, counted and named in the summary line; the rest is
imported."""

from __future__ import annotations

import pathlib

import numpy as np
import pytest

from nissa.cli_import import main
from tests.nissa_server.test_import_hostile import WALL, _good, _value, _write

pytest.importorskip("tensorboard")
pytestmark = pytest.mark.single_backend  # no server: what is read, and the summary line


def _legacy(tag: str, limits: list[float], counts: list[float]) -> object:
    """A ``histo`` value as TensorFlow 1 and ``tensorboardX`` write them (``bucket_limit``: each bucket's right
    edge)."""
    from tensorboard.compat.proto import summary_pb2

    return summary_pb2.Summary.Value(tag=tag, histo=summary_pb2.HistogramProto(
        min=0.0, max=limits[-1] if limits else 0.0, num=sum(counts), bucket_limit=limits, bucket=counts))


def _import(tmp_path: pathlib.Path, capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    rc = main(["import", "tensorboard", str(tmp_path / "tb"), "--log-dir", str(tmp_path / "imp")])
    err = capsys.readouterr().err
    assert "Traceback" not in err, err
    return rc, err.splitlines()[-1]


def test_a_count_past_int64_is_skipped_not_the_whole_import(tmp_path, capsys):
    _write(tmp_path / "tb" / "exp", [
        _good(0),
        (1, WALL, _legacy("h_huge", [1.0, 2.0], [1e30, 1.0])),
        (2, WALL, _value("t_huge", "histograms", np.array([[0.0, 1.0, 1e30]]))),
        (3, WALL, _value("t_sum", "histograms", np.array([[0.0, 1.0, 6e18], [1.0, 2.0, 6e18]]))),
        _good(4)])
    rc, summary = _import(tmp_path, capsys)
    assert rc == 0
    assert summary.startswith("imported 1 run, 2 values; skipped 3: "), summary
    assert "histogram count past 2^63-1 ×2 (first: exp h_huge at step 1)" in summary, summary
    assert ("histogram the contract refuses ×1 (first: exp t_sum at step 3: count 12000000000000000000: it counts "
            "0 to 2^63-1)") in summary, summary


def test_a_scalar_tensor_whose_values_do_not_fit_its_shape_is_skipped(tmp_path, capsys):
    from tensorboard.compat.proto import summary_pb2, tensor_pb2, tensor_shape_pb2, types_pb2

    empty = tensor_pb2.TensorProto(dtype=types_pb2.DT_FLOAT, tensor_shape=tensor_shape_pb2.TensorShapeProto())
    metadata = summary_pb2.SummaryMetadata(plugin_data=summary_pb2.SummaryMetadata.PluginData(plugin_name="scalars"))
    _write(tmp_path / "tb" / "exp", [
        _good(0), (1, WALL, summary_pb2.Summary.Value(tag="empty", metadata=metadata, tensor=empty)), _good(2)])
    rc, summary = _import(tmp_path, capsys)
    assert (rc, summary) == (0, "imported 1 run, 2 values; skipped 1: scalar tensor that does not parse ×1 "
                                "(first: exp empty at step 1)")


def test_a_malformed_legacy_histogram_is_skipped_before_tensorboard_pads_or_drops_its_buckets(tmp_path, capsys):
    _write(tmp_path / "tb" / "exp", [
        _good(0),
        (1, WALL, _legacy("short", [1.0, 2.0], [1.0, 2.0, 3.0])),
        (2, WALL, _legacy("backwards", [3.0, 2.0, 1.0], [1.0, -1.0, 1.0])),
        (3, WALL, _legacy("negative", [1.0, 2.0, 3.0], [1.0, -1.0, 1.0])),
        (4, WALL, _legacy("fine", [1.0, 2.0, 3.0], [1.0, 0.0, 1.0])),
        _good(5)])
    rc, summary = _import(tmp_path, capsys)
    assert (rc, summary) == (0, "imported 1 run, 3 values; skipped 3: "
                                "histogram bucket with its right edge before its left ×1 "
                                "(first: exp backwards at step 2); "
                                "histogram count negative or not finite ×1 (first: exp negative at step 3); "
                                "histogram of bucket limits and counts of different lengths ×1 "
                                "(first: exp short at step 1: 2 limits, 3 counts)")


def _event_file(directory: pathlib.Path) -> pathlib.Path:
    (path,) = directory.glob("events.out.tfevents.*")
    return path


def test_a_garbage_event_file_is_skipped_and_named_and_the_rest_imported(tmp_path, capsys):
    _write(tmp_path / "tb" / "good", [_good(0), _good(1)])
    (tmp_path / "tb" / "bad").mkdir()
    (tmp_path / "tb" / "bad" / "events.out.tfevents.1.evil\x1b[2J\nname").write_bytes(b"\x07 not a record " * 64)
    rc, summary = _import(tmp_path, capsys)
    assert (rc, summary) == (0, "imported 1 run, 2 values; skipped 1: event file corrupt ×1 (first: bad "
                                "events.out.tfevents.1.evil\ufffd[2J␊name: record length's checksum does not match "
                                "at byte 0)")


def test_a_file_cut_off_gives_the_values_before_the_cut_and_counts_it(tmp_path, capsys):
    _write(tmp_path / "tb" / "exp", [_good(0), _good(1), _good(2)])
    path = _event_file(tmp_path / "tb" / "exp")
    whole = path.read_bytes()
    path.write_bytes(whole[:-10] + b"garbage that follows")
    rc, summary = _import(tmp_path, capsys)
    assert rc == 0
    assert summary.startswith("imported 1 run, 2 values; skipped 1: event file corrupt ×1 (first: exp "
                              f"{path.name}: record data's checksum does not match at byte "), summary
    path.write_bytes(whole[:-10])
    rc, summary = _import(tmp_path, capsys)  # the same values: the same run log, with its end cut off instead
    assert rc == 0
    assert summary.startswith("imported 1 run, 2 values; skipped 1: event file corrupt ×1 (first: exp "
                              f"{path.name}: record cut off at byte "), summary
