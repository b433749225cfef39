"""Encode and validate cost of one event envelope: msgspec (chosen) against pydantic v2 and dataclasses + orjson.

The same epoch_completed event (envelope + payload with two slot snapshots) is modelled in each
library; each candidate encodes it to JSON bytes and decodes + validates those bytes back to typed
objects. orjson serializes dataclasses natively; dataclasses + orjson has no validation of its own: its
"validate" is orjson.loads plus constructing the dataclasses, a lower bound on any hand-written checking.

Ends with one line: key=value pairs, ratio = msgspec time / best other candidate time.
"""

from __future__ import annotations

import argparse
import dataclasses
import enum
import functools
import statistics
import sys
import time
from typing import Literal

import orjson
import pydantic

from leyline import decode_event, encode_event, make_event
from leyline.esper import EpochCompleted, SeedStage, SlotSnapshot


def _leyline_event():
    seeds = [
        SlotSnapshot(slot="r0c0", stage=SeedStage.BLENDING, seed_id="s3", blueprint="attention",
                     alpha=0.6, contribution=0.012),
        SlotSnapshot(slot="r0c1"),
    ]
    payload = EpochCompleted(round=1, accuracy=0.55, val_loss=1.31, train_loss=1.4, reward=0.02,
                             action="GERMINATE", seeds=seeds)
    return make_event(payload, run_id="bench-run", seq=42, ts=1.7e9, step=120, epoch=3, env=1)


class Stage(enum.StrEnum):
    BLENDING = "BLENDING"
    TRAINING = "TRAINING"


class PSlot(pydantic.BaseModel):
    slot: str
    stage: Stage | None = None
    seed_id: str | None = None
    blueprint: str | None = None
    alpha: float = 0.0
    contribution: float | None = None


class PPayload(pydantic.BaseModel):
    round: int = 0
    accuracy: float
    val_loss: float
    train_loss: float | None = None
    reward: float | None = None
    action: str | None = None
    seeds: list[PSlot] = []
    host_params: int | None = None
    fossilized_params: int = 0


class PEvent(pydantic.BaseModel):
    run_id: str = pydantic.Field(min_length=1, max_length=128, pattern=r"^[A-Za-z0-9._:-]+$")
    rank: int = 0
    seq: int = pydantic.Field(ge=1)
    ts: float
    step: int = 0
    epoch: int = 0
    env: int | None = None
    kind: Literal["epoch_completed"]
    severity: Literal["debug", "info", "warning", "error", "critical"] = "info"
    payload: PPayload
    v: int = 1


@dataclasses.dataclass
class DSlot:
    slot: str
    stage: str | None = None
    seed_id: str | None = None
    blueprint: str | None = None
    alpha: float = 0.0
    contribution: float | None = None


@dataclasses.dataclass
class DPayload:
    accuracy: float
    val_loss: float
    round: int = 0
    train_loss: float | None = None
    reward: float | None = None
    action: str | None = None
    seeds: list[DSlot] = dataclasses.field(default_factory=list)
    host_params: int | None = None
    fossilized_params: int = 0


@dataclasses.dataclass
class DEvent:
    run_id: str
    seq: int
    ts: float
    kind: str
    payload: DPayload
    rank: int = 0
    step: int = 0
    epoch: int = 0
    env: int | None = None
    severity: str = "info"
    v: int = 1


def _dc_decode(data: bytes) -> DEvent:
    raw = orjson.loads(data)
    p = raw.pop("payload")
    seeds = [DSlot(**s) for s in p.pop("seeds")]
    return DEvent(payload=DPayload(seeds=seeds, **p), **raw)


def _time(fn, arg, rounds: int, calls: int) -> float:
    """Median over ``rounds`` of the mean ns per call of ``calls`` calls."""
    samples = []
    for _ in range(rounds):
        t0 = time.perf_counter_ns()
        for _ in range(calls):
            fn(arg)
        samples.append((time.perf_counter_ns() - t0) / calls)
    return statistics.median(samples)


def options(argv: list[str] | None = None) -> argparse.Namespace:
    """The benchmark's settings from ``argv``: its own defaults, checked."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=7, help="timed rounds of each call (their median is kept)")
    parser.add_argument("--calls", type=int, default=20_000, help="calls a round")
    args = parser.parse_args(argv)
    if args.rounds < 1 or args.calls < 1:
        parser.error("--rounds and --calls must be >= 1")
    return args


def main(argv: list[str] | None = None) -> int:
    args = options(argv)
    timed = functools.partial(_time, rounds=args.rounds, calls=args.calls)
    ev = _leyline_event()
    data = encode_event(ev)
    pev = PEvent.model_validate_json(data)
    dev = _dc_decode(data)
    assert decode_event(data) == ev and pev.payload.seeds[0].alpha == 0.6 and dev.payload.seeds[0].alpha == 0.6
    rows = {
        "msgspec": (timed(encode_event, ev), timed(decode_event, data)),
        "pydantic": (timed(lambda m: m.model_dump_json(), pev), timed(PEvent.model_validate_json, data)),
        "dataclasses_orjson": (timed(orjson.dumps, dev), timed(_dc_decode, data)),
    }
    print(f"{'library':<20}{'encode ns':>12}{'validate ns':>14}", file=sys.stderr)
    for name, (enc, val) in rows.items():
        print(f"{name:<20}{enc:>12.0f}{val:>14.0f}", file=sys.stderr, flush=True)
    best_other_enc = min(v[0] for k, v in rows.items() if k != "msgspec")
    best_other_val = min(v[1] for k, v in rows.items() if k != "msgspec")
    enc, val = rows["msgspec"]
    print(
        f"msgspec_encode_ns={enc:.0f} msgspec_validate_ns={val:.0f} "
        f"pydantic_encode_ns={rows['pydantic'][0]:.0f} pydantic_validate_ns={rows['pydantic'][1]:.0f} "
        f"dc_orjson_encode_ns={rows['dataclasses_orjson'][0]:.0f} "
        f"dc_orjson_validate_ns={rows['dataclasses_orjson'][1]:.0f} "
        f"encode_ratio={enc / best_other_enc:.2f} validate_ratio={val / best_other_val:.2f} "
        f"ratio={(enc + val) / min(sum(v) for k, v in rows.items() if k != 'msgspec'):.2f}"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
