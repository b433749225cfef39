"""How ``torch.compile`` fares in a run: compiles, recompiles, graph breaks, fallbacks to eager.

Compile can fail quietly: past the recompile limit Dynamo runs a frame eagerly and only logs
a warning once, and a graph break splits a graph without a word. ``CompileMonitor`` reads
what Dynamo records of every frame it compiles (``torch._dynamo.utils.get_compilation_metrics``:
the compile id, the recompile reason, the failure type and reason, the compile time) and its
graph-break counter, from the moment the monitor was made, and sums them into the
``CompileStats`` that each epoch's ``phase_timing`` event carries when the run compiles.

Dynamo keeps the last 64 frames' records: ``stats()`` reads new ones at every call (once an
epoch), far more often than a run compiles 64 frames.
"""

from __future__ import annotations

from torch._dynamo.utils import counters, get_compilation_metrics

from leyline import CompileStats


def _graph_breaks() -> int:
    return sum(counters["graph_break"].values())


def _first_line(text: str | None) -> str | None:
    return None if not text else text.strip().splitlines()[0][:300]


class CompileMonitor:
    """``stats()``: ``CompileStats`` of everything compiled since this monitor was made."""

    def __init__(self, mode: str) -> None:
        self.mode = mode
        self._seen: set[tuple[str | None, int | None]] = {self._key(m) for m in get_compilation_metrics()}
        self._frames: set[str | None] = set()
        self._breaks0 = _graph_breaks()
        self._compiles = self._recompiles = self._fallbacks = 0
        self._seconds = 0.0
        self._last_reason: str | None = None

    @staticmethod
    def _key(metrics: object) -> tuple[str | None, int | None]:
        return getattr(metrics, "compile_id", None), getattr(metrics, "start_time_us", None)

    def stats(self) -> CompileStats:
        for m in get_compilation_metrics():
            key = self._key(m)
            if key in self._seen:
                continue
            self._seen.add(key)
            self._seconds += m.entire_frame_compile_time_s or 0.0
            if m.compile_id in self._frames:  # a later record of the same compile (its backward)
                continue
            self._frames.add(m.compile_id)
            self._compiles += 1
            if m.fail_type is not None:  # the frame runs eagerly (recompile limit, untraceable code)
                self._fallbacks += 1
                self._last_reason = _first_line(m.fail_reason) or m.fail_type
            elif m.recompile_reason is not None:
                self._recompiles += 1
                self._last_reason = _first_line(m.recompile_reason)
        return CompileStats(mode=self.mode, compiles=self._compiles, recompiles=self._recompiles,
                            graph_breaks=_graph_breaks() - self._breaks0, eager_fallbacks=self._fallbacks,
                            compile_s=round(self._seconds, 3), last_reason=self._last_reason)
