"""Gathering series points: from the payloads ingest decoded to validate a frame, against decoding the
stored JSON again, on the same events.

The lab's event (``bench/streams.py``: an ``epoch_completed`` with two seeds, 224 series over 32 runs),
in frames of ``--frame`` events. Each round gathers every frame both ways into fresh ``Gathered`` and
turns them into columns (what a series pass writes), the two interleaved round after round so load on
the machine falls on both alike; the figure per way is the best round's microseconds per event.

Ends with one line: key=value pairs, ratio = decoded / stored JSON.

    python bench/series_gather.py [--events 32000] [--frame 20] [--rounds 5]
"""

from __future__ import annotations

import argparse
import time

from streams import frame_maker  # bench/ is the script's directory

from leyline.codec import decode_frame_wire
from nissa_server.store.series_gather import Gathered


def _frames(events: int, frame: int) -> tuple[list[tuple[int, int, bytes]], list[tuple[int, int, list]]]:
    """The same events as stored blocks (run key, first id, body) and as ingest decoded them."""
    stored, decoded = [], []
    runs = 32
    per_run = events // runs
    first_id = 1
    for run_key in range(runs):
        make = frame_maker(f"run-{run_key}", 1.7e9, 1000)
        for seq in range(1, per_run + 1, frame):
            text = make(seq, min(frame, per_run + 1 - seq))
            payloads: list = []
            wire = decode_frame_wire(text, payloads)
            body = text[text.index("[") + 1:text.rindex("]")].encode()
            stored.append((run_key, first_id, body))
            decoded.append((run_key, first_id, list(zip(wire.events, payloads, strict=True))))
            first_id += len(payloads)
    return stored, decoded


def _once(add, blocks) -> float:
    gathered = Gathered()
    began = time.perf_counter()
    for block in blocks:
        add(gathered, *block)
    gathered.series()
    return time.perf_counter() - began


def options(argv: list[str] | None = None) -> argparse.Namespace:
    """The benchmark's settings from ``argv``: its own defaults, checked."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--events", type=int, default=32_000)
    parser.add_argument("--frame", type=int, default=20)
    parser.add_argument("--rounds", type=int, default=5)
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = options(argv)
    stored, decoded = _frames(args.events, args.frame)
    n = sum(len(events) for _, _, events in decoded)
    best = {"stored": float("inf"), "decoded": float("inf")}
    for _ in range(args.rounds):
        best["stored"] = min(best["stored"], _once(Gathered.add, stored))
        best["decoded"] = min(best["decoded"], _once(Gathered.add_decoded, decoded))
    us = {k: v / n * 1e6 for k, v in best.items()}
    print(f"{n:,} events: from the stored JSON {us['stored']:.2f} us/event, from ingest's payloads "
          f"{us['decoded']:.2f} us/event")
    print(f"events={n} frame={args.frame} stored_json_us_per_event={us['stored']:.3f} "
          f"decoded_us_per_event={us['decoded']:.3f} ratio={us['decoded'] / us['stored']:.3f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
