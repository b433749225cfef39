"""docker-compose.yml parses, its commands are this project's console scripts, the Dockerfile installs them."""

import pathlib
import subprocess
import tomllib

import pytest
import yaml

from tests.support.server import script_path

ROOT = pathlib.Path(__file__).resolve().parents[2]


def _compose() -> dict:
    return yaml.safe_load((ROOT / "docker-compose.yml").read_text())


def _scripts() -> dict[str, str]:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]


def test_compose_has_the_three_services():
    services = _compose()["services"]
    assert {"server", "trainer", "watcher"} <= set(services)
    assert services["watcher"]["tty"] is True and services["watcher"]["stdin_open"] is True


@pytest.mark.parametrize("service, script",
                         [("server", "nissa-server"), ("trainer", "esper-train"), ("watcher", "esper-watch")])
def test_service_runs_a_console_script(service, script):
    command = _compose()["services"][service]["command"]
    assert command[0] == script and script in _scripts()


@pytest.mark.parametrize("service", ["server", "trainer", "watcher"])
def test_service_arguments_are_accepted_by_the_script(service):
    """Each service's flags parse: the script's --help lists every flag the compose file passes."""
    command = _compose()["services"][service]["command"]
    exe = script_path(command[0])
    helptext = subprocess.run([exe, "--help"], capture_output=True, text=True, timeout=60).stdout
    for arg in command[1:]:
        if arg.startswith("--"):
            assert arg in helptext, f"{command[0]} has no flag {arg}"


def test_server_on_all_interfaces_is_given_a_token():
    server = _compose()["services"]["server"]
    assert "0.0.0.0" in server["command"]
    assert "NISSA_TOKEN" in server["environment"]


def test_dockerfile_pins_torch_and_installs_the_project():
    text = (ROOT / "Dockerfile").read_text()
    assert text.startswith("#") and "FROM python:3.11" in text
    assert "torch==2.13.0" in text and "-c constraints.txt ." in text
    for package in _packages():
        assert f"COPY {package} ./{package}" in text, package


def _packages() -> set[str]:
    """The top-level packages ``pip install .`` installs (pyproject's ``packages.find``)."""
    include = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"]["find"]["include"]
    tops = {pattern.split(".")[0].rstrip("*") for pattern in include}
    found = {path.parent.name for path in ROOT.glob("*/__init__.py")
             if any(path.parent.name.startswith(t) for t in tops)}
    assert {"leyline", "nissa", "trainer", "nissa_server", "tui"} <= found, found
    return found
