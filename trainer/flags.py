"""Config as data: a frozen dataclass's fields as command-line flags, and the flags' values back as the dataclass.

One generic function, ``add_fields``, makes a flag of each field: its name from the field's (``n_envs`` is
``--n-envs``; a nested config's fields are prefixed with its name: ``ppo.lr`` is ``--ppo-lr``), its type and
choices from the annotation (``int``, ``float``, ``str``, ``bool``, a ``Literal`` of choices, ``X | None``), its
help from the docstring written under the field, and its default from the dataclass, shown by argparse itself
(``%(default)s``). ``values`` reads a parsed namespace back into the dataclass's keyword arguments, ``given``
says which flags a command line really spelled out (a resumed run checks those against its checkpoint).

A config's ``__post_init__`` may raise ``FieldError(field, message)``; ``build`` turns it into a message that
names the flag.
"""

from __future__ import annotations

import argparse
import ast
import dataclasses
import functools
import inspect
import re
import textwrap
import types
import typing
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, Literal, TypeVar

T = TypeVar("T")


class FieldError(ValueError):
    """A config field's value is out of bounds; ``field`` names it, the message says why."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field, self.reason = field, message


def flag_of(name: str, prefix: str = "") -> str:
    """``n_envs`` → ``--n-envs``; with prefix ``ppo``: ``lr`` → ``--ppo-lr``."""
    return "--" + (f"{prefix}_{name}" if prefix else name).replace("_", "-")


def dest_of(name: str, prefix: str = "") -> str:
    return f"{prefix}_{name}" if prefix else name


@functools.cache
def field_docs(cls: type) -> dict[str, str]:
    """The docstring written under each field of ``cls`` (a string literal right after its annotation)."""
    try:
        tree = ast.parse(textwrap.dedent(inspect.getsource(cls)))
    except (OSError, TypeError):  # no source (a frozen interpreter): flags without help
        return {}
    body = tree.body[0].body if tree.body and isinstance(tree.body[0], ast.ClassDef) else []
    docs: dict[str, str] = {}
    for node, after in zip(body, body[1:], strict=False):
        if (isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and isinstance(after, ast.Expr)
                and isinstance(after.value, ast.Constant) and isinstance(after.value.value, str)):
            docs[node.target.id] = " ".join(after.value.value.split())
    return docs


def _first_sentence(doc: str) -> str:
    """The help line: the docstring's first sentence (the rest explains the choice of default)."""
    match = re.match(r"(.+?[.:])(\s+[A-Z(\[]|$)", doc)
    return (match.group(1) if match else doc).rstrip(".:").replace("``", "")


def _kind(hint: Any) -> tuple[Callable[[str], Any], tuple[Any, ...] | None]:
    """The flag's type and choices for a field annotation."""
    if typing.get_origin(hint) in (typing.Union, types.UnionType):
        inner = [a for a in typing.get_args(hint) if a is not type(None)]
        return _kind(inner[0]) if len(inner) == 1 else (str, None)
    if typing.get_origin(hint) is Literal:
        choices = typing.get_args(hint)
        return type(choices[0]), choices
    if hint in (int, float, str):
        return hint, None
    return str, None  # spelled as text; the caller's parse turns it into the field's type


def _shown(value: Any) -> Any:
    """A default as its flag would spell it (a tuple of ids as ``a,b``)."""
    return ",".join(map(str, value)) if isinstance(value, tuple) else value


def add_fields(group: argparse._ActionsContainer, cls: type, *, default: Any = None, prefix: str = "",
               skip: Iterable[str] = (), aliases: Mapping[str, Sequence[str]] | None = None,
               metavars: Mapping[str, str] | None = None) -> None:
    """A flag for every field of the dataclass ``cls`` but ``skip``; defaults from ``default`` (an instance of
    ``cls``; its own defaults when None). ``aliases``: other spellings a field's flag keeps."""
    default = cls() if default is None else default
    skip = frozenset(skip)
    hints = typing.get_type_hints(cls)
    docs = field_docs(cls)
    for f in dataclasses.fields(cls):
        if f.name in skip or not f.init:
            continue
        value = getattr(default, f.name)
        help_text = _first_sentence(docs.get(f.name, f.name.replace("_", " ")))
        names = [flag_of(f.name, prefix), *(aliases or {}).get(f.name, ())]
        dest = dest_of(f.name, prefix)
        if hints[f.name] is bool:
            action = group.add_argument(*names, dest=dest, action=argparse.BooleanOptionalAction, default=value,
                                        help=help_text)
            if "%(default)" not in (action.help or ""):  # Python 3.11 to 3.13 add it themselves
                action.help = f"{help_text} (default: %(default)s)"
            continue
        kind, choices = _kind(hints[f.name])
        shown = "none" if value is None else "%(default)s"
        group.add_argument(*names, dest=dest, type=kind, choices=choices, default=_shown(value),
                           metavar=(metavars or {}).get(f.name), help=f"{help_text} (default: {shown})")


def values(ns: argparse.Namespace, cls: type, *, prefix: str = "", skip: Iterable[str] = ()) -> dict[str, Any]:
    """The keyword arguments of ``cls`` that the namespace holds (flags ``add_fields`` made)."""
    out: dict[str, Any] = {}
    skip = frozenset(skip)
    for f in dataclasses.fields(cls):
        dest = dest_of(f.name, prefix)
        if f.name not in skip and f.init and hasattr(ns, dest):
            out[f.name] = getattr(ns, dest)
    return out


def build(cls: Callable[..., T], kwargs: Mapping[str, Any], *, prefix: str = "",
          error: type[ValueError] = ValueError) -> T:
    """``cls(**kwargs)``; a ``FieldError`` becomes ``error`` naming the field's flag."""
    try:
        return cls(**kwargs)
    except FieldError as err:
        raise error(f"{flag_of(err.field, prefix)}: {err.reason}") from None


def given(parser: argparse.ArgumentParser, argv: Sequence[str], dests: Iterable[str]) -> dict[str, Any]:
    """The values of ``dests`` that ``argv`` spells out (not defaulted), parsed as ``parser`` parses them."""
    wanted = frozenset(dests)
    parsed = parser.parse_args(list(argv), namespace=argparse.Namespace(**{d: _UNSET for d in wanted}))
    return {d: v for d, v in vars(parsed).items() if d in wanted and v is not _UNSET}


_UNSET = object()
"""Put on a namespace before parsing: argparse does not default an attribute the namespace already has."""
