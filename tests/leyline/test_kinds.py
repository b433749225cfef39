"""The kind table: one row per kind, read by the hub's drop policy and the store's index."""

import math
import typing
from typing import ClassVar

import msgspec
import pytest

from leyline import (
    CRITICAL_KINDS,
    DEFAULT_SEVERITY,
    INDEXED_KINDS,
    KINDS,
    MAX_METRICS,
    METRIC_KINDS,
    EventKind,
    Kind,
    Metrics,
    Payload,
    Severity,
    decode_event,
    decode_frame,
    encode,
    encode_event,
    make_event,
    metric_value,
)
from leyline.codec import encode_checked
from leyline.esper import EsperKind, SeedPruned
from leyline.esper.kinds import ESPER_KINDS
from leyline.events import AnyPayload, Event
from leyline.frames import EventBatch
from leyline.kind_spec import KindSpec, table
from leyline.kinds import CORE_KINDS, FAMILIES, KIND_NAMES
from nissa_server.store.sql import INDEXED_KIND_SET


def test_the_written_out_payload_union_is_the_table():
    members = typing.get_args(AnyPayload)
    assert len(members) == len(set(members)) == len(KINDS)
    assert set(members) == {spec.payload for spec in KINDS.values()}
    assert typing.get_type_hints(Event)["payload"] == AnyPayload


def test_the_derived_sets_follow_the_table():
    assert METRIC_KINDS == {k for k, spec in KINDS.items() if not spec.critical}
    assert CRITICAL_KINDS == set(KINDS) - METRIC_KINDS
    assert INDEXED_KIND_SET == {k.value for k in INDEXED_KINDS}
    assert DEFAULT_SEVERITY[EventKind.ANOMALY_DETECTED] is Severity.WARNING
    assert EventKind.METRICS in METRIC_KINDS and EventKind.RUN_STARTED in INDEXED_KINDS


def test_an_indexed_kind_is_critical():
    assert INDEXED_KINDS <= CRITICAL_KINDS


def _metrics_event(values, labels=None):
    return make_event(Metrics(values=values, labels=labels or {}), run_id="r", seq=1, ts=1.0, step=7)


def test_metrics_carry_non_finite_values_explicitly():
    values = {"loss": metric_value(math.nan), "grad/max": metric_value(math.inf), "lr": metric_value(3e-4),
              "neg": metric_value(-math.inf)}
    back = decode_event(encode_event(_metrics_event(values, {"split": "val"})))
    assert back.payload.values == {"loss": "nan", "grad/max": "inf", "lr": 3e-4, "neg": "-inf"}
    assert back.step == 7 and back.payload.labels == {"split": "val"}


@pytest.mark.parametrize("values", [
    {"bad name": 1.0},
    {"1st": 1.0},
    {"loss": math.nan},  # a bare NaN encodes as null: refused, not stored as a hole
    {"loss": "high"},
    {"loss": True},
    {},
    {f"m{i}": 1.0 for i in range(MAX_METRICS + 1)},
])
def test_bad_metrics_are_refused_at_their_field(values):
    with pytest.raises(msgspec.ValidationError, match=r"^metrics: .*\.values(`|\[)"):
        encode_checked(Metrics(values=values), run_id="r", rank=0, seq=1, ts=1.0, step=0, epoch=0, env=None,
                       severity=Severity.INFO)


def test_an_unknown_kind_is_refused_naming_the_kind():
    data = encode_event(_metrics_event({"loss": 1.0})).replace(b'"kind":"metrics"', b'"kind":"my_kind"')
    with pytest.raises(msgspec.ValidationError, match="kind"):
        decode_event(data)


ESPER_NAMES = {"epoch_completed", "seed_germinated", "seed_stage_changed", "seed_gate_evaluated", "seed_fossilized",
               "seed_pruned", "ppo_update", "lstm_health"}


def test_the_core_enum_holds_only_what_every_run_speaks():
    assert ESPER_NAMES.isdisjoint(EventKind)
    assert {kind.value for kind in EsperKind} == ESPER_NAMES


def test_esper_registers_its_kinds_in_the_table():
    assert {spec.payload.KIND for spec in ESPER_KINDS} == set(EsperKind)
    for kind in EsperKind:
        assert KIND_NAMES[kind.value] is kind and KINDS[kind] in ESPER_KINDS and kind not in KINDS.keys() - set(
            EsperKind)
    assert set(KINDS) == set(EventKind) | set(EsperKind)
    assert EsperKind.SEED_FOSSILIZED in INDEXED_KINDS and EsperKind.PPO_UPDATE in METRIC_KINDS


def test_an_esper_event_round_trips_with_its_own_kind():
    event = make_event(SeedPruned(slot="r0c1", seed_id="s4", blueprint="conv_heavy", reason="hurts"), run_id="r",
                       seq=3, ts=1.7e9, env=1)
    line = encode_event(event)
    assert b'"kind":"seed_pruned"' in line  # the wire is as it was: the kind's name
    back = decode_event(line)
    assert back == event and back.kind is EsperKind.SEED_PRUNED
    (framed,) = decode_frame(encode(EventBatch(events=[event]))).events
    assert framed.kind is EsperKind.SEED_PRUNED


class _ToyKind(Kind):
    STEP_DONE = "toy_step_done"


class _ClashKind(Kind):
    OWN = "toy_own"
    CLASH = "metrics"


class _StepDone(Payload, kw_only=True, frozen=True):
    KIND: ClassVar[Kind] = _ToyKind.STEP_DONE
    loss: float


class _Own(Payload, kw_only=True, frozen=True):
    KIND: ClassVar[Kind] = _ClashKind.OWN


class _Clash(Payload, kw_only=True, frozen=True):
    KIND: ClassVar[Kind] = _ClashKind.CLASH


def test_a_second_client_registers_its_kinds_as_esper_does():
    toy = (KindSpec(_StepDone, critical=False, internal=False),)
    kinds = table(CORE_KINDS, ESPER_KINDS, toy)
    assert kinds[_ToyKind.STEP_DONE] is toy[0] and kinds.keys() - {_ToyKind.STEP_DONE} == KINDS.keys()
    assert table(*FAMILIES) == KINDS


def test_the_table_refuses_a_kind_without_its_one_row():
    with pytest.raises(ValueError, match="kind 'metrics' has two rows: Metrics and _Clash"):
        table(CORE_KINDS, (KindSpec(_Own, critical=False), KindSpec(_Clash, critical=False)))
    with pytest.raises(ValueError, match="_ClashKind has kinds with no row: metrics"):  # Metrics' row is not its
        table(CORE_KINDS, (KindSpec(_Own, critical=False),))
    with pytest.raises(ValueError, match="EsperKind has kinds with no row: lstm_health"):
        table(CORE_KINDS, ESPER_KINDS[:-1])
