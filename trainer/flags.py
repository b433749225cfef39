"""Config as data: a frozen dataclass's fields as command-line flags, and the flags' values back as the dataclass.

One generic function, ``add_fields``, makes a flag of each field: its name from the field's (``n_envs`` is
``--n-envs``; a nested config's fields are prefixed with its name: ``ppo.lr`` is ``--ppo-lr``), its type and
choices from the annotation (``int``, ``float``, ``str``, ``pathlib.Path``, ``bool``, a ``Literal`` of choices, a
string ``Enum``, ``X | None``), its help from the docstring written under the field, and its default from the
dataclass, shown by argparse itself (``%(default)s``). A field without a default of its own is a positional
argument. The caller may respell a flag (``names``, ``aliases``, ``metavars``), make it repeatable (``repeat``: a
``tuple[str, ...]`` field, one value per flag), match its choices in any case (``fold_case``) or keep its default
out of ``--help`` (``secret``). ``values`` reads a parsed namespace back into the dataclass's keyword arguments,
``given`` says which flags a command line really spelled out (a resumed run checks those against its checkpoint).

A config's ``__post_init__`` may raise ``FieldError(field, message)``; ``build`` turns it into a message that
names the flag (``as_field_error`` makes one of another config's ``ValueError``).
"""

from __future__ import annotations

import argparse
import ast
import dataclasses
import enum
import functools
import inspect
import pathlib
import re
import textwrap
import types
import typing
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, Literal, TypeVar

T = TypeVar("T")


class FieldError(ValueError):
    """A config field's value is out of bounds; ``field`` names it, the message says why."""

    def __init__(self, field: str, message: str, *, value: object = None) -> None:
        super().__init__(f"{field}: {message}")
        self.field, self.reason, self.value = field, message, value


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
    if isinstance(hint, type) and issubclass(hint, enum.Enum):  # its members' values, spelled as on the namespace
        choices = tuple(m.value for m in hint)
        return type(choices[0]), choices
    if hint in (int, float, str, pathlib.Path):
        return hint, None
    return str, None  # spelled as text; the caller's parse turns it into the field's type


def _shown(value: Any) -> Any:
    """A default as its flag would spell it (a tuple of ids as ``a,b``, an enum member as its value)."""
    if isinstance(value, enum.Enum):
        return value.value
    return ",".join(map(str, value)) if isinstance(value, tuple) else value


def _folded(choices: Sequence[str]) -> Callable[[str], str]:
    """The choice a text names in any case (the text itself when none: argparse then names the choices)."""
    by_case = {str(c).casefold(): c for c in choices}

    def choice(text: str) -> str:
        return by_case.get(text.casefold(), text)

    return choice


class _Repeat(argparse.Action):
    """One value per flag, gathered in a tuple after the default's (``--tag a --tag b``)."""

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: Any,
                 option_string: str | None = None) -> None:
        before = getattr(namespace, self.dest, None)
        setattr(namespace, self.dest, (*(before if isinstance(before, tuple) else ()), values))


def _default_of(f: dataclasses.Field[Any], default: Any) -> Any:
    """The field's default: ``default``'s (an instance or a mapping), else its own; MISSING when it has none."""
    if isinstance(default, Mapping) and f.name in default:
        return default[f.name]
    if default is not None and not isinstance(default, Mapping):
        return getattr(default, f.name)
    if f.default is not dataclasses.MISSING:
        return f.default
    if f.default_factory is not dataclasses.MISSING:
        return f.default_factory()
    return dataclasses.MISSING


def _positional(f: dataclasses.Field[Any]) -> bool:
    return f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING


def add_fields(group: argparse._ActionsContainer, cls: type, *, default: Any = None, prefix: str = "",
               skip: Iterable[str] = (), aliases: Mapping[str, Sequence[str]] | None = None,
               metavars: Mapping[str, str] | None = None, names: Mapping[str, Sequence[str]] | None = None,
               repeat: Iterable[str] = (), fold_case: Iterable[str] = (), secret: Iterable[str] = ()) -> None:
    """A flag for every field of the dataclass ``cls`` but ``skip``; defaults from ``default`` (an instance of
    ``cls``, or a mapping of field name to default over the dataclass's own: a class with a positional field has
    no instance before its command line). ``names``: a field's spellings in place of ``--field-name``;
    ``aliases``: other spellings it keeps; ``repeat``: fields given once per value; ``fold_case``: fields whose
    choices are matched in any case; ``secret``: fields whose default ``--help`` does not show."""
    skip, repeat, fold_case, secret = frozenset(skip), frozenset(repeat), frozenset(fold_case), frozenset(secret)
    hints = typing.get_type_hints(cls)
    docs = field_docs(cls)
    for f in dataclasses.fields(cls):
        if f.name in skip or not f.init:
            continue
        help_text = _first_sentence(docs.get(f.name, f.name.replace("_", " ")))
        kind, choices = _kind(hints[f.name])
        if f.name in fold_case and choices is not None:
            kind = _folded(choices)
        dest, metavar = dest_of(f.name, prefix), (metavars or {}).get(f.name)
        if _positional(f):
            group.add_argument(dest, type=kind, choices=choices, metavar=metavar, help=help_text)
            continue
        value = _default_of(f, default)
        spelled = [*(names or {}).get(f.name, [flag_of(f.name, prefix)]), *(aliases or {}).get(f.name, ())]
        if hints[f.name] is bool:
            _add_switch(group, spelled, dest, value, help_text)
            continue
        shown = ("none" if value is None or value == "" or value == () else
                 "set, not shown" if f.name in secret else "%(default)s")
        how: dict[str, Any] = ({"action": _Repeat, "default": value} if f.name in repeat else
                               {"type": kind, "choices": choices, "default": _shown(value)})
        group.add_argument(*spelled, dest=dest, metavar=metavar, help=f"{help_text} (default: {shown})", **how)


def _add_switch(group: argparse._ActionsContainer, spelled: list[str], dest: str, value: bool, help_text: str) -> None:
    """``--name`` / ``--no-name`` (a short alias such as ``-v`` turns it on)."""
    action = group.add_argument(*spelled, dest=dest, action=argparse.BooleanOptionalAction, default=value,
                                help=help_text)
    if "%(default)" not in (action.help or ""):  # Python 3.11 to 3.13 add it themselves
        action.help = f"{help_text} (default: %(default)s)"


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
          error: type[ValueError] = ValueError, names: Mapping[str, Sequence[str]] | None = None) -> T:
    """``cls(**kwargs)``; a ``FieldError`` becomes ``error`` naming the field's flag (its long name in ``names``,
    as ``add_fields`` took them, where it has one)."""
    try:
        return cls(**kwargs)
    except FieldError as err:
        given = "" if err.value is None else f" {err.value}"
        spelled = [n for n in (names or {}).get(err.field, ()) if n.startswith("--")]
        raise error(f"{spelled[0] if spelled else flag_of(err.field, prefix)}{given}: {err.reason}") from None


def as_field_error(field: str, check: Callable[[], object]) -> None:
    """``check()`` (another config's constructor, whose ValueError already names the flag) with its ValueError
    as a ``FieldError`` of ``field``."""
    try:
        check()
    except FieldError:
        raise
    except ValueError as err:
        raise FieldError(field, str(err).removeprefix(f"{flag_of(field)}: ")) from None


def given(parser: argparse.ArgumentParser, argv: Sequence[str], dests: Iterable[str]) -> dict[str, Any]:
    """The values of ``dests`` that ``argv`` spells out (not defaulted), parsed as ``parser`` parses them."""
    wanted = frozenset(dests)
    parsed = parser.parse_args(list(argv), namespace=argparse.Namespace(**{d: _UNSET for d in wanted}))
    return {d: v for d, v in vars(parsed).items() if d in wanted and v is not _UNSET}


_UNSET = object()
"""Put on a namespace before parsing: argparse does not default an attribute the namespace already has."""
