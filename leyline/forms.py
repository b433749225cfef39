"""The forms of a request: which fields a request sets together (a debug window of N epochs, or through the
next update), declared once. The declaration is both the check a request runs when it is made or decoded
(``check``) and its rules in JSON Schema (``schema``), so the decoder and the published schema cannot part.

A form sets some fields (to a given value, or to anything but their default: ``SET``) and may hold others to
a few values (``only``); a request is valid when it fits one of its forms. A field left out of a body takes
its default, so "set" means "not its default" on both sides.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import msgspec

SET: Any = type("Set", (), {"__repr__": lambda self: "SET"})()
"""A form's value for a field it needs set, to anything but the field's default."""


@dataclass(frozen=True)
class Form:
    """One way to fill a request; see the module docstring."""

    title: str
    """The form in a few words (the schema's title, the console's and the page's label)."""
    sets: Mapping[str, Any]
    """Fields this form needs set: to this value, or (``SET``) to anything but their default."""
    only: Mapping[str, tuple[Any, ...]] = field(default_factory=dict)
    """Fields this form holds to these values (their default among them: a field it leaves out)."""


def _default(tp: type[msgspec.Struct], name: str) -> Any:
    return next(f.default for f in msgspec.structs.fields(tp) if f.name == name)


def _fits(request: msgspec.Struct, form: Form) -> tuple[bool, list[str]]:
    """Whether ``request`` sets what ``form`` sets, and which of the form's ``only`` fields it breaks."""
    tp = type(request)
    chosen = all(getattr(request, name) != _default(tp, name) if value is SET else getattr(request, name) == value
                 for name, value in form.sets.items())
    return chosen, [name for name, values in form.only.items() if getattr(request, name) not in values]


def _said(name: str, value: Any) -> str:
    return repr(name) if value is SET else f"{name!r}: {json.dumps(value)}"


def check(request: msgspec.Struct, forms: tuple[Form, ...], what: str) -> None:
    """``ValueError`` saying why ``request`` (``what``: "action 'debug'") fits none of ``forms``."""
    if not forms:
        return
    fits = [_fits(request, form) for form in forms]
    if any(chosen and not broken for chosen, broken in fits):
        return
    # The form the request meant, if it set what one sets: the fewest fields amiss, one naming a value first.
    meant = sorted((len(broken), any(v is SET for v in form.sets.values()), i)
                   for i, (form, (chosen, broken)) in enumerate(zip(forms, fits, strict=True)) if chosen)
    if meant:
        form, (_, broken) = forms[meant[0][2]], fits[meant[0][2]]
        asked = ", ".join(_said(n, v) for n, v in form.sets.items())
        wrong = broken[0]
        allowed = [v for v in form.only[wrong] if v != _default(type(request), wrong)]
        takes = f"{wrong!r} only as {' or '.join(json.dumps(v) for v in allowed)}" if allowed else f"no {wrong!r}"
        raise ValueError(f"{what} with {asked} ({form.title}) takes {takes}")
    needs = " or ".join(", ".join(_said(n, v) for n, v in form.sets.items()) for form in forms)
    raise ValueError(f"{what} needs {needs}")


def schema(tp: type[msgspec.Struct], forms: tuple[Form, ...]) -> dict[str, Any]:
    """``forms`` in JSON Schema, for ``tp``'s component: ``{"anyOf": [one subschema per form]}`` (empty: no forms)."""
    if not forms:
        return {}
    out = []
    for form in forms:
        properties: dict[str, Any] = {}
        for name, value in form.sets.items():
            default = _default(tp, name)
            if value is not SET:
                properties[name] = {"const": value}
            elif isinstance(default, bool):  # a flag set is the other value
                properties[name] = {"const": not default}
            else:
                properties[name] = {"not": {"const": default}}
        for name, values in form.only.items():
            properties[name] = {"enum": list(values)}
        out.append({"title": form.title, "required": list(form.sets), "properties": properties})
    return {"anyOf": out}
