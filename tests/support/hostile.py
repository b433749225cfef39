"""A hostile run: every text field of every event kind, and of the run's declaration (its name, config keys and
values, commands and their help, labels), seeded with console markup (``[/]``, ``[@click=…]`` actions,
``[link=…]``), terminal sequences (OSC 52 to the clipboard, OSC 8 hyperlinks, CSI clear-screen, window titles, a
C1 CSI) and HTML. What a viewer must show as text, never act on."""

from __future__ import annotations

import re
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import msgspec

from leyline import (
    SERVER_RANK,
    AnomalyDetected,
    Event,
    EventKind,
    Metrics,
    Payload,
    ProfileCompleted,
    RunStarted,
    Severity,
    make_event,
)
from leyline.calls import ArgSpec, CommandSpec
from leyline.esper import EpochCompleted
from leyline.kinds import SERVER_ONLY_KINDS
from leyline.payloads_ops import TopOp
from leyline.samples import SAMPLE_PAYLOADS

MARKER = "pwned"
"""In every action and link below: a screen that carries it in a click action or a hyperlink interpreted one."""

SEQUENCES = ("\x1b]52;c;cHduZWQ=\x07", "\x1b]8;;http://evil.example/pwned\x1b\\O8\x1b]8;;\x1b\\", "\x1b[2J\x1b[H",
             "\x1b]0;pwned\x07", "\x1b]2;pwned\x1b\\", "\x9b2J", "\x07\x08\x7f\r", "\u202etxt.exe\u2066")
"""Clipboard, hyperlink, clear screen, window titles, a C1 CSI, bell, backspace, DEL, carriage return, a
right-to-left override and an isolate."""


def pieces(click_dir: Path) -> list[str]:
    """Each attack alone; ``click_dir`` is where ``app.screenshot`` would write if a click ran one."""
    return [
        "[/]",
        f"[@click=app.screenshot('{MARKER}.svg','{click_dir}')]CLICK[/]",
        "[@click=app.quit]QUIT[/]",
        f"[link=file:///etc/{MARKER}]LINK[/link]",
        "[b]B[/b][/b]",
        *SEQUENCES,
        f"<script>window.{MARKER}=1</script>",
        f"<img src=x onerror=window.{MARKER}=1>",
    ]


def candidates(click_dir: Path) -> list[str]:
    """What a text field is seeded with, the first its type takes: all of it, a short mix, each piece alone."""
    each = pieces(click_dir)
    return ["".join(each), each[1] + each[0] + "".join(SEQUENCES[:4]) + each[3], *each]


def _leaves(node: Any) -> Iterator[tuple[Any, Any, bool]]:
    """(container, key, is a dict key) of every string in a JSON-like tree; a dict's values before its keys."""
    if isinstance(node, dict):
        for key in list(node):
            yield from _leaves(node[key])
            if isinstance(node[key], str):
                yield node, key, False
            yield node, key, True
    elif isinstance(node, list):
        for i, item in enumerate(node):
            if isinstance(item, str):
                yield node, i, False
            else:
                yield from _leaves(item)


def poisoned(payload: Payload, click_dir: Path) -> Payload:
    """``payload`` with every string (values and dict keys) replaced by the first candidate its type accepts."""
    data = msgspec.to_builtins(payload)
    kind = type(payload)

    def valid(tree: Any, text: str = "") -> Payload | None:
        """The payload ``tree`` makes, if its type takes it and keeps one more ``text`` than before (a field's name
        is no dict key: a struct ignores it)."""
        try:
            out = msgspec.convert(tree, kind)
        except (msgspec.ValidationError, ValueError, TypeError):
            return None
        kept = msgspec.json.encode(text)[1:-1]
        return out if not text or msgspec.json.encode(out).count(kept) > current.count(kept) else None

    current = msgspec.json.encode(payload)

    for container, key, is_key in list(_leaves(data)):
        if key not in container if is_key else not isinstance(container[key], str):
            continue
        for text in candidates(click_dir):
            if is_key:
                value = container.pop(key)
                container[text] = value
                if (made := valid(data, text)) is not None:
                    current = msgspec.json.encode(made)
                    break
                del container[text]
                container[key] = value
            else:
                old = container[key]
                container[key] = text
                if (made := valid(data, text)) is not None:
                    current = msgspec.json.encode(made)
                    break
                container[key] = old
    out = valid(data)
    assert out is not None
    return out


def declaration(click_dir: Path, run_id: str = "") -> RunStarted:
    """The run's own declaration: name, config keys and values, commands with hostile help and defaults."""
    spec = CommandSpec(name="set_lr", help="h", args=[ArgSpec(name="value", type="str", help="h", required=False,
                                                             default="d")])
    config = {"k": "v", "lr": 0.1, "opt.x": 1.0, "id": sum(map(ord, run_id))}  # "id": two runs' configs differ
    return poisoned(RunStarted(name="n", config=config, commands=[spec]), click_dir)


def hostile_events(run_id: str, click_dir: Path, *, ts0: float = 1.7e9, server_alerts: bool = True,
                   finish: bool = False) -> list[Event]:
    """A run that says everything with hostile texts: its declaration, a few epochs to chart (labels too), an
    anomaly, a profile, one event of every other kind, and (``server_alerts``) alerts as the server writes them,
    at ``SERVER_RANK``, which only a run log replayed carries in (a server refuses them from a trainer)."""
    seq = 0
    out: list[Event] = []

    def add(payload: Payload, step: int, rank: int = 0, severity: Severity | None = None) -> None:
        nonlocal seq
        seq += 1
        out.append(make_event(payload, run_id=run_id, seq=seq, ts=ts0 + seq, step=step, epoch=step // 10, env=0,
                              rank=rank, severity=severity))

    add(declaration(click_dir, run_id), 0)
    for step in range(1, 6):
        add(poisoned(EpochCompleted(round=step, accuracy=0.1 * step, val_loss=1.0 / step, action="a"), click_dir),
            step * 10)
        add(poisoned(Metrics(values={"loss": 1.0 / step}, labels={"split": "s"}), click_dir), step * 10)
    add(poisoned(AnomalyDetected(anomaly="kl_spike", detail="d", evidence={"k": 1.0}), click_dir), 60,
        severity=Severity.ERROR)
    add(poisoned(ProfileCompleted(window="w", batches=2, trace_path="t", wall_s=0.5, artifact="a", top_ops=[
        TopOp(name="o", calls=1, cpu_time_us=1.0, self_cpu_time_us=1.0)]), click_dir), 60)
    skip = {EventKind.RUN_STARTED, EventKind.RUN_FINISHED, EventKind.ANOMALY_DETECTED, EventKind.PROFILE_COMPLETED}
    for kind, sample in SAMPLE_PAYLOADS.items():
        if kind not in skip and kind not in SERVER_ONLY_KINDS:
            add(poisoned(sample, click_dir), 60)
    if server_alerts:
        for kind in SERVER_ONLY_KINDS:
            add(poisoned(SAMPLE_PAYLOADS[kind], click_dir), 60, rank=SERVER_RANK)
    if finish:
        add(poisoned(SAMPLE_PAYLOADS[EventKind.RUN_FINISHED], click_dir), 70)
    return out


def as_stored_long_ago(db_path: Path, ts: dict[str, float]) -> None:
    """Make a SQLite store hold what a server of before the ingest rules may have: control characters where it
    now keeps U+FFFD (in names, configs and event bodies), and each run's start at ``ts[run_id]``."""
    with sqlite3.connect(db_path) as conn:
        conn.execute("UPDATE runs SET name = replace(name, char(65533), char(27))")
        conn.execute(r"UPDATE runs SET config = CAST(replace(CAST(config AS TEXT), '\ufffd', '\u001b') AS BLOB)")
        for table in ("event_blocks", "rare_events"):
            conn.execute(rf"UPDATE {table} SET body = CAST(replace(CAST(body AS TEXT), '\ufffd', '\u001b') AS BLOB)")
        for run_id, started in ts.items():
            conn.execute("UPDATE runs SET started_at = ? WHERE run_id = ?", (started, run_id))


_TEXTUAL_OWN = re.compile(r"\x1b\[[0-9;]*[mHJK]|\x1b\[\?[0-9;]*[hl]")
"""What Textual itself writes around the screen's text: colours and styles, cursor moves."""


def control_characters(terminal: str) -> list[str]:
    """The control characters (C0 but newline, DEL, C1, a bidi embedding, override or isolate) in what would be
    written to a terminal, once Textual's own sequences are taken out (a newline ends each line)."""
    rest = _TEXTUAL_OWN.sub("", terminal)
    return sorted({repr(c) for c in rest if (ord(c) < 0x20 and c != "\n") or 0x7F <= ord(c) <= 0x9F
                   or 0x202A <= ord(c) <= 0x202E or 0x2066 <= ord(c) <= 0x2069})
