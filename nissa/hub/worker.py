"""The worker's writing step: queued items → envelopes with seq → encoded lines → the run log."""

from __future__ import annotations

import logging

import msgspec

from leyline import DEFAULT_SEVERITY, AnyPayload, DecodeError, Event, Severity, encode_event
from leyline.codec import encode_checked
from leyline.frames import MAX_EVENT_BYTES
from nissa.hub.config import HubConfig
from nissa.hub.ratelog import RateLimitedLog
from nissa.hub.runlog import RunLog
from nissa.hub.stats import HubStats

logger = logging.getLogger(__name__)


class EventWriter:
    """Turns queued ``(payload, step, epoch, env, severity, ts)`` tuples into log lines.

    ``seq`` is assigned only to events that encode (and validate): the log stays gap-free
    whatever is refused, and a refused event is counted and logged at a limited rate.
    """

    def __init__(self, config: HubConfig, log: RunLog, stats: HubStats, ratelog: RateLimitedLog) -> None:
        self._run_id = config.run_id
        self._rank = config.rank
        self._validate = config.validate
        self._log = log
        self._stats = stats
        self._ratelog = ratelog
        self._reported: dict[str, int] = {}

    def write(self, items: list) -> bool:
        """Append the items to the log; True when anything was committed."""
        seq = self._log.last_seq
        lines: list[bytes] = []
        for payload, step, epoch, env, severity, ts in items:
            line = self._encode(payload, seq + 1, step, epoch, env, severity, ts)
            if line is not None:
                seq += 1
                lines.append(line)
        if not lines:
            return False
        try:
            self._log.append(lines)
        except OSError as err:
            self._stats.unlogged += len(lines)
            self._stats.last_error = f"run log: {err}"
            self._ratelog.log(logging.ERROR, "log", "nissa hub: cannot write %s: %s (%d events lost)",
                              self._log.path, err, len(lines))
            return False
        self._stats.logged = seq
        return True

    def _encode(self, payload: AnyPayload, seq: int, step: int, epoch: int, env: int | None,
                severity: Severity | None, ts: float) -> bytes | None:
        # What a loop emits is checked here, not trusted: an object that is no payload fails below and is counted.
        try:
            kind = payload.KIND
            severity = severity or DEFAULT_SEVERITY[kind]
            if self._validate:
                line = encode_checked(payload, run_id=self._run_id, rank=self._rank,
                                      seq=seq, ts=ts, step=step, epoch=epoch, env=env, severity=severity)
            else:
                line = encode_event(Event(run_id=self._run_id, rank=self._rank, seq=seq, ts=ts, step=step,
                                          epoch=epoch, env=env, kind=kind, severity=severity, payload=payload))
            if len(line) > MAX_EVENT_BYTES:
                raise ValueError(f"{len(line)} bytes, more than the {MAX_EVENT_BYTES} an event may have")
            return line
        except (AttributeError, KeyError, TypeError, ValueError, msgspec.EncodeError, DecodeError) as err:
            self._stats.invalid += 1
            self._stats.last_error = f"invalid event: {err}"
            self._ratelog.warning("invalid", "nissa hub: refused an invalid %s event: %s",
                                  type(payload).__name__, err)
            return None

    def drop_delta(self, totals: dict[str, int]) -> dict[str, int]:
        """Drops since the last report, per kind (the counters themselves are never reset)."""
        delta = {k: n - self._reported.get(k, 0) for k, n in totals.items() if n > self._reported.get(k, 0)}
        self._reported.update(totals)
        return delta
