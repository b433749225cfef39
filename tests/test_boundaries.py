"""trainer, nissa_server and tui never import each other; leyline imports none of them; tui never imports torch;
the nissa client stands on leyline only, and of the others only trainer may use it."""

import ast
import pathlib

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
FORBIDDEN = {
    "leyline": {"nissa", "trainer", "nissa_server", "tui", "torch", "fastapi", "textual"},
    "nissa": {"trainer", "nissa_server", "tui", "fastapi", "textual"},
    "trainer": {"nissa_server", "tui", "fastapi", "textual"},
    "nissa_server": {"nissa", "trainer", "tui", "torch", "textual"},
    "tui": {"nissa", "trainer", "nissa_server", "torch"},
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
