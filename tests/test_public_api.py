"""``nissa``'s public surface is curated: a handful of names a loop's author uses, each documented, loaded on first
use; the parts a run is made of live in one documented submodule, ``nissa.parts``. esper-train reaches Nissa as any
loop would: ``nissa``'s names, ``nissa.parts`` for its collectors and command handlers, and ``Run``'s methods,
never the run's runtime or hub; the distributed setup it shares with the client is the ``ranks`` package."""

import ast
import pathlib
import subprocess
import sys

import pytest

import nissa
import nissa.parts

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


def _trainer_files() -> list[pathlib.Path]:
    return sorted((ROOT / "trainer").rglob("*.py"))


def test_nissa_exports_a_few_documented_names_listed_once():
    assert len(nissa.__all__) <= 15, nissa.__all__
    assert nissa.__all__ == ["init", "upload", *_typed(ROOT / "nissa" / "__init__.py")]
    for name in nissa.__all__:
        doc = getattr(nissa, name).__doc__
        assert doc and doc.strip(), f"nissa.{name} has no docstring"
        assert f"``{name}``" in (nissa.__doc__ or ""), f"nissa's docstring does not say what {name} is for"


def _typed(path: pathlib.Path) -> list[str]:
    """The names a module's ``if TYPE_CHECKING:`` block imports from ``nissa``, in order: what the type checker
    sees, and the one list its lazily loaded names come from."""
    tree = ast.parse(path.read_text())
    return [alias.asname or alias.name for node in ast.walk(tree) if isinstance(node, ast.If)
            for stmt in node.body if isinstance(stmt, ast.ImportFrom) and (stmt.module or "").startswith("nissa")
            for alias in stmt.names]


def test_the_exported_names_and_the_parts_are_loaded_on_first_use():
    assert nissa.Run.__module__ == "nissa.run" and nissa.integrations.__name__ == "nissa.integrations"
    for module, part in ((nissa, "HubConfig"), (nissa.parts, "Run")):  # each name in its one place
        with pytest.raises(AttributeError, match=f"has no attribute '{part}'"):
            getattr(module, part)
    code = ("import sys, nissa, nissa.parts; nissa.parts.check_servers('http://h:1'); "
            "print('torch' in sys.modules, 'nissa.runtime' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.split() == ["False", "False"]


def test_the_parts_are_there_and_documented():
    assert nissa.parts.__all__ == _typed(ROOT / "nissa" / "parts.py")
    doc = nissa.parts.__doc__ or ""
    for name in nissa.parts.__all__:
        assert getattr(nissa.parts, name) is not None, name
        assert f"``{name}``" in doc, f"nissa.parts' docstring does not say what {name} is for"
    assert not set(nissa.parts.__all__) & set(nissa.__all__)  # one place for each name
    assert "nissa.parts" in (ROOT / "README.md").read_text()


def test_trainer_imports_only_nissa_and_its_parts():
    offenders = [f"{path.relative_to(ROOT)}: {module} {name}".rstrip()
                 for path in _trainer_files() for module, name in _nissa_imports(path)
                 if not (module == "nissa" and name in nissa.__all__
                         or module == "nissa.parts" and name in nissa.parts.__all__)]
    assert not offenders, "\n".join(offenders)


def test_trainer_never_reaches_into_a_runs_runtime_or_hub():
    """A ``Run``'s methods are what the trainer needs of it (``run.hooks``, ``run.handle``, ``run.delivery()``…)."""
    offenders = []
    for path in _trainer_files():
        for node in ast.walk(ast.parse(path.read_text())):
            if not isinstance(node, ast.Attribute):
                continue
            owner = node.value.id if isinstance(node.value, ast.Name) else getattr(node.value, "attr", "")
            if node.attr == "hub" or node.attr == "runtime" and owner == "run":
                offenders.append(f"{path.relative_to(ROOT)}:{node.lineno}: {owner}.{node.attr}")
    assert not offenders, "\n".join(offenders)


def test_ppo_reduces_through_ranks_not_the_telemetry_client():
    for part in ("simic/ppo.py", "simic/agent.py"):
        modules = {m for m, _ in _nissa_imports(ROOT / "trainer" / part)}
        assert not modules, f"trainer/{part} imports {modules}"
        text = (ROOT / "trainer" / part).read_text()
        assert "from ranks import" in text
