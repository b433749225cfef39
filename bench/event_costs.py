"""Where a stored event's CPU goes on the server's event loop: each per-event step of ingest and charting,
timed alone on the lab's frames, beside the cheapest read of the same bytes.

The frames are ``bench/lab.py``'s (``bench/streams.py``: an ``epoch_completed`` of ~480 bytes with two
seeds, ``--frame`` events to a frame, 32 runs). Each step runs over all of them, round after round, all
steps interleaved so load on the machine falls on each alike; a step's figure is its best round, in
microseconds per event. The baseline is ``msgspec.json.decode`` of each frame into plain values (no
validation, no types): what reading the bytes at all costs.

Steps, in the order ingest takes them:

- ``envelopes``: the frame decoded, each envelope validated, payloads left raw (``leyline.codec``);
- ``payloads``: each payload validated by its kind's type;
- ``checks``: the frame's run, rank and seq order, and repeats against the stream;
- ``write``: the store write built (``batches.build_write``), of which ``bodies`` is each event encoded as
  stored, NUL and size checked;
- ``gather``: the series points read from the validated payloads (at commit);
- ``columns``: the points turned into columns (the series pass).

``msgspec_work`` is what msgspec itself does of these (``envelopes`` + ``payloads`` + encoding alone).
Ends with one line: key=value pairs, each step also as a ratio to the baseline.

    python bench/event_costs.py [--frame 20] [--events 32000] [--rounds 7]
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable

import msgspec
from streams import frame_maker  # bench/ is the script's directory

from leyline.codec import _check_run_ids, _decode_any_frame, payload_of
from nissa_server import batches
from nissa_server.runs import Stream
from nissa_server.store.series_gather import Gathered


class _Run:
    run_key = 1
    run_id = "lab"


def _frames(events: int, frame: int) -> list[tuple[int, bytes]]:
    """(run key, frame) of 32 runs' streams."""
    out = []
    per_run = events // 32
    for run in range(32):
        make = frame_maker(f"lab-{run:03d}", 1.7e9, 1000)
        out += [(run, make(seq, min(frame, per_run + 1 - seq)).encode()) for seq in range(1, per_run + 1, frame)]
    return out


def _steps(runs_frames: list[tuple[int, bytes]]) -> dict[str, Callable[[], object]]:
    """Each step as a function over every frame, its input made ready beforehand. What a step makes of a
    frame is dropped before the next frame, as ingest drops it (only ``gather`` keeps its points)."""
    frames = [f for _, f in runs_frames]
    wires = [_decode_any_frame(f) for f in frames]
    payloads = [[payload_of(w) for w in wire.events] for wire in wires]
    encoder = msgspec.json.Encoder()

    def envelopes() -> None:
        for f in frames:
            _check_run_ids(_decode_any_frame(f).events)

    def checks() -> None:
        for wire in wires:
            batches.check_batch(wire.events, wire.events[0].run_id, 0, 10_000)
            batches.repeats(Stream(), wire.events)

    def write() -> None:
        for wire, decoded in zip(wires, payloads, strict=True):
            batches.build_write(_Run, 0, Stream(), wire.events, 1 << 20, session="s", payloads=decoded)

    def gather_and_columns() -> Gathered:
        gathered = Gathered()
        first = 1
        for (run_key, _), wire, decoded in zip(runs_frames, wires, payloads, strict=True):
            gathered.add_decoded(run_key, first, list(zip(wire.events, decoded, strict=True)))
            first += len(decoded)
        return gathered

    gathered = gather_and_columns()
    return {
        "baseline": lambda: _each(frames, msgspec.json.decode),
        "envelopes": envelopes,
        "payloads": lambda: _each(wires, lambda wire: [payload_of(w) for w in wire.events]),
        "checks": checks,
        "encode_alone": lambda: _each(wires, lambda wire: [encoder.encode(e) for e in wire.events]),
        "bodies": lambda: _each(wires, lambda wire: batches._encode_checked(wire.events, 1 << 20)),
        "write": write,
        "gather": gather_and_columns,
        "columns": gathered.series,  # reads the gathered rows, leaves them as they are
    }


def _each(items: list, step: Callable[[object], object]) -> None:
    for item in items:
        step(item)


def options(argv: list[str] | None = None) -> argparse.Namespace:
    """The benchmark's settings from ``argv``: its own defaults, checked."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--frame", type=int, default=20, help="events per frame (the lab's at 1,000 events/s)")
    parser.add_argument("--events", type=int, default=32_000)
    parser.add_argument("--rounds", type=int, default=7)
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = options(argv)
    frames = _frames(args.events, args.frame)
    n = sum(len(_decode_any_frame(f).events) for _, f in frames)
    steps = _steps(frames)
    best = dict.fromkeys(steps, float("inf"))
    for _ in range(args.rounds):
        for name, step in steps.items():
            began = time.perf_counter()
            step()
            best[name] = min(best[name], (time.perf_counter() - began) / n * 1e6)
    us = dict(best)
    us["msgspec_work"] = us["envelopes"] + us["payloads"] + us.pop("encode_alone")
    parts = ("envelopes", "payloads", "checks", "write", "gather", "columns")
    us["total"] = sum(us[p] for p in parts)
    for name in ("baseline", *parts[:4], "bodies", *parts[4:], "total", "msgspec_work"):
        print(f"{name:>13}: {us[name]:6.3f} us/event  ({us[name] / us['baseline']:.2f} x baseline)")
    print(" ".join([f"events={n}", f"frame={args.frame}"] + [f"{k}_us={v:.4g}" for k, v in us.items()]
                   + [f"{k}_ratio={v / us['baseline']:.3f}" for k, v in us.items() if k != "baseline"]))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
