"""A package's exported names, listed once and loaded on first use.

The list is the package's ``if TYPE_CHECKING:`` block of imports from ``nissa``: the type checker reads it as it
is, and ``attach`` reads the same lines to load each name when it is first asked for (Scientific Python's SPEC 1,
``lazy_loader.attach_stub``, reads a stub file the same way). Importing the package loads none of them.
"""

from __future__ import annotations

import ast
import importlib
import pathlib
from collections.abc import Callable
from typing import Any


def _table(package: str, file: str) -> dict[str, tuple[str, str]]:
    """Each name imported under the module's top-level ``if TYPE_CHECKING:`` from ``nissa``: its module and its
    name there (a submodule of ``package``: the package and the submodule's name)."""
    tree = ast.parse(pathlib.Path(file).read_text(encoding="utf-8"), filename=file)
    table: dict[str, tuple[str, str]] = {}
    for node in tree.body:
        if not (isinstance(node, ast.If) and isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING"):
            continue
        for stmt in node.body:
            if isinstance(stmt, ast.ImportFrom) and stmt.level == 0 and (stmt.module or "").split(".")[0] == "nissa":
                table.update({alias.asname or alias.name: (stmt.module or package, alias.name) for alias in stmt.names})
    return table


def attach(package: str, file: str) -> tuple[Callable[[str], Any], list[str]]:
    """``(__getattr__, names)`` for the module ``package`` whose source is ``file``: what its ``TYPE_CHECKING``
    block imports, loaded on first use."""
    table = _table(package, file)

    def __getattr__(name: str) -> Any:
        found = table.get(name)
        if found is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        module, attr = found
        if module == package:  # a submodule
            return importlib.import_module(f"{package}.{attr}")
        return getattr(importlib.import_module(module), attr)

    return __getattr__, list(table)
