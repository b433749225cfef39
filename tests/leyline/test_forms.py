"""A request's forms, declared once: the check a request runs and the rules of its schema, side by side on every
shape of a request's own fields; the reason a request fits none says which form it meant."""

from __future__ import annotations

import itertools

import jsonschema
import msgspec
import pytest

from leyline import ESCALATIONS, CommandAction, DebugRequest, ProfileRequest
from leyline.calls import CommandSpec
from leyline.commands import Command, checked
from leyline.forms import SET, Form, check, schema

_SAMPLES = {"epochs": (None, 3), "through_update": (False, True), "batches": (None, 4),
            "target": (None, "batches", "update"), "phase": (None, "eval")}


@pytest.mark.parametrize("tp", [tp for tp in ESCALATIONS if tp.FORMS], ids=lambda tp: tp.__name__)
def test_the_check_and_the_schema_agree_on_every_shape(tp):
    rules = jsonschema.Draft202012Validator(schema(tp, tp.FORMS))
    own = [name for name in _SAMPLES if name in tp.__struct_fields__]
    for values in itertools.product(*(_SAMPLES[name] for name in own)):
        body = {name: value for name, value in zip(own, values, strict=True)}
        try:
            tp(run_id="r", **body)
            made = True
        except ValueError:
            made = False
        encoded = msgspec.to_builtins(body)  # as a body would carry it: defaults may be sent or left out
        for shown in (encoded, {k: v for k, v in encoded.items() if v is not None and v is not False}):
            assert rules.is_valid(shown) == made, (tp.__name__, shown, made)


def test_a_form_set_by_value_or_to_anything_but_its_default():
    class Window(msgspec.Struct, kw_only=True):
        size: int | None = None
        until_done: bool = False
        mode: str | None = None

    forms = (Form("A size", {"size": SET}, only={"mode": (None, "fast")}), Form("Until done", {"until_done": True}))
    check(Window(size=2), forms, "window")
    check(Window(until_done=True), forms, "window")
    with pytest.raises(ValueError, match="window needs 'size' or 'until_done': true"):
        check(Window(), forms, "window")
    with pytest.raises(ValueError, match="with 'size' \\(A size\\) takes 'mode' only as \"fast\""):
        check(Window(size=2, mode="slow"), forms, "window")
    assert schema(Window, forms)["anyOf"][1] == {"title": "Until done", "required": ["until_done"],
                                                  "properties": {"until_done": {"const": True}}}


def test_the_meant_form_is_named():
    with pytest.raises(ValueError, match="with 'target': \"update\" .* takes no 'batches'"):
        ProfileRequest(run_id="r", target="update", batches=3)
    with pytest.raises(ValueError, match="with 'batches' .* takes no 'phase'"):
        ProfileRequest(run_id="r", batches=3, phase="eval")


def test_a_request_made_in_code_is_checked_as_a_body_is():
    assert checked(DebugRequest(run_id="r", epochs=3)) == DebugRequest(run_id="r", epochs=3)
    for bad in (DebugRequest(run_id="r", epochs=0), DebugRequest(run_id="", epochs=1),
                ProfileRequest(run_id="r", batches=10_000)):
        with pytest.raises(ValueError):
            checked(bad)
    # The command the run gets holds the request itself, typed: no field of another action's beside it.
    assert set(Command.__struct_fields__) == {"command_id", "request", "created_at"}


def test_no_command_of_a_runs_own_takes_an_actions_name():
    for action in CommandAction:
        with pytest.raises(ValueError, match="built-in"):
            CommandSpec(name=action.value)
