"""Anything a run wrote, as the console draws it: a ``rich.text.Text`` (never markup: ``[/]`` is two brackets,
``[@click=app.quit]`` is text, ``[link=…]`` no link) with every control character visible (``leyline.text``),
so that no terminal acts on an escape sequence a run sent.

Every text that came from a run or from the server (run names, config keys and values, labels, series names,
notes, tags, anomaly details, command messages, results and help, alert texts, error reasons) reaches a widget
through ``run_text`` (or ``plain``, where a widget takes a ``str`` it never parses: an ``Input``'s value, a
title, a notification), never as a ``str`` that Textual or Rich would read as markup or the terminal as an
escape sequence.
"""

from __future__ import annotations

from typing import Any

from rich.style import Style
from rich.text import Text

from leyline.text import visible


def plain(value: object, *, one_line: bool = True) -> str:
    """``value`` as a string with its control characters visible (``one_line``: line breaks and tabs too)."""
    return visible(value if isinstance(value, str) else str(value), one_line=one_line)


def run_text(value: object, style: str | Style = "", *, one_line: bool = True, **text: Any) -> Text:
    """``value`` as text to draw, styled by the console (never by the value); ``text``: more of ``Text``'s
    keywords (``justify``, ``no_wrap``)."""
    return Text(plain(value, one_line=one_line), style=style, **text)
