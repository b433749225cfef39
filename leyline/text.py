"""Text a run wrote, made harmless for whoever reads it: the one definition of which characters are control
characters, what is stored in their place, and how a viewer shows one that still reaches it.

A run's texts (its name, config keys and values, labels, series names, messages, results, command help, notes)
are data. Control characters are every C0 one except tab, newline and carriage return, DEL, every C1 one
(U+0080 to U+009F: ``\\x9b`` is a CSI on its own) and the bidirectional embeddings, overrides and isolates
(U+202A to U+202E, U+2066 to U+2069: text that reads otherwise than it is stored). Two places handle them:

- every door stores each of them as U+FFFD (``scrub``; ``scrub_json`` for encoded JSON, the same rule): ingest,
  ``PATCH /runs/{id}``, a command's reason, the importers and the alert rules;
- at display every viewer makes whatever control character still reaches it visible (``visible``): a local
  run log replayed, events stored before the rule, a reason from the server. The console also never reads a
  run's text as markup (``tui.safe_text``), the web page sets text, never HTML, and a notification goes out
  as plain text.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import TypeVar, cast

T = TypeVar("T")

REPLACEMENT = "\ufffd"
"""What the server stores in place of a control character (as it does of a NUL)."""

CONTROL_CHARS = "\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069"
"""A character class (for ``re``) of the control characters a run may not have interpreted anywhere: C0 but
tab, newline and carriage return; DEL; C1; the bidirectional embeddings, overrides and isolates."""

NO_CONTROL_PATTERN = "^[^" + "".join(c if c == "-" else f"\\u{ord(c):04x}" for c in CONTROL_CHARS) + "]*$"
"""A text without a control character (``CONTROL_CHARS``), as a pattern both ``re`` and JSON Schema read: a field
that refuses one (a 422 naming it, as ``PATCH /runs/{id}`` refuses one in a project) where U+FFFD in its place would
change what it means (an argument of a sweep's command)."""
NO_CONTROL_RULE = ("no control character (C0 but tab, newline and carriage return; DEL; C1; a bidi embedding, "
                   "override or isolate)")

_CONTROL = re.compile(f"[{CONTROL_CHARS}]")
_CONTROL_OR_BREAK = re.compile(f"[{CONTROL_CHARS}\t\n\r\u2028\u2029]")


def has_control(text: str) -> bool:
    return _CONTROL.search(text) is not None


def scrub(text: str) -> str:
    """``text`` as the server stores it: each control character (``CONTROL_CHARS``) replaced by U+FFFD."""
    return _CONTROL.sub(REPLACEMENT, text) if _CONTROL.search(text) else text


def scrub_tree(value: T) -> T:
    """``value`` (a string, or a dict, list or tuple of them and of other values, as TOML or JSON gives) with
    ``scrub`` applied to every string in it, dict keys too."""
    if isinstance(value, str):
        return cast(T, scrub(value))
    if isinstance(value, dict):
        return cast(T, {scrub_tree(k): scrub_tree(v) for k, v in value.items()})
    if isinstance(value, (list, tuple)):
        return cast(T, type(value)(scrub_tree(v) for v in value))
    return value


_JSON_CONTROL = re.compile(
    rb"(?<!\\)((?:\\\\)*)"  # an escape only where its backslash is not itself escaped (``\\u202e`` is text)
    rb"(?:\\u(?i:00(?:0[0-8bcef]|1[0-9a-f]|7f|[89][0-9a-f])|202[a-e]|206[6-9])|\\[bf])"  # escaped, any case
    rb"|\x7f|\xc2[\x80-\x9f]|\xe2\x80[\xaa-\xae]|\xe2\x81[\xa6-\xa9]")  # DEL, C1, bidi: their UTF-8
"""``CONTROL_CHARS`` in JSON as any client writes them: as their UTF-8 (msgspec) or escaped (``json.dumps``: every
one of them a ``\\uXXXX``, in upper or lower case); a test holds the two to the same characters."""
_JSON_RAW = re.compile(rb"\x7f|\xc2[\x80-\x9f]|\xe2\x80[\xaa-\xae]|\xe2\x81[\xa6-\xa9]")


def _json_suspect(data: bytes) -> bool:
    """Whether encoded JSON may hold a control character. The usual batch is ruled out by searches for one byte
    (a backslash: every escape has one; DEL; the first byte of a C1 or bidi character), which take a fraction
    of the time a search for a longer needle would."""
    if b"\\" in data and _JSON_CONTROL.search(data) is not None:
        return True
    return b"\x7f" in data or ((b"\xc2" in data or b"\xe2" in data) and _JSON_RAW.search(data) is not None)


def _json_replace(match: re.Match[bytes]) -> bytes:
    return (match.group(1) or b"") + b"\\ufffd"


def scrub_json(data: bytes) -> bytes:
    """JSON (as any client encodes it) with each control character in any of its strings replaced by U+FFFD: the
    JSON of the same value with ``scrub`` applied to every string (keys too)."""
    return _JSON_CONTROL.sub(_json_replace, data) if _json_suspect(data) else data


def _picture(match: re.Match[str]) -> str:
    code = ord(match.group())
    if code < 0x20:
        return chr(0x2400 + code)  # a control picture: ESC shows as ␛, BEL as ␇
    if code == 0x7F:
        return "\u2421"  # ␡
    if code in (0x2028, 0x2029):
        return "\u21b5"  # ↵
    return f"<{code:02X}>"  # C1 and bidi: no picture of their own


def visible(text: str, *, one_line: bool = False) -> str:
    """``text`` with every control character shown as a visible stand-in (ESC as ␛, a C1 or bidi character as
    its code, ``<9B>``, ``<202E>``), so that no terminal acts on it; ``one_line``: newlines, tabs and carriage
    returns too (a table cell, a title, a name)."""
    pattern = _CONTROL_OR_BREAK if one_line else _CONTROL
    return pattern.sub(_picture, text) if pattern.search(text) else text


FORMULA_START = ("=", "+", "-", "@", "\t", "\r")
"""What a spreadsheet reads as the start of a formula in a CSV cell (OWASP's CSV injection list)."""
_NUMBER = re.compile(r"[+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?")


def csv_cell(value: object) -> object:
    """``value`` as every CSV the project writes holds it: a text that a spreadsheet would read as a formula (it
    starts with ``=``, ``+``, ``-``, ``@``, a tab or a carriage return, and is no number such as ``-1.5``)
    prefixed with a single quote, as OWASP advises (a float too: ``-inf`` is no number to a spreadsheet); anything
    else as it is."""
    text = value if isinstance(value, str) else repr(value) if isinstance(value, float) else ""  # as csv writes it
    if not text.startswith(FORMULA_START) or _NUMBER.fullmatch(text):
        return value
    return "'" + text


def csv_row(values: Iterable[object]) -> list[object]:
    """A row's cells through ``csv_cell``."""
    return [csv_cell(v) for v in values]
