"""esper-train reaches Nissa through the names ``nissa`` exports (its ``__all__``), as any loop would; the
distributed setup it shares with the client is the ``ranks`` package, not the client's insides."""

import ast
import pathlib
import subprocess
import sys

import nissa

ROOT = pathlib.Path(__file__).resolve().parents[1]


def _nissa_imports(path: pathlib.Path) -> list[tuple[str, str]]:
    """(module, name) of every import of ``nissa`` or its parts in ``path``, at any depth of the file."""
    found: list[tuple[str, str]] = []
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            found += [(a.name, "") for a in node.names if a.name.split(".")[0] == "nissa"]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and (node.module or "").split(".")[0] == "nissa":
            found += [(node.module or "", a.name) for a in node.names]
    return found


def test_trainer_imports_only_what_nissa_exports():
    exported = set(nissa.__all__)
    offenders = [f"{path.relative_to(ROOT)}: {module} {name}".rstrip()
                 for path in sorted((ROOT / "trainer").rglob("*.py"))
                 for module, name in _nissa_imports(path) if module != "nissa" or name not in exported]
    assert not offenders, "\n".join(offenders)


def test_every_exported_name_is_there_and_loaded_on_first_use():
    assert set(nissa.__all__) == set(nissa._EXPORTS) | {"init", "upload"}
    for name in nissa.__all__:
        assert getattr(nissa, name) is not None, name
    code = "import sys, nissa; print('torch' in sys.modules, 'nissa.hub' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.split() == ["False", "False"]


def test_ppo_reduces_through_ranks_not_the_telemetry_client():
    for part in ("simic/ppo.py", "simic/agent.py"):
        modules = {m for m, _ in _nissa_imports(ROOT / "trainer" / part)}
        assert not modules, f"trainer/{part} imports {modules}"
        text = (ROOT / "trainer" / part).read_text()
        assert "from ranks import" in text
