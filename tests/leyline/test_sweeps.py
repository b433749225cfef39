"""A sweep spec: what it takes, and hostile ones refused with the key and the rule."""

from __future__ import annotations

import math
import tomllib

import pytest

from leyline.sweeps import MAX_TRIALS, decode_spec

GOOD = """
name = "lr"
method = "random"
command = ["python", "train.py"]
trials = 6
[metric]
name = "val_loss"
[parameters.lr]
min = 0.0001
max = 0.1
log = true
[parameters.layers]
min = 1
max = 4
[parameters.act]
values = ["relu", "gelu"]
"""


def _spec(text: str = GOOD, **changes: object) -> dict:
    data = tomllib.loads(text)
    data.update(changes)
    return data


def test_a_good_spec_decodes_with_its_defaults():
    spec = decode_spec(_spec())
    assert spec.metric.goal == "minimize" and spec.parallel == 1 and spec.budget == 6
    assert spec.parameters["layers"].is_int and not spec.parameters["lr"].is_int
    assert spec.parameters["layers"].clip(3.6) == 4 and spec.parameters["lr"].clip(5.0) == 0.1


@pytest.mark.parametrize(("change", "words"), [
    ({"trials": 10**9}, f"<= {MAX_TRIALS} - at `$.trials`"),
    ({"command": "python train.py"}, "Expected `array`, got `str` - at `$.command`"),
    ({"command": []}, "length >= 1 - at `$.command`"),
    ({"command": ["python", "a\x00b"]}, "Expected `str` with no control character"),
    ({"command": ["echo", "a\x1b\u202e\x9b"]}, "control character (C0 but tab, newline and carriage return; DEL; C1; a "
                                              "bidi embedding, override or isolate) - at `$.command[1]`"),
    ({"command": ["echo\x7f"]}, "- at `$.command[0]`"),
    ({"project": "p\x1b[2J"}, "- at `$.project`"),
    ({"project": "my project"}, "- at `$.project`"),
    ({"parameters": {"act": {"values": ["relu", "g\u2066"]}}}, "control character"),
    ({"parameters": {"act": {"values": ["relu", "g\x9b"]}}}, "- at `$.parameters.act.values[1]`"),
    ({"unknown": 1}, "unknown field `unknown`"),
    ({"parameters": {"lr": {"min": math.nan, "max": 1.0}}}, "finite"),
    ({"parameters": {"lr": {"min": 1.0, "max": math.inf}}}, "finite"),
    ({"parameters": {"lr": {"min": 1.0, "max": 0.5}}}, "must be below 'max'"),
    ({"parameters": {"lr": {"min": 0.0, "max": 1.0, "log": True}}}, "'min' > 0"),
    ({"parameters": {"lr": {"min": 0.0}}}, "needs 'min' and 'max'"),
    ({"parameters": {"lr": {"values": [1, 2], "min": 0.0}}}, "not both"),
    ({"parameters": {"lr": {"min": 0, "max": 1, "step": 2}}}, "unknown field `step` - at `$.parameters.lr`"),
    ({"parameters": {"bad name!": {"values": [1]}}}, "$.parameters"),
    ({"parameters": {}}, "length >= 1 - at `$.parameters`"),
    ({"method": "grid"}, "'grid' needs 'values' for every parameter (no list: lr, layers)"),
    ({"method": "pbt", "trials": 4, "parallel": 2}, "'parallel' (2) must be at least 'trials' (4)"),
    ({"method": "pbt", "trials": 1, "parallel": 1}, "at least 2"),
    ({"pbt": {"interval": 5}}, "belongs to method 'pbt'"),
    ({"method": "pbt", "trials": 4, "parallel": 4, "pbt": {"quantile": 0.9}}, "<= 0.5 - at `$.pbt.quantile`"),
    ({"method": "pbt", "trials": 4, "parallel": 4, "pbt": {"perturb": [0.8, math.nan]}}, "'perturb'"),
    ({"method": "pbt", "trials": 4, "parallel": 4, "early_stop": {"kind": "asha"}}, "takes no 'early_stop'"),
    ({"early_stop": {"kind": "hyperband"}}, "$.early_stop.kind"),
    ({"metric": {"name": "val_loss", "goal": "lower"}}, "$.metric.goal"),
    ({"name": "../../etc"}, "$.name"),
])
def test_a_hostile_spec_is_refused_with_the_key_and_the_rule(change, words):
    with pytest.raises(ValueError) as err:
        decode_spec(_spec(**change))
    assert words in str(err.value)


def test_a_command_keeps_its_tabs_and_newlines():
    assert decode_spec(_spec(command=["sh", "-c", "echo a\tb\necho c\r"])).command[2] == "echo a\tb\necho c\r"


def test_grid_runs_at_most_its_points():
    spec = decode_spec(_spec(method="grid", trials=100, parameters={"a": {"values": [1, 2, 3]},
                                                                    "b": {"values": ["x", "y"]}}))
    assert spec.grid_size == 6 and spec.budget == 6


def test_the_example_specs_decode():
    import pathlib

    found = sorted((pathlib.Path(__file__).resolve().parents[2] / "examples" / "sweeps").glob("*.toml"))
    assert len(found) >= 3
    for path in found:
        assert decode_spec(tomllib.loads(path.read_text())).budget >= 1, path
