"""An alert's notices carry a run's texts as text: to an e-mail box (an SMTP receiver), a Markdown chat
(Mattermost's webhook) and a JSON webhook, all real receivers on 127.0.0.1. No HTML, Markdown link or mention
a run wrote is read as one, and no control character goes out."""

from __future__ import annotations

import pytest

from leyline import AnomalyDetected, RunStarted, Severity, make_event
from nissa_server.alerts.notify import MENTION_BREAK, as_text
from nissa_server.alerts.rules import parse_rules
from tests.support import ingest_events, running_server
from tests.support.mailbox import smtp_receiver
from tests.support.webhook import webhook_receiver

NAME = "<script>alert(1)</script> [click](http://evil.example) @everyone <@123> *bold*"
DETAIL = "<img src=x onerror=alert(2)> @here \x1b]8;;http://evil.example\x1b\\link\x1b]8;;\x1b\\"


@pytest.mark.single_backend  # about what goes out, not the store
async def test_a_notice_escapes_a_runs_texts_for_each_destination(tmp_path):
    with smtp_receiver() as mail, webhook_receiver() as chat, webhook_receiver() as hook:
        chat_url = chat.url.replace("json://", "mmost://").replace("/hook", "/tokentoken")
        rules = parse_rules({"destinations": {"ops": {"urls": [mail.url, chat_url, hook.url]}},
                             "rules": [{"name": "bad", "when": "anomaly", "min_severity": "warning"}]}, "alerts.toml")
        with running_server(tmp_path, alert_rules=rules, maintenance_interval_s=0.2) as url:
            started = make_event(RunStarted(name=NAME, config={}), run_id="evil", seq=1, ts=1.7e9)
            spike = make_event(AnomalyDetected(anomaly="kl_spike", detail=DETAIL), run_id="evil", seq=2, ts=1.7e9,
                               severity=Severity.ERROR)
            await ingest_events(url, [started, spike])
            (message,) = mail.wait(1, timeout=60)
            (posted,) = [b for _, b in chat.wait(lambda bodies: bodies, timeout=60)]
            (sent,) = [b for _, b in hook.wait(lambda bodies: bodies, timeout=60)]

    # E-mail: plain text, no HTML part carrying the run's tags.
    html = [p for p in message.walk() if p.get_content_type() == "text/html"]
    assert all("<script>" not in p.get_content() and "<img" not in p.get_content() for p in html)
    assert message["subject"] == f"[nissa] bad: {as_text(NAME)}: kl_spike"  # as written, with invisible breaks
    text = message.get_body(("plain",)).get_content()
    assert as_text("<img src=x onerror=alert(2)>") in text and "\x1b" not in text
    # A chat that renders Markdown: the run's link and mentions are text (a zero-width space breaks each).
    chat_text = posted["text"]
    assert "[click](http" not in chat_text and f"[click]{MENTION_BREAK}(http" in chat_text
    assert "@everyone" not in chat_text and "@here" not in chat_text and "<@123>" not in chat_text
    # JSON: the same texts, no control character, no mention.
    assert sent["title"].startswith(f"[nissa] bad: <{MENTION_BREAK}script>")
    assert "@everyone" not in sent["title"] and "@here" not in sent["message"]
    assert not any(ord(c) < 0x20 and c != "\n" for c in sent["title"] + sent["message"])


def test_as_text_shows_control_characters_and_breaks_mentions():
    assert as_text("a\x1b[2J@channel\nb <!here> [x](y)") == "a\u241b[2J@\u200bchannel\nb <\u200b!here> [x]\u200b(y)"
