"""The series definition over every event kind: generic, so a new numeric field is a series by itself."""

import math
from typing import ClassVar

import msgspec
import pytest

from leyline import CommandAction, CommandStatus, CommandStatusChanged, EventKind, SummaryUpdated, make_event
from leyline.esper import EpochCompleted, EsperKind
from leyline.events import Event
from leyline.payloads import Payload
from leyline.samples import SAMPLE_PAYLOADS, sample_events
from leyline.series import (
    COORDINATE_FIELDS,
    IGNORED_FIELDS,
    MARKER_KINDS,
    NO_POINTS_KINDS,
    X_AXES,
    format_key,
    marker_of,
    parse_key,
    points_of,
    round_of,
    values_of,
    x_of,
)


def _numbers(value, field=""):
    """Numeric leaves of a payload as plain JSON values: what the definition must turn into points."""
    if isinstance(value, bool) or value is None or field in COORDINATE_FIELDS | IGNORED_FIELDS:
        return []
    if isinstance(value, (int, float)):
        return [float(value)]
    if isinstance(value, dict):
        return [x for k, v in value.items() for x in _numbers(v, k)]
    if isinstance(value, list):
        return [x for v in value for x in _numbers(v)]
    return []


@pytest.mark.parametrize("event", [e for e in sample_events() if e.kind.value != "metrics"  # its own test below
                                   and e.kind.value not in NO_POINTS_KINDS], ids=lambda e: e.kind.value)
def test_every_numeric_field_of_every_kind_is_a_point(event):
    points = points_of(event)
    expected = _numbers(msgspec.to_builtins(event.payload))
    assert sorted(p.value for p in points) == sorted(expected)
    for p in points:
        assert p.name.startswith(event.kind.value + ".")
        assert p.key == format_key(p.name, p.labels)
        assert parse_key(p.key) == (p.name, p.labels)
        assert p.labels["rank"] == str(event.rank)
        assert (p.step, p.epoch, p.ts) == (event.step, event.epoch, event.ts)
    assert len({p.key for p in points}) == len(points), "one point per series per event"
    assert values_of(event) == [(p.key, p.name, p.value) for p in points], "the fast path says the same"
    assert all(p.round == round_of(event) for p in points)


def test_names_and_labels_follow_fields_and_identity():
    epoch = make_event(SAMPLE_PAYLOADS[EsperKind.EPOCH_COMPLETED], run_id="r", seq=1, ts=5.0, step=40, epoch=3, env=2)
    keys = {p.key: p for p in points_of(epoch)}
    acc = keys["epoch_completed.accuracy{env=2,rank=0}"]
    assert (acc.value, acc.round, acc.step, acc.epoch) == (0.55, 1, 40, 3)
    assert "epoch_completed.seeds.alpha{blueprint=attention,env=2,rank=0,seed_id=s3,slot=r0c0}" in keys
    assert not any(".action" in k or ".round" in k for k in keys), "strings and coordinates are no series"
    ppo = next(e for e in sample_events() if e.kind is EsperKind.PPO_UPDATE)
    names = {p.key for p in points_of(ppo)}
    assert {"ppo_update.approx_kl{rank=0}", "ppo_update.entropy.op{rank=0}"} <= names
    assert "ppo_update.explained_variance{rank=0}" not in names, "None means not measured: no point"
    layers = next(e for e in sample_events() if e.kind is EventKind.DEBUG_LAYER_STATS)
    grad = next(p for p in points_of(layers) if p.name == "debug_layer_stats.layers.grad_norm")
    assert grad.labels == {"rank": "0", "model": "host", "layer": "blocks.0.conv.weight"}


class _Inner(msgspec.Struct, frozen=True):
    scope: str
    depth: int


class _Extended(EpochCompleted, kw_only=True, frozen=True):
    novelty: float = 3.5
    inner: _Inner = _Inner(scope="head", depth=7)
    flag: bool = True


class _Synthetic(Payload, kw_only=True, frozen=True):
    KIND: ClassVar[EventKind] = EventKind.HEARTBEAT
    uptime_s: float
    temperature_c: float
    per_gpu: dict[str, float]


def test_a_new_numeric_field_is_a_series_with_no_other_change():
    base = SAMPLE_PAYLOADS[EsperKind.EPOCH_COMPLETED]
    payload = _Extended(**msgspec.structs.asdict(base))
    event = Event(run_id="r", seq=1, ts=1.0, kind=EsperKind.EPOCH_COMPLETED, payload=payload)
    keys = {p.key: p.value for p in points_of(event)}
    assert keys["epoch_completed.novelty{rank=0}"] == 3.5
    assert keys["epoch_completed.inner.depth{rank=0,scope=head}"] == 7.0
    assert not any("flag" in k for k in keys), "a bool is not a series"
    synthetic = Event(run_id="r", seq=2, ts=2.0, rank=1, kind=EventKind.HEARTBEAT,
                      payload=_Synthetic(uptime_s=1.0, temperature_c=float("nan"), per_gpu={"0": 61.0, "a{b": 2.0}))
    points = {p.key: p.value for p in points_of(synthetic)}
    assert math.isnan(points.pop("heartbeat.temperature_c{rank=1}"))
    assert points == {"heartbeat.uptime_s{rank=1}": 1.0, "heartbeat.per_gpu.0{rank=1}": 61.0,
                      "heartbeat.per_gpu.a_b{rank=1}": 2.0}


@pytest.mark.parametrize("labels", [{}, {"env": "2"}, {"scope": "a,b=c{d}\\e", "rank": "0"}])
def test_keys_round_trip(labels):
    key = format_key("k.f", labels)
    assert parse_key(key) == ("k.f", labels)


def test_labels_are_sorted_in_a_key_and_bad_keys_are_refused():
    assert format_key("a", {"z": "1", "b": "2"}) == "a{b=2,z=1}"
    for bad in ("a{env}", "a{env=1", "a{=1}"):
        with pytest.raises(ValueError):
            parse_key(bad)


def test_markers_say_what_happened_to_the_run():
    by_kind = {e.kind: marker_of(e) for e in sample_events()}
    marked = {kind for kind, m in by_kind.items() if m is not None}
    assert marked == set(MARKER_KINDS)
    assert by_kind[EventKind.COMMAND_STATUS].label == "debug applied"
    assert by_kind[EsperKind.SEED_FOSSILIZED].kind == "fossilized"
    assert by_kind[EventKind.RUN_RESUMED].round == 2
    queued = CommandStatusChanged(command_id="c", action=CommandAction.STOP, status=CommandStatus.QUEUED)
    assert marker_of(make_event(queued, run_id="r", seq=1, ts=1.0)) is None
    done = CommandStatusChanged(command_id="c", action=CommandAction.CHECKPOINT, status=CommandStatus.COMPLETED)
    mark = marker_of(make_event(done, run_id="r", seq=1, ts=1.0, step=9, rank=1))
    assert (mark.kind, mark.label, mark.step, mark.rank) == ("command", "checkpoint completed", 9, 1)
    call = CommandStatusChanged(command_id="c", action=CommandAction.CALL, status=CommandStatus.COMPLETED,
                                result={"lr": 0.0100001, "groups": 2})
    assert marker_of(make_event(call, run_id="r", seq=1, ts=1.0)).label == "call completed lr=0.01 groups=2"


def test_x_axes():
    point = points_of(sample_events()[2])[0]
    assert X_AXES == ("step", "epoch", "round", "ts")
    assert [x_of(point, axis) for axis in X_AXES] == [2.0, 0.0, 1.0, point.ts]
    assert x_of(points_of(sample_events()[1])[0], "round") is None


def test_a_loop_metrics_are_series_of_their_own_names():
    from leyline import Metrics, make_event
    from leyline.series import points_of

    event = make_event(Metrics(values={"loss": 0.5, "grad/max": "inf"}, labels={"split": "val"}), run_id="r",
                       seq=1, ts=1.0, step=7)
    points = {p.key: p for p in points_of(event)}
    assert set(points) == {"loss{rank=0,split=val}", "grad/max{rank=0,split=val}"}
    assert points["loss{rank=0,split=val}"].value == 0.5 and points["loss{rank=0,split=val}"].step == 7
    assert points["grad/max{rank=0,split=val}"].value == float("inf")


def test_a_series_name_says_which_kind_it_comes_from():
    from leyline.series import kind_of_name

    pairs = {(kind_of_name(p.name), e.kind.value) for e in sample_events() for p in points_of(e)}
    assert len(pairs) > 10 and all(found == kind for found, kind in pairs)
    assert [kind_of_name(n) for n in ("loss", "val.loss", "metrics", "ppo_update.entropy.op")] == \
        ["metrics", "metrics", "metrics", "ppo_update"]


def test_the_run_machinery_series_are_internal_a_loops_own_never():
    from leyline.series import internal

    machinery = ["hub_health.queue_depth{rank=0}", "run_started.world_size", "run_finished.duration_s{rank=0}",
                 "system.cpu.percent{rank=0}", "heartbeat.step", "events_dropped.total"]
    own = ["val_loss", "val_loss{rank=0}", "run_finished_ratio", "system", "hub_health", "acc{env=2,rank=1}",
           "epoch_completed.accuracy{env=0,rank=0}", "ppo_update.entropy.op{rank=0}"]  # Esper's measures
    assert [k for k in machinery if not internal(k)] == [] and [k for k in own if internal(k)] == []
    # Every point of every kind: internal exactly where its kind's row says so.
    from leyline.kinds import KINDS

    for event in sample_events():
        for point in points_of(event):
            assert internal(point.key) == (event.kind.value != "metrics" and KINDS[event.kind].internal), point.key


def test_what_a_loop_says_of_its_results_is_no_point():
    event = make_event(SummaryUpdated(values={"test_acc": 0.91}, directions={"val_loss": "min"}), run_id="r", seq=1,
                       ts=1.0)
    assert points_of(event) == [] and values_of(event) == []
