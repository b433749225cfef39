"""Config as data: every TrainConfig and PPOConfig field is an esper-train flag made from the dataclass (name,
type, help from the field's docstring, default from the dataclass); a flag sets its field."""

from __future__ import annotations

import argparse
import dataclasses
import enum
import pathlib
from dataclasses import dataclass
from typing import Literal

import pytest

from trainer import flags
from trainer.checkpoint.resume import resumed_config
from trainer.cli import train_parser
from trainer.simic.config import NOT_FLAGS, ConfigError, TrainConfig, training_dests
from trainer.simic.ppo import PPOConfig

FIELDS = [(TrainConfig, "", f) for f in dataclasses.fields(TrainConfig) if f.name not in NOT_FLAGS] + \
         [(PPOConfig, "ppo", f) for f in dataclasses.fields(PPOConfig)]
NON_DEFAULT = {"policy": "heuristic", "slots": "r0c2", "device": "cpu", "amp_dtype": "bfloat16",
               "compile_mode": "default", "env_exec": "per-env", "task": "cifar10", "data_dir": "somewhere",
               "cuda_graphs": "on", "clip": "0.3", "gamma": "0.9", "gae_lambda": "0.5"}
"""A value other than the default for the fields where adding one to it would not do."""


def _options(parser: argparse.ArgumentParser) -> dict[str, argparse.Action]:
    return {a.dest: a for a in parser._actions if a.option_strings}


def _argv_for(cls: type, prefix: str, f: dataclasses.Field) -> list[str]:
    flag = flags.flag_of(f.name, prefix)
    default = getattr(cls(), f.name)
    if isinstance(default, bool):
        return [flag if not default else "--no-" + flag.removeprefix("--")]
    value = NON_DEFAULT.get(f.name, str(default + 1) if isinstance(default, int) else
                            str(default / 2) if isinstance(default, float) else None)
    assert value is not None, f"no other value known for {f.name}"
    return [flag, value]


@pytest.mark.parametrize(("cls", "prefix", "field"), FIELDS, ids=lambda v: getattr(v, "name", ""))
def test_every_field_has_a_flag_with_its_docstring_and_default(cls, prefix, field):
    action = _options(train_parser())[flags.dest_of(field.name, prefix)]
    assert flags.flag_of(field.name, prefix) in action.option_strings
    doc = flags.field_docs(cls)[field.name]
    assert action.help and action.help.startswith(doc.replace("``", "")[:20])
    default = getattr(cls(), field.name)
    assert action.default == (",".join(default) if isinstance(default, tuple) else default)
    if default is not None:  # shown by argparse from the action's default, not copied into the text
        assert "%(default)s" in action.help


@pytest.mark.parametrize(("cls", "prefix", "field"), FIELDS, ids=lambda v: getattr(v, "name", ""))
def test_a_flag_sets_its_field(cls, prefix, field):
    ns = train_parser().parse_args(_argv_for(cls, prefix, field))
    got = flags.values(ns, cls, prefix=prefix)[field.name]
    assert got != flags.values(train_parser().parse_args([]), cls, prefix=prefix)[field.name]
    if field.name not in ("cuda_graphs", "task"):  # a GPU, CIFAR-10's files: the namespace carries them anyway
        config = TrainConfig.from_args(ns)
        value = getattr(config.ppo if prefix else config, field.name)
        assert value == (tuple(got.split(",")) if field.name == "slots" else got)


def test_defaults_come_from_the_dataclasses():
    assert TrainConfig.from_args(train_parser().parse_args([])) == TrainConfig()
    assert TrainConfig().ppo == PPOConfig()
    assert set(training_dests()) <= set(_options(train_parser()))


def test_old_spellings_still_set_their_fields():
    config = TrainConfig.from_args(train_parser().parse_args(
        ["--ppo-epochs", "3", "--entropy-coef", "0.2", "--epochs", "5", "--ppo-lr", "0.01"]))
    assert (config.ppo.update_epochs, config.ppo.entropy_coef, config.episode_length, config.ppo.lr) == \
        (3, 0.2, 5, 0.01)


@pytest.mark.parametrize(("argv", "flag"), [(["--ppo-clip", "1.5"], "--ppo-clip"),
                                            (["--ppo-epochs", "0"], "--ppo-update-epochs"),
                                            (["--ppo-gamma", "0"], "--ppo-gamma")])
def test_a_bad_ppo_value_names_its_flag(argv, flag):
    with pytest.raises(ConfigError, match=f"^{flag}: must be"):
        TrainConfig.from_args(train_parser().parse_args(argv))


def test_given_tells_the_spelled_out_flags_from_the_defaults():
    argv = ["--rounds", "3", "--ppo-gamma", "0.9", "--run-name", "x"]
    assert flags.given(train_parser(), argv, training_dests()) == {"rounds": 3, "ppo_gamma": 0.9}


def test_a_resume_keeps_the_checkpoints_ppo_config_and_refuses_another():
    stored = TrainConfig(ppo=PPOConfig(gamma=0.9), rounds=2).as_flat_dict()
    assert stored["ppo.gamma"] == 0.9
    assert resumed_config(stored, {"rounds": 5}) == TrainConfig(ppo=PPOConfig(gamma=0.9), rounds=5)
    with pytest.raises(ConfigError, match="^--ppo-gamma: the checkpoint was taken with 0.9"):
        resumed_config(stored, {"ppo_gamma": 0.8})
    legacy = {"ppo_lr": 0.01, "ppo_epochs": 2, "entropy_coef": 0.0, "rounds": 2}  # a checkpoint from before
    assert resumed_config(legacy, {}).ppo == PPOConfig(lr=0.01, update_epochs=2, entropy_coef=0.0)


@dataclass(frozen=True)
class _Knobs:
    mode: Literal["a", "b"] = "a"
    """Which way. The rest explains why."""
    size: int | None = None
    """How big, if at all."""
    on: bool = False
    """Whether."""


def test_the_generic_function_on_any_dataclass():
    parser = argparse.ArgumentParser()
    flags.add_fields(parser, _Knobs, prefix="k")
    help_text = parser.format_help()
    assert "Which way (default: a)" in help_text and "The rest" not in help_text
    assert "--k-size" in help_text and "(default: none)" in help_text and "--no-k-on" in help_text
    ns = parser.parse_args(["--k-mode", "b", "--k-size", "3", "--k-on"])
    assert _Knobs(**flags.values(ns, _Knobs, prefix="k")) == _Knobs(mode="b", size=3, on=True)
    with pytest.raises(SystemExit):
        parser.parse_args(["--k-mode", "c"])


class _Colour(enum.StrEnum):
    RED = "RED"
    BLUE = "BLUE"


@dataclass(frozen=True)
class _Upload:
    where: pathlib.Path
    """Which directory."""
    labels: tuple[str, ...] = ()
    """A label (repeat for several)."""
    colour: _Colour = _Colour.RED
    """The colour, in any case."""
    key: str | None = None
    """A secret."""
    loud: bool = False
    """Say more."""

    def __post_init__(self) -> None:
        if self.where.name == "..":
            raise flags.FieldError("where", "not a parent", value=self.where)
        flags.as_field_error("key", lambda: _check_key(self.key))


def _check_key(key: str | None) -> None:
    if key == "bad":
        raise ValueError("--key: must not be 'bad'")


def test_positional_repeated_case_folded_and_secret_fields():
    parser = argparse.ArgumentParser()
    flags.add_fields(parser, _Upload, default={"key": "hush"}, names={"labels": ["--label"], "loud": ["-l", "--loud"]},
                     repeat=["labels"], fold_case=["colour"], secret=["key"])
    help_text = parser.format_help()
    assert "hush" not in help_text and "A secret (default: set, not shown)" in help_text
    assert "The colour, in any case (default: RED)" in help_text and "A label (repeat for several) (default: none)" \
        in help_text
    ns = parser.parse_args(["somewhere", "--label", "a", "--label", "b", "--colour", "blue", "-l"])
    assert (ns.where, ns.labels, ns.colour, ns.key, ns.loud) == (pathlib.Path("somewhere"), ("a", "b"), "BLUE",
                                                                  "hush", True)
    assert flags.build(_Upload, flags.values(ns, _Upload)) == _Upload(pathlib.Path("somewhere"), ("a", "b"),
                                                                      _Colour.BLUE, "hush", True)
    with pytest.raises(SystemExit):
        parser.parse_args([])  # the positional field is required
    with pytest.raises(SystemExit):
        parser.parse_args(["x", "--colour", "green"])
    with pytest.raises(ValueError, match=r"^--where \.\.: not a parent$"):
        flags.build(_Upload, flags.values(parser.parse_args([".."]), _Upload))
    with pytest.raises(ValueError, match="^--key: must not be 'bad'$"):
        flags.build(_Upload, flags.values(parser.parse_args(["x", "--key", "bad"]), _Upload))
