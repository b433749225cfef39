"""Text a run wrote, made harmless for whoever reads it: the one definition of which characters are control
characters, what the server stores in their place, and how a viewer shows one that still reaches it.

A run's texts (its name, config keys and values, labels, series names, messages, results, command help) are
data. Two places handle control characters, each on its own:

- at ingest the server stores every C0 control character except tab, newline and carriage return, DEL and
  every C1 control character (U+0080 to U+009F: ``\\x9b`` is a CSI on its own) as U+FFFD (``scrub``);
- at display every viewer makes whatever control character still reaches it visible (``visible``): a local
  run log replayed, events stored before the rule, a reason from the server. The console also never reads a
  run's text as markup (``tui.safe_text``), the web page sets text, never HTML, and a notification goes out
  as plain text.
"""

from __future__ import annotations

import re

REPLACEMENT = "\ufffd"
"""What the server stores in place of a control character (as it does of a NUL)."""

CONTROL_CHARS = "\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f"
"""A character class (for ``re``) of the control characters a run may not have interpreted anywhere: C0 but
tab, newline and carriage return; DEL; C1."""

_CONTROL = re.compile(f"[{CONTROL_CHARS}]")
_CONTROL_OR_BREAK = re.compile(f"[{CONTROL_CHARS}\t\n\r\u2028\u2029]")


def has_control(text: str) -> bool:
    return _CONTROL.search(text) is not None


def scrub(text: str) -> str:
    """``text`` as the server stores it: each control character (``CONTROL_CHARS``) replaced by U+FFFD."""
    return _CONTROL.sub(REPLACEMENT, text) if _CONTROL.search(text) else text


def _picture(match: re.Match[str]) -> str:
    code = ord(match.group())
    if code < 0x20:
        return chr(0x2400 + code)  # a control picture: ESC shows as ␛, BEL as ␇
    if code == 0x7F:
        return "\u2421"  # ␡
    if code in (0x2028, 0x2029):
        return "\u21b5"  # ↵
    return f"<{code:02X}>"  # C1: no picture of its own


def visible(text: str, *, one_line: bool = False) -> str:
    """``text`` with every control character shown as a visible stand-in (ESC as ␛, a C1 character as its
    code, ``<9B>``), so that no terminal acts on it; ``one_line``: newlines, tabs and carriage returns too
    (a table cell, a title, a name)."""
    pattern = _CONTROL_OR_BREAK if one_line else _CONTROL
    return pattern.sub(_picture, text) if pattern.search(text) else text
