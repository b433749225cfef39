"""The writer's compiled, column-wise gathering of series points says exactly what ``points_of`` says, and leaves the
garbage collector a few objects whatever the number of series."""

import gc
import random

import msgspec
import numpy as np
import pytest

from leyline import Metrics, encode, encode_event, make_event
from leyline.codec import decode_events, decode_frame_wire
from leyline.esper import EpochCompleted, SlotSnapshot
from leyline.frames import EventBatch
from leyline.payloads_ops import EventsDropped
from leyline.samples import SAMPLE_PAYLOADS, sample_events
from leyline.series import MAX_POINTS_PER_EVENT, marker_of, points_of
from nissa_server.store.series_gather import Charted, Gathered
from nissa_server.store.series_sql import SeriesWriter

pytestmark = pytest.mark.single_backend  # no database: the gathering itself


def _epochs(n: int, seed: int) -> list:
    """Epoch events whose seeds, labels and missing values vary, so one series is fed by several layouts."""
    rng = random.Random(seed)
    out = []
    for i in range(n):
        seeds = [SlotSnapshot(slot=f"r0c{j}", seed_id=rng.choice([None, f"s{j}"]), alpha=rng.random(),
                              contribution=rng.choice([None, rng.random()])) for j in range(rng.randrange(3))]
        payload = EpochCompleted(round=i // 5, accuracy=rng.random(), val_loss=rng.choice([None, rng.random()]),
                                 seeds=seeds, host_params=rng.choice([None, 1000 + i]))
        out.append(make_event(payload, run_id="r", seq=i + 1, ts=1.7e9 + i, step=i * 8, epoch=i,
                              env=rng.choice([None, 0, 1]), rank=rng.choice([0, 1])))
    return out


def _expected(blocks: list[tuple[int, int, bytes]]) -> tuple[dict, list]:
    """What ``points_of`` and ``marker_of`` say of the same blocks, as (run key, key) → (name, columns)."""
    series: dict = {}
    markers = []
    for run_key, first_id, body in blocks:
        for i, event in enumerate(decode_events(b"[" + body + b"]")):
            for p in points_of(event):
                cols = series.setdefault((run_key, p.key), (p.name, [[], [], [], [], []]))[1]
                for col, v in zip(cols, (p.step, p.epoch, np.nan if p.round is None else p.round, p.ts, p.value),
                                  strict=True):
                    col.append(v)
            marker = marker_of(event)
            if marker is not None:
                markers.append((run_key, first_id + i, marker))
    return series, markers


def _assert_same(blocks: list[tuple[int, int, bytes]]) -> dict:
    gathered = Gathered()
    for block in blocks:
        gathered.add(*block)
    got = gathered.series()
    series, markers = _expected(blocks)
    assert set(got) == set(series)
    for key, (name, cols) in series.items():
        assert got[key][0] == name
        for column, expected in zip(got[key][1], cols, strict=True):
            np.testing.assert_array_equal(column, np.array(expected, dtype=np.float64), err_msg=str(key))
    assert gathered.markers == markers
    return got


def _body(events: list) -> bytes:
    return b",".join(encode_event(e) for e in events)


def test_every_kind_and_varied_epochs_give_the_points_of_the_definition_in_order():
    samples = sample_events()
    epochs = _epochs(120, seed=7)
    got = _assert_same([(1, 1, _body(samples + epochs[:60])), (1, 200, _body(epochs[60:])),
                        (2, 1, _body(_epochs(30, seed=8)))])
    fed = [k for k in got if k[1].startswith("epoch_completed.accuracy{") and k[0] == 1]
    assert 2 <= len(fed) <= 6, "accuracy is one series per env and rank, whatever its seeds"
    assert sum(len(got[k][1][0]) for k in fed) == 120 + 1


def test_an_event_over_the_cap_keeps_the_same_points_as_the_definition():
    counts = {f"kind{i}": i for i in range(MAX_POINTS_PER_EVENT + 50)}
    big = make_event(EventsDropped(counts=counts, total=5), run_id="r", seq=1, ts=1.0)
    small = make_event(SAMPLE_PAYLOADS[big.kind], run_id="r", seq=2, ts=2.0)
    got = _assert_same([(1, 1, _body([big, small]))])
    assert sum(len(cols[0]) for _, cols in got.values()) == MAX_POINTS_PER_EVENT + len(points_of(small))


def test_events_as_ingest_decoded_them_give_what_their_stored_json_gives():
    # The series pass reads this server's writes from the payloads ingest validated, not from the JSON.
    counts = {f"kind{i}": i for i in range(MAX_POINTS_PER_EVENT + 50)}
    over = make_event(EventsDropped(counts=counts, total=5), run_id="r", seq=1, ts=1.0)
    events = [over, *sample_events(), *_epochs(80, seed=9)]
    events = [msgspec.structs.replace(e, seq=i + 1, run_id="r") for i, e in enumerate(events)]
    payloads: list = []
    frame = decode_frame_wire(encode(EventBatch(events=events)), payloads)
    from_json, decoded = Gathered(), Gathered()
    from_json.add(3, 10, _body(events))
    decoded.add_decoded(3, 10, list(zip(frame.events, payloads, strict=True)))
    want, got = from_json.series(), decoded.series()
    assert set(got) == set(want) and len(want) > 50
    for key, (name, arrays) in want.items():
        assert got[key][0] == name
        for a, b in zip(arrays, got[key][1], strict=True):
            np.testing.assert_array_equal(a, b, err_msg=str(key))
    assert decoded.markers == from_json.markers and decoded.markers


def _tracked_after(make) -> tuple[int, object]:
    """Objects the garbage collector tracks, more after ``make()`` than before (its result kept alive)."""
    gc.collect()
    before = len(gc.get_objects())
    kept = make()
    gc.collect()
    gc.collect()  # a collection untracks a tuple of untracked items: the items of a tuple in a tuple first
    return len(gc.get_objects()) - before, kept


def test_a_pass_over_thousands_of_names_leaves_the_collector_a_few_objects_not_one_per_series():
    # A run that logs 100,000 names made millions of tracked objects of a pass (a list per series and column):
    # each full collection walked them all, for seconds, and every ack and read waited.
    names = 6000
    events = [make_event(Metrics(values={f"w.{i:05d}": float(k) for i in range(at, at + 200)}), run_id="w",
                         seq=k + 1, ts=1.7e9 + k, step=k) for k, at in enumerate(range(0, names, 200))]
    body = _body(events + [msgspec.structs.replace(e, seq=e.seq + 30, step=e.step + 30) for e in events])

    def gathered() -> Gathered:
        out = Gathered()
        out.add(1, 1, body)
        return out

    SeriesWriter().rows_of(Charted(series=gathered().series()))  # what a first pass loads and caches
    few = names // 50  # one object per series: 50 times as many
    grown, kept = _tracked_after(gathered)
    assert grown < few, "gathered: a few flat columns"
    grown, series = _tracked_after(kept.series)
    assert len(series) == names and all(len(arrays[4]) == 2 for _, arrays in series.values())
    assert grown < few, "charted: numpy's arrays in tuples"
    writer = SeriesWriter()
    grown, rows = _tracked_after(lambda: writer.rows_of(Charted(series=series)))
    assert len(rows.chunks) == len(rows.stats) == names
    assert grown < few, "rows to write, and the writer's hints of when to merge"
    assert not any(gc.is_tracked(v) for v in (*rows.chunks[:10], *rows.stats[:10], *rows.labels[:10]))
