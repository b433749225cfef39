"""Sending notifications with apprise, off the event loop: retries with backoff, and rate limits.

apprise is synchronous (it speaks HTTP, SMTP… itself): each send runs on a worker thread, one at a time,
so that its log can be captured to say why a send failed. A failed send is retried after 2, 4, 8 … s
(capped), ``MAX_ATTEMPTS`` times in all; a destination over its ``max_per_minute`` holds notifications
back until the minute allows them (none is dropped).
"""

from __future__ import annotations

import logging
import random
import time
from collections import deque
from dataclasses import dataclass

from leyline.text import visible

MAX_ATTEMPTS = 6
BACKOFF_S = 2.0
MAX_BACKOFF_S = 300.0


def backoff_s(attempt: int, rng: random.Random | None = None) -> float:
    """Delay after failed attempt ``attempt`` (1, 2, …): doubling from ``BACKOFF_S``, capped, jittered down."""
    delay = min(MAX_BACKOFF_S, BACKOFF_S * 2 ** (attempt - 1))
    return delay * (1.0 - 0.2 * (rng or random).random())


MENTION_BREAK = "\u200b"
"""A zero-width space, put where a chat would read a run's text as a mention or a link: after every ``@`` and
``<`` (``@everyone``, ``<@123>``, ``<!channel>``, ``<http://…|text>`` ping nobody and link nothing) and between
``]`` and ``(`` (``[text](http://…)`` and ``![](…)`` stay text). Invisible to a reader."""
_BREAKS = str.maketrans({"@": "@" + MENTION_BREAK, "<": "<" + MENTION_BREAK})


def as_text(text: str) -> str:
    """A notice's text as it goes out: control characters visible (``leyline.text``), no mention or link a chat
    would act on (``MENTION_BREAK``). apprise is told the notice is plain text (``NotifyFormat.TEXT``) and escapes it
    for a destination that takes HTML (e-mail) or Markdown; the breaks cover chats that render Markdown in what
    apprise sends them as text (Discord, Mattermost)."""
    return visible(text).translate(_BREAKS).replace("](", "]" + MENTION_BREAK + "(")


def send(url: str, title: str, body: str, notify_type: str) -> tuple[bool, str]:
    """One notification to one apprise URL, as plain text (``as_text``): (sent, why not)."""
    import apprise  # here, not at import: a server without alert rules never loads it

    sender = apprise.Apprise()
    if not sender.add(url):
        return False, f"{url.split('://', 1)[0]}:// is not a URL apprise can send to"
    with apprise.LogCapture(level=logging.WARNING, fmt="%(message)s") as captured:
        ok = sender.notify(title=as_text(title), body=as_text(body), notify_type=notify_type,
                           body_format=apprise.NotifyFormat.TEXT)
    if ok:
        return True, ""
    lines = [line.strip() for line in captured.getvalue().splitlines() if line.strip()]
    return False, lines[-1] if lines else "the destination did not accept the notification"


@dataclass
class RateLimit:
    """At most ``per_minute`` sends in any 60 s."""

    per_minute: int
    _sent: deque[float] | None = None

    def take(self, now: float | None = None) -> float:
        """0.0 if a send may go now (and counts it), else the time from which one may."""
        now = time.time() if now is None else now
        sent = self._sent if self._sent is not None else deque()
        self._sent = sent
        while sent and sent[0] <= now - 60.0:
            sent.popleft()
        if len(sent) >= self.per_minute:
            return sent[0] + 60.0
        sent.append(now)
        return 0.0
