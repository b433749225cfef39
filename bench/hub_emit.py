"""Cost of ``NissaHub.emit`` on the training thread against a plain ``queue.Queue`` hub.

Both hubs do the same work behind the queue (one worker thread: seq, envelope, encode,
append to a log file); only the training thread's side is timed, one ``emit`` at a time
with ``perf_counter_ns``. Between steps the "training" runs a small torch op, which
releases the GIL as real training does, and each step emits a few events. Our hub is
measured twice: logging only, and streaming to a server that is down (nothing listens
on its port, so the sender keeps reconnecting). Rounds alternate between the hubs and the
median of the rounds is reported; the timer's own cost is printed and not subtracted.

    python bench/hub_emit.py [--steps 20000] [--rounds 3]
"""

from __future__ import annotations

import argparse
import pathlib
import queue
import socket
import statistics
import sys
import tempfile
import threading
import time

import torch

from leyline import DEFAULT_SEVERITY, Event, encode_event
from leyline.esper import EpochCompleted
from nissa.hub import HubConfig, NissaHub

EVENTS_PER_STEP = 4


class PlainQueueHub:
    """The baseline: ``queue.Queue.put_nowait`` and a worker doing what ours does."""

    def __init__(self, path: pathlib.Path, size: int = 10_000) -> None:
        self._q: queue.Queue = queue.Queue(maxsize=size)
        self._file = open(path, "ab", buffering=0)
        self.dropped = 0
        self._seq = 0
        self._thread = threading.Thread(target=self._work, name="plain-hub", daemon=True)
        self._thread.start()

    def emit(self, payload, *, step, epoch, env=None, severity=None) -> None:
        try:
            self._q.put_nowait((payload, step, epoch, env, severity, time.time()))
        except queue.Full:
            self.dropped += 1

    def _work(self) -> None:
        while True:
            items = [self._q.get()]
            while True:
                try:
                    items.append(self._q.get_nowait())
                except queue.Empty:
                    break
            lines = []
            for item in items:
                if item is None:
                    self._file.write(b"\n".join(lines) + b"\n" if lines else b"")
                    return
                payload, step, epoch, env, severity, ts = item
                self._seq += 1
                lines.append(encode_event(Event(run_id="plain", seq=self._seq, ts=ts, step=step, epoch=epoch,
                                                env=env, kind=payload.KIND,
                                                severity=severity or DEFAULT_SEVERITY[payload.KIND],
                                                payload=payload)))
            self._file.write(b"\n".join(lines) + b"\n")

    def close(self, timeout: float = 10.0) -> None:
        self._q.put(None)
        self._thread.join(timeout)
        self._file.close()


def _dead_server() -> str:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{s.getsockname()[1]}"


def _drive(hub, steps: int) -> list[int]:
    a = torch.randn(64, 64)
    out = torch.empty(64, 64)
    payload = EpochCompleted(accuracy=0.5, val_loss=1.2, train_loss=1.3)
    clock = time.perf_counter_ns
    samples: list[int] = []
    add = samples.append
    for step in range(steps):
        torch.mm(a, a, out=out)  # the "training step": releases the GIL like real kernels
        for env in range(EVENTS_PER_STEP):
            t0 = clock()
            hub.emit(payload, step=step, epoch=step // 100, env=env)
            add(clock() - t0)
    return samples


def _pcts(samples: list[int]) -> tuple[float, float]:
    samples.sort()
    return samples[len(samples) // 2], samples[int(len(samples) * 0.99)]


def _timer_cost() -> int:
    clock = time.perf_counter_ns
    deltas = []
    for _ in range(100_000):
        t0 = clock()
        deltas.append(clock() - t0)
    return int(statistics.median(deltas))


def options(argv: list[str] | None = None) -> argparse.Namespace:
    """The benchmark's settings from ``argv``: its own defaults, checked."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=20_000)
    parser.add_argument("--rounds", type=int, default=3)
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = options(argv)
    torch.set_num_threads(1)
    results: dict[str, list[tuple[float, float]]] = {"plain": [], "ours": [], "down": []}
    with tempfile.TemporaryDirectory() as tmp:
        root = pathlib.Path(tmp)
        dead = _dead_server()
        for r in range(args.rounds):
            plain = PlainQueueHub(root / f"plain{r}.jsonl")
            results["plain"].append(_pcts(_drive(plain, args.steps)))
            plain.close()
            for name, server in (("ours", None), ("down", dead)):
                hub = NissaHub(HubConfig(run_id=f"{name}{r}", log_dir=root, server=server,
                                         offline_grace_s=0.1)).start()
                results[name].append(_pcts(_drive(hub, args.steps)))
                hub.close(timeout=5)
    med = {k: (statistics.median(p for p, _ in v), statistics.median(q for _, q in v)) for k, v in results.items()}
    timer = _timer_cost()
    for name, (p50, p99) in med.items():
        print(f"{name:>6}: p50 {p50:7.0f} ns   p99 {p99:7.0f} ns   "
              f"({args.steps * EVENTS_PER_STEP} emits x {args.rounds})")
    print(f" timer: {timer} ns per perf_counter_ns pair (included above, in every hub alike)")
    (p50, p99), (b50, b99), (d50, d99) = med["ours"], med["plain"], med["down"]
    print(f"emit_p50_ns={p50:.0f} emit_p99_ns={p99:.0f} plain_p50_ns={b50:.0f} plain_p99_ns={b99:.0f} "
          f"down_p50_ns={d50:.0f} down_p99_ns={d99:.0f} timer_ns={timer} ratio={p50 / b50:.3f} "
          f"ratio_p99={p99 / b99:.3f} down_ratio={d50 / p50:.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
