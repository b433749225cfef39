"""Each program reads its ``NISSA_*`` / ``ESPER_*`` environment variables in one module; the rest of it receives
the values."""

import ast
import pathlib
import re

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
READER = {"nissa": "nissa/env.py", "trainer": "trainer/cli.py", "nissa_server": "nissa_server/settings.py",
          "tui": "tui/cli.py"}
"""The one module of each program (the client library, esper-train, nissa-server, esper-watch) that reads them."""
OURS = re.compile(r"^(NISSA|ESPER)_[A-Z_]+$")


def _reads_ours(path: pathlib.Path) -> bool:
    """Does the module touch the environment, and name one of our variables?"""
    tree = ast.parse(path.read_text(), filename=str(path))
    touches = any(isinstance(n, ast.Attribute) and n.attr in ("environ", "getenv", "environb") for n in ast.walk(tree))
    names = any(isinstance(n, ast.Constant) and isinstance(n.value, str) and OURS.match(n.value)
                for n in ast.walk(tree))
    return touches and names


@pytest.mark.parametrize("package", sorted(READER))
def test_environment_variables_are_read_in_one_module(package):
    readers = sorted(str(p.relative_to(ROOT)) for p in (ROOT / package).rglob("*.py") if _reads_ours(p))
    assert readers == [READER[package]]
