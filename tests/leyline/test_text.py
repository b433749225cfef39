"""What the server stores in place of a control character, and how a viewer shows one that reaches it."""

import json
import re

import msgspec
import pytest

from leyline.codec import decode_frame, decode_frame_wire, in_words
from leyline.text import has_control, scrub, scrub_json, visible

CONTROLS = [chr(c) for c in (*range(0x00, 0x09), 0x0B, 0x0C, *range(0x0E, 0x20), *range(0x7F, 0xA0),
                             *range(0x202A, 0x202F), *range(0x2066, 0x206A))]


def test_scrub_replaces_every_control_character_but_tab_newline_and_carriage_return():
    assert scrub("".join(CONTROLS)) == "\ufffd" * len(CONTROLS)
    assert scrub("a\tb\nc\r") == "a\tb\nc\r" and not has_control("a\tb\nc\r é°µ")


def test_visible_shows_each_control_character_and_on_one_line_breaks_too():
    assert visible("\x1b]52;c;QQ==\x07\x9b2J\x7f") == "\u241b]52;c;QQ==\u2407<9B>2J\u2421"
    assert visible("a\nb\tc") == "a\nb\tc"
    assert visible("a\nb\tc\r\u2028", one_line=True) == "a\u240ab\u2409c\u240d\u21b5"
    assert not any(has_control(visible(c)) for c in CONTROLS)


def _upper_hex(body: bytes) -> bytes:
    # The escapes' hex in upper case; an escaped backslash before ``u`` is text, as it stays.
    return re.sub(rb"(?<!\\)((?:\\\\)*)\\u([0-9a-f]{4})", lambda m: m.group(1) + b"\\u" + m.group(2).upper(), body)


ENCODERS = {"msgspec": msgspec.json.encode, "json.dumps": lambda v: json.dumps(v).encode(),
            "upper case": lambda v: _upper_hex(json.dumps(v).encode())}
"""JSON as clients write it: control characters raw (msgspec: DEL, C1 and bidi as UTF-8) or as ``\\uXXXX`` escapes
(Python's ``json.dumps``: every one), the hex in lower or upper case."""


@pytest.mark.parametrize("encode", ENCODERS.values(), ids=ENCODERS.keys())
@pytest.mark.parametrize("text", ["".join(CONTROLS), "\\" + "".join(CONTROLS), "\\\\u001b", "\\u202e", "\\\\u202E",
                                  "\\\u202e", "\\\\\x7f", "a\\b", "\\\x1b", "é\x9b"])
def test_the_stored_json_is_the_json_of_the_scrubbed_text(text, encode):
    # What ingest does to encoded JSON (escaped or raw control characters) is what scrub does to the text; an
    # escaped backslash before ``u202e`` makes it text, not an escape.
    body = encode({text: [text]})
    assert msgspec.json.decode(scrub_json(body)) == {scrub(text): [scrub(text)]}


def test_the_json_rule_and_the_text_rule_take_the_same_characters():
    # Every character of the first planes alone, raw or escaped as clients encode it: scrub_json replaces it
    # exactly where scrub does (a bidi override, U+202E, and the isolates are controls; U+200F, a mark, is not).
    for code in [*range(0x3000), 0xFEFF, 0x1F600]:
        text = chr(code)
        for name, encode in ENCODERS.items():
            assert msgspec.json.decode(scrub_json(encode(text))) == scrub(text), (hex(code), name)
    assert scrub("a\u202eb\u2066c\u200f") == "a\ufffdb\ufffdc\u200f"
    assert visible("\u202egnp.exe") == "<202E>gnp.exe"


@pytest.mark.parametrize(("body", "words"), [
    (b'{"notes":"a\\ud800b"}', "`\\ud800` (byte 11) is a lone UTF-16 surrogate"),
    (b'{"notes":"\\\\\\uDBFF"}', "`\\uDBFF` (byte 12) is a lone UTF-16 surrogate"),
    (b'{"notes":"\\ud83d\\ude00\\ud800', "`\\ud800` (byte 22) is a lone UTF-16 surrogate"),
    (b'{"notes":"a', "Input data was truncated"),  # truly cut short: said so
])
def test_a_lone_surrogate_is_said_to_be_no_text_not_a_truncated_body(body, words):
    with pytest.raises(msgspec.DecodeError) as refused:
        msgspec.json.decode(body)
    assert words in in_words(refused.value, body), in_words(refused.value, body)


def test_an_escaped_backslash_before_a_surrogate_escape_and_a_pair_are_text():
    assert msgspec.json.decode(b'"\\\\ud800 \\ud83d\\ude00"') == "\\ud800 \U0001f600"


def test_a_frame_of_a_lone_surrogate_is_refused_in_the_same_words():
    for decode in (decode_frame, decode_frame_wire):
        with pytest.raises(msgspec.DecodeError, match=r"`\\ud800` \(byte 37\) is a lone UTF-16 surrogate"):
            decode('{"type":"hello","run_id":"r","name":"\\ud800"}')
