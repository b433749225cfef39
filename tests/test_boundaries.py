"""trainer, nissa_server and tui never import each other; leyline imports none of them; tui never imports torch;
the nissa client stands on leyline only, and of the others only trainer may use it. The core contract names no
client's kinds: it reads them from the kinds table, where each family is registered."""

import ast
import pathlib

import pytest

from leyline.esper import EsperKind

ROOT = pathlib.Path(__file__).resolve().parents[1]
FORBIDDEN = {
    "leyline": {"nissa", "ranks", "trainer", "nissa_server", "tui", "torch", "fastapi", "textual"},
    "nissa": {"trainer", "nissa_server", "tui", "fastapi", "textual"},
    "ranks": {"leyline", "nissa", "trainer", "nissa_server", "tui", "fastapi", "textual"},
    "trainer": {"nissa_server", "tui", "fastapi", "textual"},
    "nissa_server": {"nissa", "ranks", "trainer", "tui", "torch", "textual"},
    "tui": {"nissa", "ranks", "trainer", "nissa_server", "torch"},
}


def _imports(path: pathlib.Path) -> set[str]:
    tree = ast.parse(path.read_text(), filename=str(path))
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(a.name.split(".")[0] for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module.split(".")[0])
    return names


@pytest.mark.parametrize("package", sorted(FORBIDDEN))
def test_package_boundaries(package):
    offenders = []
    for path in sorted((ROOT / package).rglob("*.py")):
        bad = _imports(path) & FORBIDDEN[package]
        if bad:
            offenders.append(f"{path.relative_to(ROOT)} imports {sorted(bad)}")
    assert not offenders, "\n".join(offenders)


def _trainer_parts(path: pathlib.Path) -> set[str]:
    """The ``trainer`` subpackages (or top-level modules) that ``path`` imports, at any depth."""
    tree = ast.parse(path.read_text(), filename=str(path))
    parts: set[str] = set()
    for node in ast.walk(tree):
        names = [a.name for a in node.names] if isinstance(node, ast.Import) else (
            [node.module] if isinstance(node, ast.ImportFrom) and node.module and node.level == 0 else [])
        parts.update(n.split(".")[1] for n in names if n.startswith("trainer.") and "." in n)
    return parts


def test_trainer_subpackages_form_no_circle():
    """The wiring lives in ``trainer.build`` and ``trainer.cli``, above the algorithm packages: no package of
    ``trainer`` imports, directly or through others, one that imports it back."""
    graph: dict[str, set[str]] = {}
    for path in (ROOT / "trainer").rglob("*.py"):
        rel = path.relative_to(ROOT / "trainer").parts
        part = rel[0].removesuffix(".py")
        graph.setdefault(part, set()).update(_trainer_parts(path) - {part})

    def reaches(start: str, goal: str, seen: set[str]) -> bool:
        return any(n == goal or (n not in seen and reaches(n, goal, seen | {n})) for n in graph.get(start, ()))

    circles = sorted(p for p in graph if reaches(p, p, {p}))
    assert not circles, f"trainer packages in an import circle: {circles}"


CORE = ("leyline", "nissa", "nissa_server")
"""What every run stands on, whichever loop it is: it speaks of a client's kinds only through the kinds table."""
CLIENT_KINDS = {"leyline.esper.enums": "EsperKind", "leyline.esper.kinds": "ESPER_KINDS"}
"""Where a client declares its family of kinds (the enum, its rows), and the names it declares them by."""
REGISTRY = {"leyline/kinds.py": {"leyline.esper.kinds"}}
"""The kinds table registers each family: the one place of the core that imports a family's rows (its charts are
registered in ``leyline/charts.py`` the same way, from ``leyline.esper.charts``)."""


def _client_kind_names(path: pathlib.Path, allowed: set[str]) -> list[str]:
    """Where ``path`` imports a module that declares a client's kinds (other than ``allowed``), names the enum or
    the rows of one (``from leyline.esper import EsperKind``) or one of its kinds (``….SEED_PRUNED``)."""
    tree = ast.parse(path.read_text(), filename=str(path))
    names = {name for module, name in CLIENT_KINDS.items() if module not in allowed}
    members = set(EsperKind.__members__)
    found = []
    for node in ast.walk(tree):
        modules = [a.name for a in node.names] if isinstance(node, ast.Import) else (
            [node.module] if isinstance(node, ast.ImportFrom) and node.module else [])
        found += [f"imports {m}" for m in modules if m in CLIENT_KINDS and m not in allowed]
        if isinstance(node, ast.ImportFrom):
            found += [f"imports {a.name}" for a in node.names if a.name in names]
        elif isinstance(node, ast.Name) and node.id in names or isinstance(node, ast.Attribute) and node.attr in names:
            found.append(f"names {node.id if isinstance(node, ast.Name) else node.attr} (line {node.lineno})")
        elif isinstance(node, ast.Attribute) and node.attr in members:
            found.append(f"names the kind {node.attr} (line {node.lineno})")
    return found


def test_the_core_names_no_client_kind():
    """Esper's kinds are its own family (``leyline.esper``): the core's enum holds none of them, and leyline (its
    ``esper`` package aside), nissa and nissa_server reach them only through the kinds table (``KINDS``,
    ``KIND_NAMES``), so that a second client registers its kinds as Esper does, with no edit of the core's code."""
    offenders = []
    for package in CORE:
        for path in sorted((ROOT / package).rglob("*.py")):
            rel = path.relative_to(ROOT).as_posix()
            if rel.startswith("leyline/esper/"):
                continue
            offenders += [f"{rel} {what}" for what in _client_kind_names(path, REGISTRY.get(rel, set()))]
    assert not offenders, "\n".join(offenders)


def test_the_core_contract_exports_no_esper_name():
    """``leyline``'s public names are what every run speaks: an Esper payload, row or constant is imported from
    ``leyline.esper``, never reached through the core (``from leyline import PPOUpdate`` fails)."""
    import leyline
    import leyline.esper as esper

    theirs = {id(getattr(esper, name)) for name in esper.__all__}
    exported = {name for name, value in vars(leyline).items() if not name.startswith("_") and (
        id(value) in theirs or getattr(value, "__module__", "").startswith("leyline.esper"))}
    assert not exported | (set(leyline.__all__) & set(esper.__all__)), sorted(exported)


def _docstrings(tree: ast.AST) -> set[int]:
    """The string statements of a module, class or function (docstrings, attribute docstrings): words, not names."""
    bodies = [node.body for node in ast.walk(tree) if isinstance(getattr(node, "body", None), list)]
    return {id(s.value) for body in bodies for s in body
            if isinstance(s, ast.Expr) and isinstance(s.value, ast.Constant)}


def test_the_core_contract_names_no_series_of_a_client_kind():
    """The chart list (``leyline/charts.py``) reads Esper's charts from where Esper declares them
    (``leyline.esper.charts``), as the kinds table reads its kinds: no string of the core contract's code names a
    series of a client's kind (``ppo_update.``, ``epoch_completed.accuracy``)."""
    kinds = {kind.value for kind in EsperKind}
    offenders = []
    for path in sorted((ROOT / "leyline").rglob("*.py")):
        rel = path.relative_to(ROOT).as_posix()
        if rel.startswith("leyline/esper/"):
            continue
        tree = ast.parse(path.read_text(), filename=str(path))
        words = _docstrings(tree)
        offenders += [f"{rel}:{node.lineno} {node.value!r}" for node in ast.walk(tree)
                      if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in words
                      and node.value.split(".")[0].split("{")[0] in kinds]
    assert not offenders, "\n".join(offenders)
