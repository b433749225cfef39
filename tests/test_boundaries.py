"""trainer, nissa_server and tui never import each other; leyline imports none of them; tui never imports torch;
the nissa client stands on leyline only, and of the others only trainer may use it."""

import ast
import pathlib

import pytest

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
