"""What a probed loop starts with (``nissa sweep create``'s probe of a ``pbt`` spec): the values a trial could have,
and a run that talks to no server and logs in the probe's directory."""

import math

import msgspec
import pytest

from leyline.sweeps import Parameter
from nissa.settings import Settings
from nissa.sweep.probe import first_values
from nissa.sweep.probed import ProbeSettings, applied, current


def test_each_list_gives_its_first_value_and_each_range_its_middle():
    params = {"opt": Parameter(values=["adam", "sgd"]), "lr": Parameter(min=0.001, max=0.1, log=True),
              "momentum": Parameter(min=0.0, max=0.9), "hidden": Parameter(min=8, max=64, log=True),
              "layers": Parameter(min=1, max=4)}
    values = first_values(params)
    assert values["opt"] == "adam" and math.isclose(values["lr"], 0.01) and math.isclose(values["momentum"], 0.45)
    assert values["hidden"] == 23 and values["layers"] == 2  # whole numbers: sqrt(8 * 64) and 2.5 rounded
    assert isinstance(values["hidden"], int) and isinstance(values["lr"], float)


def test_a_probed_run_streams_nowhere_and_logs_in_the_probes_directory(tmp_path):
    loop = Settings(server="http://127.0.0.1:8765", token="t", log_dir="runs", config={"lr": 0.1, "hidden": 16})
    probe = msgspec.json.decode(msgspec.json.encode({"report": str(tmp_path / "hooks.json"),
                                                     "log_dir": str(tmp_path / "runs"), "params": {"lr": 0.01}}),
                                type=ProbeSettings)
    s = applied(loop, probe)
    assert s.stream_to is None and s.hub("r-1", 0).server is None
    assert s.log_root == tmp_path / "runs" and not s.system_metrics
    assert dict(s.config or {}) == {"lr": 0.01, "hidden": 16}


def test_a_malformed_probe_variable_is_refused_naming_it(monkeypatch):
    monkeypatch.setenv("NISSA_SWEEP_PROBE", '{"report": "x"}')
    with pytest.raises(ValueError, match=r"\$NISSA_SWEEP_PROBE is not what nissa sets there"):
        current()
    monkeypatch.delenv("NISSA_SWEEP_PROBE")
    assert current() is None


def test_a_probes_unreadable_report_is_refused_with_its_text_made_visible():
    """A command (a shared spec's) that writes a report of its hooks with an escape sequence in a field's name:
    the refusal shows it, the terminal never receives it."""
    import sys

    from nissa.sweep.probe import ProbeFailed, probe

    writes = ("import json, os; report = json.loads(os.environ['NISSA_SWEEP_PROBE'])['report']; "
              "open(report, 'w').write(json.dumps({'\\x1b]0;pwned\\x07\\x1b[2J': 1}))")
    with pytest.raises(ProbeFailed, match="cannot be read") as refused:
        probe([sys.executable, "-c", writes], {}, timeout_s=60)
    assert "\x1b" not in str(refused.value) and "\x07" not in str(refused.value)
