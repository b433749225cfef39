"""The run filter language, parsed: fields, operators, quoting, negation, sorts, and a mistake's position."""

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from leyline.query import Clause, Field, QueryError, field_of, parse, parse_sort, quote, short_key, term


def test_a_query_is_clauses_all_of_which_hold():
    clauses = parse('project:cifar -tag:broken status:live,lost name~"my sweep" config.a.b>=0.01 val_loss.min<0.4 x')
    assert clauses == [
        Clause(Field("attr", "project"), "=", ("cifar",), False, 0),
        Clause(Field("attr", "tag"), "=", ("broken",), True, 14),
        Clause(Field("attr", "status"), "=", ("live", "lost"), False, 26),
        Clause(Field("attr", "name"), "~", ("my sweep",), False, 43),
        Clause(Field("config", "a.b"), ">=", (0.01,), False, 59),
        Clause(Field("metric", "val_loss{rank=0}", "min"), "<", (0.4,), False, 76),
        Clause(Field("attr", "name"), "~", ("x",), False, 93),
    ]


@pytest.mark.parametrize(("name", "field"), [
    ("val_loss", Field("metric", "val_loss{rank=0}", "best")),
    ("val_loss.last", Field("metric", "val_loss{rank=0}", "last")),
    ("epoch_completed.accuracy{env=2}", Field("metric", "epoch_completed.accuracy{env=2,rank=0}", "best")),
    ("acc{env=2,rank=1}.count", Field("metric", "acc{env=2,rank=1}", "count")),
    ("lr.min{}", Field("metric", "lr.min{rank=0}", "best")),
    ("config.model.depth", Field("config", "model.depth")),
    ("started", Field("attr", "started")),
])
def test_fields(name, field):
    assert field_of(name) == field


@pytest.mark.parametrize("key", ["val_loss{rank=0}", "acc{env=2,rank=0}", "lr.min{rank=0}", "x{rank=1}",
                                 "a{data=a\\,b,rank=0}"])
def test_a_short_key_reads_back_as_its_series(key):
    assert field_of(short_key(key)).name == key


def test_dates_and_numbers():
    (clause,) = parse("started>=2026-11-01")
    assert clause.values == (1793491200.0,)
    assert parse("config.lr:1e-3")[0].values == ("1e-3",), "equality keeps the text (a number or a string)"
    assert parse("val_loss=-inf")[0].values == (float("-inf"),)


@pytest.mark.parametrize(("query", "position", "reason"), [
    ("val_loss<x", 9, "'x' is not a number"),
    ("val_loss<nan", 9, "not a number"),
    ("status:gone", 7, "unknown status"),
    ("name>3", 0, "name takes"),
    ("val_loss~3", 0, "'~' compares text"),
    ("config.lr<fast", 10, "not a number"),
    ('name~"open', 5, "quote is not closed"),
    ("a{b=1", 0, "'{' is not closed"),
    ("a}b:1", 1, "closes no '{'"),
    ("tag:", 4, "a value is missing"),
    ("config.:x", 0, "names no key"),
    ("started>yesterday", 8, "unix seconds or an ISO date"),
    ("x" * 2001, 2000, "at most 2000 characters"),
    (" ".join(["tag:a"] * 33), 192, "at most 32 clauses"),
])
def test_a_mistake_names_its_position(query, position, reason):
    with pytest.raises(QueryError) as caught:
        parse(query)
    assert caught.value.position == position and reason in caught.value.reason, caught.value


def test_sorts():
    assert parse_sort("-val_loss.best, config.lr,name") == [
        parse_sort("-val_loss")[0], parse_sort("config.lr")[0], parse_sort("name")[0]]
    assert parse_sort("-val_loss")[0].descending and not parse_sort("name")[0].descending
    assert parse_sort("") == []
    for bad, position in (("name x", 5), ("a,", 2), ("a,b,c,d,e", 8)):
        with pytest.raises(QueryError) as caught:
            parse_sort(bad)
        assert caught.value.position == position, (bad, caught.value)


def test_a_list_of_fields_splits_between_fields_not_between_labels():
    from leyline.query import split_fields

    text = 'val_loss.best, loss{env=0,split=val}.min,"acc{a=1,b=2}.last",,x'
    assert split_fields(text) == [(0, "val_loss.best"), (15, "loss{env=0,split=val}.min"),
                                  (41, '"acc{a=1,b=2}.last"'), (62, "x")]
    assert split_fields("") == [] and split_fields(" , ") == []


_TEXT = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=20)


@settings(max_examples=300, deadline=None)
@given(key=_TEXT.filter(bool), value=st.one_of(_TEXT, st.booleans(), st.integers(), st.floats(allow_nan=False)))
def test_a_quoted_value_reads_back_as_that_one_value(key, value):
    """One quoting for every client (``term``, ``quote``): blanks, quotes, backslashes, braces, commas and a
    leading ``-`` in a config key or its value read back as written, as one value."""
    (clause,) = parse(term(f"config.{key}", value))
    text = str(value).lower() if isinstance(value, bool) else str(value)
    assert clause == Clause(Field("config", key), "=", (text,), False, 0)
    (name,) = parse(f"project:{quote('a b,c')} {quote('-x')}")[:1]
    assert name.values == ("a b,c",)


def test_quote_writes_a_plain_word_bare_and_anything_else_in_quotes():
    assert [quote(v) for v in ("lr-sweep", 0.01, True, 1e-05)] == ["lr-sweep", "0.01", "true", "1e-05"]
    assert [quote(v) for v in ("a b", 'say "hi"', "a\\b", "", "x,y", "-x", "{")] == [
        '"a b"', '"say \\"hi\\""', '"a\\\\b"', '""', '"x,y"', '"-x"', '"{"']
    assert parse('config.opt="a,b" status:live,lost')[0].values == ("a,b",), "a quoted value is one value"
    assert term("group", "lr sweep") == 'group:"lr sweep"' and term("config.lr", 0.01) == "config.lr=0.01"
